package sched

import "runtime"

// handOffYields bounds the yields of one HandOff. Go's scheduler takes its global queue
// first one time in 61, so a single yield may run the yielder again; two in a row
// cannot both (the count that decides advances on the first); the third covers a
// garbage collector's worker taking a turn between them.
const handOffYields = 3

// HandOff yields the caller's processor while a shard it may have woken has not yet
// run, at most a few times. An event loop calls it after handling its events, before it
// goes back to waiting for more (netio.Waiter).
//
// Why: Submit to a parked shard makes the shard's goroutine runnable on the caller's P
// (Go puts a goroutine it readies next in line on the P that readied it). An event
// loop's next step is often epoll_wait, a blocking system call during which it keeps
// that P; the shard then waits, runnable and stranded, until the runtime's monitor
// takes the P back, up to 20 ms on a quiet broker (two of its ticks at their longest).
// gnet yields once before it blocks, but that yield runs the loop itself again one time
// in 61. Execution traces of a broker at 10 000 records/s caught shard goroutines
// runnable for 7-20 ms this way, a stall of every partition of the shard. Yielding here
// runs the woken shard at once on this P (no thread wake-up, unless the shard is pinned
// to a thread of its own, Config.Pin), before the loop can block.
//
// Only goroutines that block in system calls while holding their P need this. Shards
// park in a select, which frees the P for what they woke, so Submit itself does not
// yield: a shard that yielded to a shard it woke would queue itself behind the event
// loop and could be stranded in its turn. A shard woken by the other loop, or one held
// up by a TryRun, costs the caller its bounded yields, never a wait: the check is one
// count over every shard (Scheduler.nWoken), so on a host with many cores a loop may
// yield for a shard another loop woke (not measured: these hosts have two). Safe from
// any goroutine.
func (sc *Scheduler) HandOff() {
	for range handOffYields {
		if !sc.woken() {
			return
		}
		runtime.Gosched()
	}
}

// woken reports whether some shard was woken and has not taken its queue since: one
// load, whatever the number of shards (mailbox.woken says why).
func (sc *Scheduler) woken() bool { return sc.nWoken.Load() > 0 }
