// Package sched runs the broker's shards: each shard is one goroutine that
// owns a set of partitions and runs everything they do, so a partition's
// state machine needs no locks. Other goroutines (netio's event loops, other
// shards) hand work to a shard through its bounded queue; the shard also
// runs timers for its partitions' background work (group fsync, segment
// rolls, retention) and long-poll deadlines.
//
// # Shards and queues
//
// A Scheduler has Config.Shards shards. A partition belongs to exactly one
// shard, normally ShardFor(hash of topic and partition); that mapping is
// stable for a given shard count. Work is a Task (an interface, so a pooled
// request object is submitted without allocating) or a func via SubmitFunc.
// Submit never blocks: when the shard's queue holds Config.QueueLen tasks it
// returns ErrBusy, which the caller turns into a throttle answer, and after
// Close it returns ErrClosed. Tasks from one goroutine to one shard run in
// the order submitted.
//
// The queue is a mutex-guarded slice that the shard takes whole and swaps
// for the one it just drained (mailbox.go): a drain is one lock, and a burst
// wakes the shard once, because producers signal only a shard that found its
// queue empty. Submit allocates nothing.
//
// # Running inline
//
// A task handed to a parked shard costs its goroutine's wake-up, a thread
// hand-off. TryRun skips it when the shard is idle (parked, nothing queued):
// the caller runs the function itself, holding the shard's turn, a mutex the
// shard goroutine holds whenever it is not parked (inline.go). The shard
// still runs one thing at a time, and queued work keeps its order: a busy
// shard or one with work queued runs nothing inline. Work that must not make
// its caller wait (an event loop, for the disk) asks Inline and submits that
// part instead.
//
// A goroutine that blocks in system calls holding its P (an event loop in epoll_wait)
// calls Scheduler.HandOff before it does, so that a shard it woke runs first rather than
// wait for the runtime to take that P back (handoff.go).
//
// # Timers
//
// Shard.Every (periodic jobs) and Shard.After (one-shots, with a Timer to
// Stop them) run callbacks on the shard goroutine between task batches.
// Deadlines live in a per-shard min-heap (timers.go, a plain data structure
// with no clock) rounded up to Config.TickInterval, so timers in the same
// tick run in one wake-up; one runtime timer per shard is armed for the
// earliest. No goroutine per timer, no ticker per job.
//
// # Close
//
// Scheduler.Close stops every shard accepting, then each shard runs all the
// tasks already queued, fires its pending one-shots early (Closing reports
// true, so a parked fetch answers now), drops its periodic jobs, runs its
// OnClose hooks last first, and exits; Close waits for all. Tasks run during
// the drain may not submit more work (ErrClosed), to their shard or another.
//
// # Pinning
//
// With Config.Pin each shard goroutine locks its OS thread and sets the
// thread's affinity to its core, for good. It is off by default: waking a
// goroutine locked to a parked thread is a futex hand-off between threads,
// two orders of magnitude slower than an ordinary goroutine hand-off
// (DESIGN §7; BenchmarkHandoff measures both).
//
// # Concurrency rules
//
// Safe from any goroutine: Shard.Submit, Shard.SubmitFunc, Shard.Closing,
// Shard.Stats, Shard.ID, and every Scheduler method (but Close not from a
// shard goroutine, which would wait for itself).
//
// Shard goroutine only: Shard.Every, Shard.After, Shard.OnClose and
// Timer.Stop touch state the shard goroutine owns. Call them from a task,
// timer callback or hook running on that shard, or from the goroutine that
// calls Start, before it does (Start happens after them). To set a timer on
// a running shard from elsewhere, submit a task that sets it. The invariants
// build tag checks this rule and panics with "BUG: ..." when it is broken.
//
// A task, timer callback or hook must not block: while it runs, its shard
// runs nothing else. A panic in one is a bug and crashes the process.
//
// Reading the source: config.go, scheduler.go (New, Start, Close, ShardFor),
// shard.go (the shard goroutine's loop), mailbox.go, timers.go and
// background.go (Every, After, OnClose), stats.go, pin_linux.go.
package sched
