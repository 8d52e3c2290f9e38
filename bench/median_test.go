package bench

import (
	"strings"
	"testing"
)

// TestMedianRun: the run of median MB/s is kept whatever the order, a failed run counts
// as the slowest, and the note lists every run in run order.
func TestMedianRun(t *testing.T) {
	rs := []*Result{{MBPerSec: 300}, {MBPerSec: 100}, {MBPerSec: 200}}
	m := medianRun(rs)
	if m.MBPerSec != 200 {
		t.Fatalf("kept %v MB/s, want the median 200", m.MBPerSec)
	}
	if !strings.Contains(m.Note, "300, 100, 200") {
		t.Fatalf("note %q does not list the runs in order", m.Note)
	}
	if rs[2].Note != "" {
		t.Fatal("medianRun changed a run it was given")
	}
	failed := []*Result{{MBPerSec: 900, Errors: 1}, {MBPerSec: 100}, {MBPerSec: 200}}
	if m := medianRun(failed); m.MBPerSec != 100 {
		t.Fatalf("with the fastest run failed, kept %v MB/s, want 100", m.MBPerSec)
	}
	if medianRun(nil) != nil {
		t.Fatal("medianRun of no runs is not nil")
	}
}
