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

// starter is the goroutine, locked to its thread for good, that forks every child.
var starter struct {
	once sync.Once
	reqs chan request
}

type request struct {
	cmd  *exec.Cmd
	done chan error
}

// Start starts cmd as exec.Cmd.Start does, with a parent-death signal of SIGKILL (unless
// cmd sets one) and in a process group of its own (Setpgid): one the caller stops
// (SIGSTOP) gets no SIGHUP when this process's group is orphaned, as it is when the shell
// that started it exits. The other fields of cmd.SysProcAttr are kept.
func Start(cmd *exec.Cmd) error {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	if cmd.SysProcAttr.Pdeathsig == 0 {
		cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	}
	cmd.SysProcAttr.Setpgid = true
	starter.once.Do(func() {
		starter.reqs = make(chan request)
		go func() {
			runtime.LockOSThread() // never unlocked: the thread lives as long as the process
			for r := range starter.reqs {
				r.done <- r.cmd.Start()
			}
		}()
	})
	done := make(chan error, 1)
	starter.reqs <- request{cmd, done}
	return <-done
}

// Run starts cmd (Start) and waits for it, as exec.Cmd.Run does.
func Run(cmd *exec.Cmd) error {
	if err := Start(cmd); err != nil {
		return err
	}
	return cmd.Wait()
}
