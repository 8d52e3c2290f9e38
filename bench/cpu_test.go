package bench

import (
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestParseProcStat(t *testing.T) {
	// A command name with spaces and parentheses: fields count from the last ')'.
	line := []byte("4242 (my (odd) cmd) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 37 0 0 20 0 9 0 1000 1 1 18446744073709551615\n")
	d, ok := parseProcStat(line)
	if !ok || d != 2870*time.Millisecond {
		t.Fatalf("parseProcStat = %v, %v; want 2.87s (250 + 37 ticks)", d, ok)
	}
	for _, bad := range []string{"", "4242 (cmd", "4242 (cmd) S 1 2", "4242 (cmd) S 1 4242 4242 0 -1 4194560 100 0 0 0 x 37 0"} {
		if _, ok := parseProcStat([]byte(bad)); ok {
			t.Errorf("parseProcStat(%q) accepted", bad)
		}
	}
}

func TestParseHostTicks(t *testing.T) {
	b := []byte("cpu  642287 0 292845 1248121 21461 0 27628 50421 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\n")
	h, ok := parseHostTicks(b)
	want := hostTicks{idle: 1248121 + 21461, steal: 50421}
	if !ok || h != want {
		t.Fatalf("parseHostTicks = %+v, %v; want %+v", h, ok, want)
	}
	for _, bad := range []string{"", "cpu0 1 2 3 4 5 6 7 8", "cpu 1 2 3", "cpu 1 2 3 4 5 6 7 x"} {
		if _, ok := parseHostTicks([]byte(bad)); ok {
			t.Errorf("parseHostTicks(%q) accepted", bad)
		}
	}
}

// TestCPUSince burns processor time and reads it back as the harness's and, through
// /proc, as a server's (this process standing in for one).
func TestCPUSince(t *testing.T) {
	if _, ok := procCPU(os.Getpid()); !ok {
		t.Skip("no /proc here: the server's time cannot be read")
	}
	a := markCPU(os.Getpid())
	x := uint64(1)
	// Busy until this process has used 200 ms of processor time (however long the host
	// takes to give it), or 10 s have passed.
	used := func() time.Duration { d, _ := selfCPU(); return d }
	for start, from := time.Now(), used(); used()-from < 200*time.Millisecond && time.Since(start) < 10*time.Second; {
		for range 1000 {
			x = x*6364136223846793005 + 1442695040888963407
		}
	}
	u := cpuSince(a, markCPU(os.Getpid()))
	if x == 0 {
		t.Log(x) // keeps the loop
	}
	// getrusage and /proc's 10 ms ticks read the same process: they agree to within a
	// few ticks. The wall time can be below 200 ms: the process's other threads (the
	// collector, the race detector's) count too.
	if u.Harness < 0.2 || u.Server < 0.15 || u.Server > u.Harness+0.05 || u.Wall < 0.1 {
		t.Fatalf("cpu use over 200 ms of busy loop: %+v", u)
	}
	if u.HostBusy <= 0 || u.HostSteal < 0 || u.HostBusy+u.HostSteal > 1 {
		t.Fatalf("host shares: %+v", u)
	}
	if s := u.String(); s == "" {
		t.Fatal("no text")
	}
}

// TestSwitches: the harness and the server (here the same process, read both ways) count
// the thread switches of 200 sleeps, each a blocked thread woken again: at least 200 by
// getrusage, and /proc's sum over the threads agrees within what the process's other
// threads add (the runtime's monitor sleeps too).
func TestSwitches(t *testing.T) {
	if _, ok := procSwitches(os.Getpid()); !ok {
		t.Skip("no /proc here: the server's switches cannot be read")
	}
	runtime.LockOSThread() // the sleeps block this thread, not a goroutine on another
	defer runtime.UnlockOSThread()
	a := markCPU(os.Getpid())
	for range 200 {
		if err := unix.Nanosleep(&unix.Timespec{Nsec: 100_000}, nil); err != nil && err != unix.EINTR {
			t.Fatal(err)
		}
	}
	u := cpuSince(a, markCPU(os.Getpid()))
	if u.HarnessSwitches < 200 || u.ServerSwitches < 200 || u.ServerSwitches > 2*u.HarnessSwitches+100 {
		t.Fatalf("200 sleeps: %v switches by getrusage, %v by /proc", u.HarnessSwitches, u.ServerSwitches)
	}
	if s := u.String(); !strings.Contains(s, "thread switches") {
		t.Fatalf("%q does not give the switches", s)
	}
}

// TestParseSwitches reads the field from a status file and refuses one without it.
func TestParseSwitches(t *testing.T) {
	status := "Name:\tsluice\nState:\tS (sleeping)\nvoluntary_ctxt_switches:\t12345\nnonvoluntary_ctxt_switches:\t67\n"
	if n, ok := parseSwitches([]byte(status)); !ok || n != 12345 {
		t.Fatalf("parsed %d, %v; want 12345", n, ok)
	}
	if _, ok := parseSwitches([]byte("Name:\tx\nnonvoluntary_ctxt_switches:\t67\n")); ok {
		t.Fatal("a status without voluntary_ctxt_switches parsed")
	}
}
