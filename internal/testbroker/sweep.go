package testbroker

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// binPrefix starts the name of the directory a test process builds its binary in.
const binPrefix = "sluice-bin-"

// lockName is the file in a build directory that its test process holds an exclusive
// flock(2) on for as long as it runs.
const lockName = ".lock"

// claim makes dir the calling process's: it locks a file there and keeps it open (the
// returned file must stay reachable: closing it, or the process ending in any way,
// releases the lock). The file is locked under another name and renamed into place, so
// that a sweep never finds the lock file unlocked while its owner lives.
func claim(dir string) (*os.File, error) {
	tmp := filepath.Join(dir, lockName+".new")
	f, err := os.Create(tmp)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("cannot lock %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, lockName)); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// sweep removes from root the build directories of test processes that have ended. A
// test binary has no hook at its exit (short of a TestMain in every package that starts
// brokers), and each directory holds a binary of about 50 MB, so without this every
// `go test` run left one per package behind. A directory goes only when its lock file
// can be locked, that is when no process holds it: unlike a pid, a flock is seen from
// every PID namespace that shares the directory (containers with a common /tmp).
// Directories without a lock file (older ones, or one being made) are left alone.
func sweep(root string) {
	dirs, _ := filepath.Glob(filepath.Join(root, binPrefix+"*"))
	for _, d := range dirs {
		f, err := os.Open(filepath.Join(d, lockName))
		if err != nil {
			continue
		}
		if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil {
			os.RemoveAll(d) // nobody holds it: its process has ended
		}
		f.Close()
	}
}
