package chaos

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestPausedChildSurvivesTheShell replays how a distributed run lost its NameNode: the
// shell that started the harness exited while a pause fault had one of the harness's
// processes stopped. The harness's process group was then orphaned (its members'
// parents all outside the session), with a stopped member, and the kernel sent the
// whole group SIGHUP (and SIGCONT), which the stopped JVM died of. Each process the
// harness starts now runs in a group of its own, which stays joined to the harness.
//
// This test binary plays all three parts, chosen by an environment variable: the shell
// (in a new session, like a login's), which starts the harness in a group of its own (a
// background job) and exits once the harness has stopped its child; and the harness,
// which starts `sleep` through procs.start and stops it with SIGSTOP. The test then
// checks that the child is still alive and stopped after the shell is gone.
func TestPausedChildSurvivesTheShell(t *testing.T) {
	const roleVar, dirVar = "SLUICE_CHAOS_PGROUP_ROLE", "SLUICE_CHAOS_PGROUP_DIR"
	dir := os.Getenv(dirVar)
	pidsFile := filepath.Join(dir, "pids")
	self := func(role string, attr *syscall.SysProcAttr) *exec.Cmd {
		cmd := exec.Command(os.Args[0], "-test.run=^TestPausedChildSurvivesTheShell$")
		cmd.Env = append(os.Environ(), roleVar+"="+role, dirVar+"="+dir)
		cmd.SysProcAttr = attr
		return cmd
	}
	switch os.Getenv(roleVar) {
	case "shell":
		if err := self("harness", &syscall.SysProcAttr{Setpgid: true}).Start(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if _, err := os.Stat(pidsFile); err == nil {
				os.Exit(0) // the harness is orphaned here, its child stopped
			}
		}
		os.Exit(1)
	case "harness":
		ps := newProcs(dir)
		p, err := ps.start("sleeper", []string{"sleep", "60"})
		if err == nil {
			err = p.signal(syscall.SIGSTOP)
		}
		for deadline := time.Now().Add(30 * time.Second); err == nil && procState(p.pid()) != 'T'; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				err = fmt.Errorf("the child (pid %d) is not shown stopped within 30 s: state %q", p.pid(), procState(p.pid()))
				p.kill()
			}
		}
		if err == nil {
			tmp := pidsFile + ".tmp"
			err = os.WriteFile(tmp, fmt.Appendf(nil, "%d %d", os.Getpid(), p.pid()), 0o644)
			if err == nil {
				err = os.Rename(tmp, pidsFile)
			}
		}
		if err != nil { // the shell is gone by now: the test reads this file
			os.WriteFile(filepath.Join(dir, "harness.err"), []byte(err.Error()), 0o644)
			os.Exit(1)
		}
		time.Sleep(60 * time.Second) // stopped by the test, by pid
		os.Exit(0)
	}

	dir = t.TempDir()
	pidsFile = filepath.Join(dir, "pids")
	shell := self("shell", &syscall.SysProcAttr{Setsid: true})
	if out, err := shell.CombinedOutput(); err != nil {
		harnessErr, _ := os.ReadFile(filepath.Join(dir, "harness.err"))
		t.Fatalf("the shell: %v\n%s\nthe harness: %s", err, out, harnessErr)
	}
	raw, err := os.ReadFile(pidsFile)
	if err != nil {
		t.Fatal(err)
	}
	var harness, child int
	if _, err := fmt.Sscan(string(raw), &harness, &child); err != nil {
		t.Fatalf("pids %q: %v", raw, err)
	}
	t.Cleanup(func() {
		syscall.Kill(child, syscall.SIGKILL)
		syscall.Kill(harness, syscall.SIGKILL)
	})
	// The kernel signals an orphaned group as the shell exits; give the signals time
	// to act (a process that dies of SIGHUP is gone or a zombie at once).
	time.Sleep(200 * time.Millisecond)
	if s := procState(harness); s == 0 || s == 'Z' {
		t.Errorf("the harness (pid %d) died with the shell: state %q", harness, s)
	}
	if s := procState(child); s != 'T' {
		t.Fatalf("the harness's stopped child (pid %d) did not stay stopped after the shell exited: state %q (0: gone)", child, s)
	}
}

// procState returns the state letter of process pid from /proc (0 if it is gone).
func procState(pid int) byte {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// pid (comm) state ...: comm may hold spaces and parentheses, so the state follows
	// the last ')'.
	s := string(raw)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 >= len(s) {
		return 0
	}
	return s[i+2]
}
