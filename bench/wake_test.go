package bench

import (
	"strings"
	"testing"
	"time"
)

// TestMeasureWake measures real sleeps: each takes at least what it asked, the thread's
// processor time per wake is some and no more than the sleep took in all (one thread
// cannot run longer than the time that passed), and nonsense is refused.
func TestMeasureWake(t *testing.T) {
	const d = 50 * time.Microsecond
	w, err := MeasureWake(200, d)
	if err != nil {
		t.Fatal(err)
	}
	if w.Sleep != d || w.Wakes != 200 {
		t.Errorf("measured %d sleeps of %v, want 200 of %v", w.Wakes, w.Sleep, d)
	}
	if w.Turn < d {
		t.Errorf("a sleep of %v took %v", d, w.Turn)
	}
	if w.CPU <= 0 || w.CPU > w.Turn {
		t.Errorf("processor time per wake %v, want in (0, %v]", w.CPU, w.Turn)
	}
	for _, bad := range []struct {
		n int
		d time.Duration
	}{{0, d}, {-1, d}, {10, 0}} {
		if _, err := MeasureWake(bad.n, bad.d); err == nil {
			t.Errorf("MeasureWake(%d, %v) gave no error", bad.n, bad.d)
		}
	}
}

// TestMachineMarkdownWake: the machine line says what a wake cost when it was measured,
// and nothing of it when it was not.
func TestMachineMarkdownWake(t *testing.T) {
	m := Machine{CPU: "AMD EPYC", Cores: 2, Memory: "23.5 GiB", Kernel: "6.18", Go: "go1.26"}
	if got := m.markdown("sluice", ""); strings.Contains(got, "wake") {
		t.Errorf("without a measurement the line speaks of wakes: %s", got)
	}
	m.Wake = &WakeCost{Sleep: 50 * time.Microsecond, Wakes: 2000, CPU: 53 * time.Microsecond, Turn: 140 * time.Microsecond}
	got := m.markdown("sluice", "load average 1 1 1")
	want := "; a thread's wake from a 50 µs nanosleep cost it 53 µs of processor time (each sleep took 140 µs; 2000 sleeps)."
	if !strings.HasSuffix(got, want) {
		t.Errorf("machine line\n%s\ndoes not end with\n%s", got, want)
	}
}

// TestMeasureWakeWindow: work the calling thread did just before the measurement is not
// charged to the wakes. The goroutine MeasureWake starts usually runs on the caller's
// thread; with getrusage(RUSAGE_THREAD), whose figure leaves out the running slice on a
// kernel with tick accounting, 30 ms of spinning before 4 sleeps came out at up to 5.7
// times the sleeps' time per wake (a review's test, 4 failures in 4 runs).
func TestMeasureWakeWindow(t *testing.T) {
	for round := range 4 {
		for start := time.Now(); time.Since(start) < 30*time.Millisecond; {
		}
		w, err := MeasureWake(4, 50*time.Microsecond)
		if err != nil {
			t.Fatal(err)
		}
		if w.CPU > w.Turn {
			t.Errorf("round %d: processor time per wake %v above the time per sleep %v: time from before the window counted", round, w.CPU, w.Turn)
		}
	}
}
