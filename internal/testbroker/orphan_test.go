package testbroker

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestBrokerDiesWithTheTestBinary: a test binary killed before its cleanups run (a
// timeout, a Ctrl-C, a CI job stopped) takes its brokers with it. This binary plays the
// killed one in a child process: it starts a broker, writes the broker's pid and waits;
// the test kills it with SIGKILL and checks that the broker is gone soon after. (Brokers
// run in process groups of their own, so a signal to the test binary's group no longer
// reaches them: the parent-death signal must.)
func TestBrokerDiesWithTheTestBinary(t *testing.T) {
	const dirVar = "SLUICE_TESTBROKER_ORPHAN_DIR"
	if dir := os.Getenv(dirVar); dir != "" {
		b := Start(t, filepath.Join(dir, "data"))
		tmp := filepath.Join(dir, "pid.tmp")
		if err := os.WriteFile(tmp, fmt.Append(nil, b.Pid()), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, "pid")); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Minute) // killed by the test
		return
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestBrokerDiesWithTheTestBinary$")
	cmd.Env = append(os.Environ(), dirVar+"="+dir)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	var pid int
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(10 * time.Millisecond) {
		if raw, err := os.ReadFile(filepath.Join(dir, "pid")); err == nil {
			if _, err := fmt.Sscan(string(raw), &pid); err != nil {
				t.Fatalf("pid file %q: %v", raw, err)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the child test binary did not start a broker within 2 minutes")
		}
	}
	// A handle taken while the broker surely lives (its pid file is written after it
	// serves) holds a pidfd: the cleanup and the checks never reach another process that
	// takes the pid once init has reaped the broker.
	broker, err := os.FindProcess(pid)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { broker.Kill() })
	cmd.Process.Kill()
	cmd.Wait()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		// Gone, or a zombie until init reaps it: either way no longer serving.
		if err := broker.Signal(syscall.Signal(0)); err != nil || procZombie(pid) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("broker %d still runs 30 s after its test binary was killed", pid)
		}
	}
}

// procZombie reports whether process pid has exited and waits to be reaped.
func procZombie(pid int) bool {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(raw)
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == ')' {
			return i+2 < len(s) && s[i+2] == 'Z'
		}
	}
	return false
}
