package spawn

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"syscall"
	"testing"
	"time"
)

// TestChildOutlivesAnExitingThread forks `sleep` from a goroutine locked to a thread
// that then exits (as bench.MeasureWake's does), twice: directly with a parent-death
// signal, where the kernel kills the child as the thread exits (the hazard, checked so
// that the test shows it is real here), and through Start, where the child lives on, in
// a process group of its own, also while other goroutines lock threads and exit (a
// Start that forked on any thread but one that never exits could lose its child then).
func TestChildOutlivesAnExitingThread(t *testing.T) {
	for _, viaStart := range []bool{false, true} {
		cmd, tid := forkFromExitingThread(t, viaStart)
		pid := cmd.Process.Pid
		t.Cleanup(func() { cmd.Process.Kill() }) // by the process handle: safe after Wait
		died := make(chan error, 1)
		go func() { died <- cmd.Wait() }()
		// Wait until the locked thread is gone, then give its signal time to act.
		task := fmt.Sprintf("/proc/self/task/%d", tid)
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Millisecond) {
			if _, err := os.Stat(task); os.IsNotExist(err) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("thread %d did not exit within 30 s of its locked goroutine", tid)
			}
		}
		if viaStart {
			exitThreads(64)
		}
		select {
		case err := <-died:
			if viaStart {
				t.Fatalf("a child started by Start died with the thread that asked for it: %v", err)
			}
		case <-time.After(2 * time.Second):
			if !viaStart {
				t.Fatalf("a child forked with Pdeathsig by an exiting thread survived it: this kernel does not show the hazard Start avoids")
			}
			if pgid, err := syscall.Getpgid(pid); err != nil || pgid != pid {
				t.Fatalf("child %d in process group %d (%v), want its own", pid, pgid, err)
			}
		}
	}
}

// forkFromExitingThread starts `sleep 60` from a goroutine locked to a thread other than
// the main one (Go parks the main thread instead of ending it), which exits with the
// goroutine; through Start, or with exec.Cmd.Start and a parent-death signal. It
// returns the command and the thread's id.
func forkFromExitingThread(t *testing.T, viaStart bool) (*exec.Cmd, int) {
	type started struct {
		cmd *exec.Cmd
		tid int
		err error
	}
	for range 100 {
		ch := make(chan started)
		go func() {
			runtime.LockOSThread() // not unlocked: the thread exits with the goroutine
			tid := syscall.Gettid()
			if tid == os.Getpid() {
				ch <- started{tid: tid}
				return
			}
			cmd := exec.Command("sleep", "60")
			var err error
			if viaStart {
				err = Start(cmd)
			} else {
				cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
				err = cmd.Start()
			}
			ch <- started{cmd, tid, err}
		}()
		s := <-ch
		if s.err != nil {
			t.Fatal(s.err)
		}
		if s.cmd != nil {
			return s.cmd, s.tid
		}
	}
	t.Fatal("100 goroutines in a row ran on the main thread")
	return nil, 0
}

// exitThreads ends n threads: each a goroutine that locks one and returns.
func exitThreads(n int) {
	done := make(chan struct{})
	for range n {
		go func() {
			runtime.LockOSThread()
			time.Sleep(time.Millisecond) // hold the thread while the others take theirs
			done <- struct{}{}
		}()
	}
	for range n {
		<-done
	}
}

// TestSetsidKept: a command that asks for a session of its own gets one (it leads its
// group; asking for a group as well would fail the fork).
func TestSetsidKept(t *testing.T) {
	cmd := exec.Command("sh", "-c", "exit 0")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := Run(cmd); err != nil {
		t.Fatalf("Run with Setsid: %v", err)
	}
}

// TestRun runs a command to its end and keeps the caller's SysProcAttr fields.
func TestRun(t *testing.T) {
	cmd := exec.Command("sh", "-c", "exit 3")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	err := Run(cmd)
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 3 {
		t.Fatalf("Run: %v, want exit status 3", err)
	}
	if cmd.SysProcAttr.Pdeathsig != syscall.SIGTERM || !cmd.SysProcAttr.Setpgid {
		t.Fatalf("SysProcAttr %+v: Pdeathsig replaced or no process group of its own", cmd.SysProcAttr)
	}
}
