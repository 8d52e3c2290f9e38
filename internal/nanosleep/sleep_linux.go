// Package nanosleep sleeps for short times more precisely than Go's timers: the runtime
// wakes timers from its netpoller, whose timeout has millisecond granularity, so a
// 100 µs time.Sleep lasts about a millisecond (measured on the project's hosts: 1.0 ms
// median overshoot, 2.2 ms p99), while nanosleep(2) overshoots by about 80 µs on the same
// loaded host. Sleep blocks the calling goroutine's thread in the system call, and keeps
// its P until the runtime's monitor thread notices (20 µs to 10 ms): a Sleeper (a
// timerfd read through the netpoller) parks the goroutine instead, and is what a loop
// that sleeps often should use. Use either for waits under a millisecond or two, never
// for long ones. Safe from any goroutine.
package nanosleep

import (
	"syscall"
	"time"
)

// Sleep sleeps d with nanosleep(2), resuming after signals.
func Sleep(d time.Duration) {
	ts := syscall.NsecToTimespec(int64(d))
	for syscall.Nanosleep(&ts, &ts) == syscall.EINTR {
	}
}
