package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSegmentCommands(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "p0")
	exec := func(want int, args ...string) string {
		t.Helper()
		var out, errOut bytes.Buffer
		if got := run(args, &out, &errOut); got != want {
			t.Fatalf("sluice %v: exit %d, want %d\n%s%s", args, got, want, out.String(), errOut.String())
		}
		return out.String() + errOut.String()
	}
	exec(0, "segment", "demo", "-batches", "300", dir)
	if out := exec(0, "segment", "verify", dir); !strings.HasPrefix(out, "ok:") {
		t.Fatalf("verify: %s", out)
	}
	if out := exec(0, "segment", "dump", dir); strings.Count(out, "\n") != 301 {
		t.Fatalf("dump printed %d lines", strings.Count(out, "\n"))
	}
	exec(2, "segment", "verify")
	exec(2, "segment", "verify", "a", "b")
	exec(2, "nonsense")
	exec(2, "segment", "demo", "-batches", "0", dir)
	exec(2, "segment", "verify", filepath.Join(dir, "missing"))

	seg := filepath.Join(dir, "00000000000000000000.log")
	data, _ := os.ReadFile(seg)
	data[100] ^= 0x10
	os.WriteFile(seg, data, 0o644)
	if out := exec(1, "segment", "verify", dir); !strings.Contains(out, "00000000000000000000.log at position") {
		t.Fatalf("verify of a corrupt log: %s", out)
	}
}
