package nanosleep

import (
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// Sleeper sleeps like Sleep, but parks the goroutine instead of blocking its thread: it
// arms a timerfd(2) and reads it through Go's netpoller, which wakes the goroutine when
// the timer fires (epoll reports the fd readable at once; its millisecond timeout is not
// involved). Sleep's nanosleep(2) keeps the goroutine's P for the whole system call: the
// runtime hands that P to other goroutines only when its monitor thread notices, which
// takes from 20 µs to 10 ms. A process with two Ps and two goroutines sleeping that way
// (a producer's sender lingering, a paced loop) had nothing left to run its other
// goroutines (a consumer's fetchers): on two cores that put milliseconds into the p99.9
// of a 10 000 records/s run (BENCHMARKS.md). A Sleeper costs a file descriptor and two
// system calls per sleep. It is for one goroutine at a time.
type Sleeper struct {
	f  *os.File
	fd int
}

// NewSleeper returns a Sleeper, or an error when the kernel gives no timerfd (then use
// Sleep).
func NewSleeper() (*Sleeper, error) {
	fd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("cannot create a timerfd: %w", err)
	}
	// A non-blocking descriptor: os.NewFile registers it with the netpoller, so a read
	// that finds the timer not yet fired parks the goroutine.
	return &Sleeper{f: os.NewFile(uintptr(fd), "timerfd"), fd: fd}, nil
}

// Sleep sleeps d (nothing when d <= 0). It falls back to nanosleep(2) if the timer
// cannot be armed or read.
func (s *Sleeper) Sleep(d time.Duration) {
	if d <= 0 {
		return
	}
	spec := unix.ItimerSpec{Value: unix.NsecToTimespec(int64(d))}
	if err := unix.TimerfdSettime(s.fd, 0, &spec, nil); err != nil {
		Sleep(d)
		return
	}
	var expirations [8]byte
	if _, err := s.f.Read(expirations[:]); err != nil {
		Sleep(d)
	}
}

// Close releases the timerfd. The Sleeper must not be sleeping.
func (s *Sleeper) Close() error { return s.f.Close() }
