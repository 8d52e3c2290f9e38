// Package spawn starts child processes that must die with this process (a parent-death
// signal, Pdeathsig) from an OS thread that never exits.
//
// Linux sends the parent-death signal when the thread that forked the child exits, not
// the process (go.dev/issue/27505). A Go program's threads exit when a goroutine locked
// to one (runtime.LockOSThread) returns without unlocking it, as bench.MeasureWake's
// does: a child forked earlier from that thread, by any goroutine that ran there, was
// killed at that moment. Forked from a thread that stays locked to a goroutine of this
// package for the life of the process, the child gets its signal only when the process
// dies.
package spawn

import (
	"os/exec"
	"runtime"
	"sync"
	"syscall"
)

// starter returns the channel of the goroutine that forks every child, started on first
// use and locked to its thread for good. One per process by nature: the thread must live
// as long as the process does.
var starter = sync.OnceValue(func() chan<- request {
	reqs := make(chan request)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread lives as long as the process
		for r := range reqs {
			r.done <- r.cmd.Start()
		}
	}()
	return reqs
})

type request struct {
	cmd  *exec.Cmd
	done chan error
}

// Start starts cmd as exec.Cmd.Start does, with a parent-death signal of SIGKILL (unless
// cmd sets one) and in a process group of its own (Setpgid, unless cmd asks for a
// session of its own, whose group it leads): one the caller stops (SIGSTOP) gets no
// SIGHUP when this process's group is orphaned, as it is when the shell that started it
// exits. The other fields of cmd.SysProcAttr are kept. Starts are serialized on the one
// thread: a fork takes about a millisecond.
func Start(cmd *exec.Cmd) error {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	if cmd.SysProcAttr.Pdeathsig == 0 {
		cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	}
	if !cmd.SysProcAttr.Setsid {
		cmd.SysProcAttr.Setpgid = true
	}
	done := make(chan error, 1)
	starter() <- request{cmd, done}
	return <-done
}

// Run starts cmd (Start) and waits for it, as exec.Cmd.Run does.
func Run(cmd *exec.Cmd) error {
	if err := Start(cmd); err != nil {
		return err
	}
	return cmd.Wait()
}
