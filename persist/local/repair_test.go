package local

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// damagedDir builds a closed log of several segments in a fresh directory, sets its
// recovery point inside the second-to-last segment (so that segment is scanned at open)
// and flips a byte of a batch below it there. It returns the directory, every batch,
// and the bad one.
func damagedDir(t *testing.T) (string, []batchAt, batchAt) {
	t.Helper()
	dir := t.TempDir()
	buildLog(t, dir, Options{SegmentBytes: 8 << 10, Sync: SyncNever}, 400)
	all := layout(t, dir)
	files, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	var in []batchAt
	for _, b := range all {
		if b.file == files[len(files)-2] {
			in = append(in, b)
		}
	}
	bad := in[2]
	setRecoveryPoint(t, dir, in[5].last)
	patchFile(t, bad.file, func(d []byte) []byte { d[bad.pos+40] ^= 1; return d })
	return dir, all, bad
}

// TestRepair: a damaged log is cut by the operator at the damage: the plan names the
// segment cut, the segments deleted, the offsets removed and the acknowledged records
// given up; a dry run (plan only) changes nothing; applying it gives a log that opens
// healthy at the cut and goes on.
func TestRepair(t *testing.T) {
	dir, all, bad := damagedDir(t)
	l := openLog(t, dir, Options{Sync: SyncNever})
	var ce *CorruptionError
	if !errors.As(l.Damage(), &ce) || ce.Offset != bad.base {
		t.Fatalf("damage %v, want at %d", l.Damage(), bad.base)
	}
	l.Close()
	rp := readRP(t, dir)
	before := snapshot(t, dir)

	p, err := PlanRepair(nil, dir, bad.base)
	if err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	if p.Segment != bad.file || p.Pos != bad.pos || p.CutBytes != fileSize(t, bad.file)-bad.pos ||
		len(p.Deleted) != 1 || p.Deleted[0] != files[len(files)-1] || p.DeletedBytes != fileSize(t, files[len(files)-1]) {
		t.Fatalf("plan %+v", p)
	}
	if p.End != all[len(all)-1].last+1 || !p.HasOld || p.New != bad.base-1 || p.Acknowledged != rp.Offset-bad.base+1 {
		t.Fatalf("plan: end %d, recovery point %v %d -> %d, acknowledged %d", p.End, p.HasOld, p.Old.Offset, p.New, p.Acknowledged)
	}
	if after := snapshot(t, dir); !equalSnapshots(before, after) {
		t.Fatal("planning a repair changed the directory")
	}
	if err := p.Apply(); err != nil {
		t.Fatal(err)
	}
	if rp := readRP(t, dir); rp.Offset != bad.base-1 {
		t.Fatalf("recovery point %+v after the repair", rp)
	}
	if problems, err := Inspect(nil, dir, nil); err != nil || len(problems) != 0 {
		t.Fatalf("inspect after the repair: %v %v", problems, err)
	}
	l = openLog(t, dir, Options{Sync: SyncNever})
	if l.Damage() != nil || l.Next() != bad.base {
		t.Fatalf("after the repair: damage %v, next %d, want %d", l.Damage(), l.Next(), bad.base)
	}
	checkContents(t, l)
	appendN(t, l, 50)
	checkContents(t, l)
}

// TestRepairRefusesNonBoundaries: an offset inside a batch, or past the valid batches of
// its segment, is refused with the nearest boundaries; below the log, out of range.
func TestRepairRefusesNonBoundaries(t *testing.T) {
	dir, all, bad := damagedDir(t)
	before := snapshot(t, dir)
	var inside batchAt
	for _, b := range all {
		if b.last > b.base {
			inside = b
			break
		}
	}
	var be *BoundaryError
	if _, err := PlanRepair(nil, dir, inside.base+1); !errors.As(err, &be) || !errors.Is(err, ErrNotBatchBoundary) ||
		be.Below != inside.base || be.Above != inside.last+1 {
		t.Fatalf("inside a batch: %v", err)
	}
	if _, err := PlanRepair(nil, dir, bad.base+1); !errors.As(err, &be) || be.Below != bad.base || be.Above != -1 {
		t.Fatalf("past the damage: %v", err)
	}
	if _, err := PlanRepair(nil, dir, -5); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("below the log: %v", err)
	}
	if after := snapshot(t, dir); !equalSnapshots(before, after) {
		t.Fatal("a refused repair changed the directory")
	}
	// Cutting at a boundary below the damage, or at the start of the log, works too.
	p, err := PlanRepair(nil, dir, all[3].base)
	if err != nil || p.Pos != all[3].pos || len(p.Deleted) == 0 {
		t.Fatalf("plan at %d: %+v %v", all[3].base, p, err)
	}
	p, err = PlanRepair(nil, dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Apply(); err != nil {
		t.Fatal(err)
	}
	l := openLog(t, dir, Options{})
	if l.Damage() != nil || l.Start() != 0 || l.Next() != 0 {
		t.Fatalf("after cutting everything: damage %v, [%d, %d)", l.Damage(), l.Start(), l.Next())
	}
}

// TestRepairWithoutRecoveryPoint: a directory without a recovery point is repaired too,
// and gets one.
func TestRepairWithoutRecoveryPoint(t *testing.T) {
	dir, all, _ := damagedDir(t)
	os.Remove(filepath.Join(dir, recoveryPointName))
	at := all[10].base
	p, err := PlanRepair(nil, dir, at)
	if err != nil || p.HasOld || p.Acknowledged != -1 || p.New != at-1 {
		t.Fatalf("plan %+v %v", p, err)
	}
	if err := p.Apply(); err != nil {
		t.Fatal(err)
	}
	if rp := readRP(t, dir); rp.Offset != at-1 {
		t.Fatalf("recovery point %+v", rp)
	}
	l := openLog(t, dir, Options{})
	if l.Damage() != nil || l.Next() != at {
		t.Fatalf("damage %v, next %d", l.Damage(), l.Next())
	}
	checkContents(t, l)
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

func equalSnapshots(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}
