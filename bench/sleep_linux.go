package bench

import (
	"syscall"
	"time"
)

// preciseSleep sleeps d with nanosleep(2), blocking the goroutine's thread (the runtime
// hands its P to other goroutines meanwhile): finer than Go's timers for sub-millisecond
// waits. See sleepUntil.
func preciseSleep(d time.Duration) {
	ts := syscall.NsecToTimespec(int64(d))
	for syscall.Nanosleep(&ts, &ts) == syscall.EINTR {
	}
}
