package segment

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
