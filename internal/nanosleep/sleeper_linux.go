package nanosleep

import (
	"fmt"
	"os"
	"syscall"
	"time"
	"unsafe"
)

// timerfd(2) by its system calls: the standard library has their numbers but no
// wrappers (this package stays on the standard library, like the other row-1 helpers).
const (
	clockMonotonic = 1
	tfdNonblock    = syscall.O_NONBLOCK
	tfdCloexec     = syscall.O_CLOEXEC
)

// itimerspec is struct itimerspec.
type itimerspec struct {
	interval, value syscall.Timespec
}

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
	fd, _, errno := syscall.Syscall(syscall.SYS_TIMERFD_CREATE, clockMonotonic, tfdNonblock|tfdCloexec, 0)
	if errno != 0 {
		return nil, fmt.Errorf("cannot create a timerfd: %w", errno)
	}
	// A non-blocking descriptor: os.NewFile registers it with the netpoller, so a read
	// that finds the timer not yet fired parks the goroutine.
	return &Sleeper{f: os.NewFile(fd, "timerfd"), fd: int(fd)}, nil
}

// Sleep sleeps d (nothing when d <= 0). It falls back to nanosleep(2) if the timer
// cannot be armed or read.
func (s *Sleeper) Sleep(d time.Duration) {
	if d <= 0 {
		return
	}
	if s.f == nil {
		Sleep(d)
		return
	}
	spec := itimerspec{value: syscall.NsecToTimespec(int64(d))}
	if _, _, errno := syscall.Syscall6(syscall.SYS_TIMERFD_SETTIME, uintptr(s.fd), 0,
		uintptr(unsafe.Pointer(&spec)), 0, 0, 0); errno != 0 {
		Sleep(d)
		return
	}
	var expirations [8]byte
	if _, err := s.f.Read(expirations[:]); err != nil {
		Sleep(d)
	}
}

// Close releases the timerfd. The Sleeper must not be sleeping.
func (s *Sleeper) Close() error {
	if s.f == nil {
		return nil
	}
	return s.f.Close()
}
