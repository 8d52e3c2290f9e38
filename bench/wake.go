package bench

import (
	"fmt"
	"runtime"
	"time"

	"golang.org/x/sys/unix"

	"sluice/internal/nanosleep"
)

// WakeCost is what one thread's wake-up costs on the host: a thread sleeps Sleep with
// nanosleep(2), Wakes times, and CPU is the processor time the kernel charged the thread
// per wake (the system call, arming the timer, the wake-up itself), Turn the time each
// sleep took in all. Both processes of an end-to-end run wake their threads thousands of
// times a second at any rate (the notebook: 10 000-20 000 at 10 000 records/s), so this,
// not the cost of a byte, is what most sets the processor time and the latency tail of a
// run at a low rate. It differs between hosts: on a KVM guest where this measured 28-31
// µs, the relay ceiling's server took four times the processor time at 10 000 records/s
// that it took on the earlier hosts (BENCHMARKS.md, the 00:12 suite), so the reports say
// what it was, beside the load average.
type WakeCost struct {
	Sleep time.Duration `json:"sleep_ns"`
	Wakes int           `json:"wakes"`
	CPU   time.Duration `json:"cpu_per_wake_ns"`
	Turn  time.Duration `json:"turn_ns"`
}

// MeasureWake measures WakeCost over n sleeps of d, on a thread of its own (locked, so
// that the thread's processor time is the loop's alone from the first reading).
func MeasureWake(n int, d time.Duration) (WakeCost, error) {
	if n <= 0 || d <= 0 {
		return WakeCost{}, fmt.Errorf("wake cost: %d sleeps of %v", n, d)
	}
	type result struct {
		w   WakeCost
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // the thread exits with the goroutine: not unlocked
		cpu0, err := threadCPU()
		if err != nil {
			ch <- result{err: err}
			return
		}
		start := time.Now()
		for range n {
			nanosleep.Sleep(d)
		}
		turn := time.Since(start) / time.Duration(n)
		cpu1, err := threadCPU()
		ch <- result{w: WakeCost{Sleep: d, Wakes: n, CPU: (cpu1 - cpu0) / time.Duration(n), Turn: turn}, err: err}
	}()
	r := <-ch
	return r.w, r.err
}

// threadCPU returns the processor time of the calling thread. It reads the thread's CPU
// clock, not getrusage(RUSAGE_THREAD): on a kernel with tick accounting getrusage leaves
// out the slice the thread is running when it is read, so the first reading could miss
// up to a tick of work done before the window and charge it to the wakes (a review's
// test: 30 ms of spinning before four sleeps gave a processor time per wake up to 5.7
// times the time the sleeps took).
func threadCPU() (time.Duration, error) {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return 0, fmt.Errorf("wake cost: clock_gettime: %w", err)
	}
	return time.Duration(ts.Nano()), nil
}

// markdown describes the wake cost in a clause of the machine line.
func (w WakeCost) markdown() string {
	us := func(d time.Duration) string { return fmtMicros(float64(d.Nanoseconds()) / 1e3) }
	return fmt.Sprintf("a thread's wake from a %s nanosleep cost it %s of processor time (each sleep took %s; %d sleeps)",
		us(w.Sleep), us(w.CPU), us(w.Turn), w.Wakes)
}
