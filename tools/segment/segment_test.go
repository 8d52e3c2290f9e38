package segment

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"sluice/persist/local"
)

func TestDemoDumpVerify(t *testing.T) {
	dir := t.TempDir()
	if err := Demo(dir, 200, 4<<10); err != nil {
		t.Fatal(err)
	}
	if err := Demo(dir, 1, 4<<10); err == nil {
		t.Fatal("demo over an existing log accepted")
	}
	var out bytes.Buffer
	if err := Verify(&out, dir); err != nil {
		t.Fatalf("verify: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "200 batches, 2000 records, offsets [0, 2000)") {
		t.Fatalf("verify output: %s", out.String())
	}
	out.Reset()
	if err := Dump(&out, dir); err != nil {
		t.Fatal(err)
	}
	if lines := strings.Count(out.String(), "\n"); lines != 201 {
		t.Fatalf("dump printed %d lines, want a header and 200 batches", lines)
	}

	// Corrupt a sealed segment: verify names the file and position and fails.
	files, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	data, _ := os.ReadFile(files[0])
	data[len(data)/2] ^= 0xff
	os.WriteFile(files[0], data, 0o644)
	out.Reset()
	err := Verify(&out, dir)
	if !errors.Is(err, ErrProblems) || !strings.Contains(out.String(), filepath.Base(files[0])+" at position") {
		t.Fatalf("verify of a corrupt log: %v\n%s", err, out.String())
	}
}

// snapshot returns every file of dir with its bytes.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for _, e := range ents {
		b, _ := os.ReadFile(filepath.Join(dir, e.Name()))
		m[e.Name()] = string(b)
	}
	return m
}

// dataEnd returns where the batches of the segment file path end (the active segment's
// file is preallocated: zeros follow).
func dataEnd(t *testing.T, dir, path string) int64 {
	t.Helper()
	var end int64
	if _, err := local.Inspect(nil, dir, func(b local.BatchInfo) {
		if b.Segment == path {
			end = b.Pos + int64(b.Header.Size())
		}
	}); err != nil {
		t.Fatal(err)
	}
	return end
}

// TestVerifyTornTailOrDamage: verify tells a torn tail (bytes after the recovery point,
// which opening the log cuts off) from damage (acknowledged data at or below it, which
// only a repair removes), and names the repair's offset.
func TestVerifyTornTailOrDamage(t *testing.T) {
	dir := t.TempDir()
	if err := Demo(dir, 200, 4<<10); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := Verify(&out, dir); err != nil || !strings.Contains(out.String(), "recovery point 1999 (clean shutdown)") {
		t.Fatalf("verify: %v\n%s", err, out.String())
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	last := files[len(files)-1]
	data, _ := os.ReadFile(last)
	end := dataEnd(t, dir, last)

	torn := append([]byte(nil), data...) // garbage where the next batch would go
	copy(torn[end:], "garbage after the last batch")
	os.WriteFile(last, torn, 0o644)
	out.Reset()
	err := Verify(&out, dir)
	if !errors.Is(err, ErrProblems) || !strings.Contains(out.String(), "TORN TAIL above the recovery point 1999") || strings.Contains(out.String(), "DAMAGE") {
		t.Fatalf("verify of a torn tail: %v\n%s", err, out.String())
	}

	bad := append([]byte(nil), data...)
	bad[end/2] ^= 0x20
	os.WriteFile(last, bad, 0o644)
	out.Reset()
	err = Verify(&out, dir)
	if !errors.Is(err, ErrProblems) || !strings.Contains(out.String(), "DAMAGE at or below the recovery point 1999") ||
		!strings.Contains(out.String(), "--truncate-at") || strings.Contains(out.String(), "TORN TAIL") {
		t.Fatalf("verify of damage: %v\n%s", err, out.String())
	}
}

// TestRepair: on a damaged partition, a dry run prints the cut and changes nothing; the
// repair itself removes what it printed and leaves a log that opens healthy at the cut.
// Offsets that are not batch boundaries are refused with the nearest ones.
func TestRepair(t *testing.T) {
	dir := t.TempDir()
	if err := Demo(dir, 300, 4<<10); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	last := files[len(files)-1]
	data, _ := os.ReadFile(last)
	data[dataEnd(t, dir, last)/2] ^= 0x20
	os.WriteFile(last, data, 0o644)
	l, err := local.Open(dir, local.Options{SegmentBytes: 4 << 10})
	if err != nil {
		t.Fatal(err)
	}
	var ce *local.CorruptionError
	if !errors.As(l.Damage(), &ce) {
		t.Fatalf("damage %v", l.Damage())
	}
	l.Close()
	at := ce.Offset
	before := snapshot(t, dir)

	var out bytes.Buffer
	if err := Repair(&out, dir, at, true); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{filepath.Base(last) + ": truncate at position", fmt.Sprintf("offsets [%d, 3000)", at),
		fmt.Sprintf("recovery point 2999 -> %d: %d acknowledged record(s)", at-1, 3000-at), "dry run: nothing changed"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("dry run output lacks %q:\n%s", want, out.String())
		}
	}
	if !reflect.DeepEqual(before, snapshot(t, dir)) {
		t.Fatal("a dry run changed the directory")
	}
	for _, c := range []struct {
		at   int64
		want string
	}{{at + 1, fmt.Sprintf("the valid batches end at %d", at)}, {5, "the nearest are 0 and 10"}} {
		out.Reset()
		if err := Repair(&out, dir, c.at, false); !errors.Is(err, local.ErrNotBatchBoundary) || !strings.Contains(err.Error(), c.want) {
			t.Fatalf("repair at %d: %v", c.at, err)
		}
	}
	if !reflect.DeepEqual(before, snapshot(t, dir)) {
		t.Fatal("a refused repair changed the directory")
	}
	out.Reset()
	if err := Repair(&out, dir, at, false); err != nil || !strings.Contains(out.String(), "done") {
		t.Fatalf("repair: %v\n%s", err, out.String())
	}
	out.Reset()
	if err := Verify(&out, dir); err != nil || !strings.Contains(out.String(), fmt.Sprintf("offsets [0, %d)", at)) {
		t.Fatalf("verify after the repair: %v\n%s", err, out.String())
	}
	l, err = local.Open(dir, local.Options{SegmentBytes: 4 << 10})
	if err != nil || l.Damage() != nil || l.Next() != at {
		t.Fatalf("open after the repair: %v, damage %v, next %d", err, l.Damage(), l.Next())
	}
	l.Close()
}
