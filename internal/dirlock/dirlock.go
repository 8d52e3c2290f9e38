// Package dirlock keeps two processes from working on one data directory: a broker holds
// an exclusive flock on DIR/+lock while it runs (the name is not a valid topic name, so
// no topic can collide with it), and tools that write into the directory refuse to run
// while it is held. The kernel drops the lock when the process dies, so a kill -9 never
// leaves a stale lock.
package dirlock

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// Name is the lock file in a data directory.
const Name = "+lock"

// ErrHeld says another process holds the lock.
var ErrHeld = errors.New("data directory in use")

// Lock is a held lock; Release it when done.
type Lock struct{ f *os.File }

// Acquire takes the lock on dir without waiting, and records this process's pid in the
// lock file for the message other processes print. It fails with an error wrapping
// ErrHeld when another process holds it.
func Acquire(dir string) (*Lock, error) {
	f, err := os.OpenFile(filepath.Join(dir, Name), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("cannot open the lock of %s: %w", dir, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder := readPid(f)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %s is locked by another process%s", ErrHeld, dir, holder)
		}
		return nil, fmt.Errorf("cannot lock %s: %w", dir, err)
	}
	if err := f.Truncate(0); err == nil {
		f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &Lock{f: f}, nil
}

// Release drops the lock.
func (l *Lock) Release() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := l.f.Close() // closing the descriptor drops the flock
	l.f = nil
	return err
}

// CheckFree returns an error wrapping ErrHeld when a process holds the lock on dir; nil
// when nobody does (or there is no lock file: the directory was never a broker's).
func CheckFree(dir string) error {
	if _, err := os.Stat(filepath.Join(dir, Name)); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	l, err := Acquire(dir)
	if err != nil {
		return err
	}
	return l.Release()
}

func readPid(f *os.File) string {
	buf := make([]byte, 32)
	n, _ := f.ReadAt(buf, 0)
	if pid := strings.TrimSpace(string(buf[:n])); pid != "" {
		return " (pid " + pid + ")"
	}
	return ""
}
