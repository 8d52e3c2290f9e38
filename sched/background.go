package sched

import (
	"slices"
	"time"
)

// Every runs fn on the shard goroutine every d (rounded up to
// Config.TickInterval), between task batches, for as long as the shard runs
// or until the returned Timer is stopped. fn gets the time it was started.
// Periods missed while the shard was busy are skipped, not run in a burst.
// Periodic jobs do not run after Close has drained the queue: put final work
// (the last group fsync) in an OnClose hook. name labels the job in Stats.
//
// Call Every from the shard goroutine (in a task, timer or hook), or from the
// goroutine that calls Start, before it does.
func (s *Shard) Every(d time.Duration, name string, fn func(now time.Time)) Timer {
	s.checkOwner("Shard.Every")
	if fn == nil {
		panic("BUG: sched: Every with a nil func")
	}
	d = max(d, 1) // a zero period would run the job on every tick anyway
	t := s.timers.add(s.since(time.Now()), int64(d), int64(d), fn)
	t.name = name
	s.jobs.Lock()
	s.jobs.list = append(s.jobs.list, t)
	s.jobs.Unlock()
	return Timer{s: s, t: t, gen: t.gen}
}

// After runs fn once on the shard goroutine after d (rounded up to
// Config.TickInterval; d <= 0 means after the current batch), unless the
// returned Timer is stopped first. It allocates nothing in steady state
// beyond what fn captures: deadlines live in a per-shard heap, served by one
// runtime timer per shard. At Close, one-shots still pending fire early,
// once the queue is drained, with Closing() true: a parked long-poll fetch
// then answers with what it has. A one-shot set from a close hook never
// fires.
//
// Call After from the shard goroutine, or from the goroutine that calls
// Start, before it does.
func (s *Shard) After(d time.Duration, fn func(now time.Time)) Timer {
	s.checkOwner("Shard.After")
	if fn == nil {
		panic("BUG: sched: After with a nil func")
	}
	t := s.timers.add(s.since(time.Now()), int64(d), 0, fn)
	return Timer{s: s, t: t, gen: t.gen}
}

// OnClose registers fn to run on the shard goroutine during Close, after
// the queue is drained and pending one-shots have fired. Hooks run last
// registered first, like defers, so a partition registered after the
// shard's group fsync is closed before that fsync's final run. Call OnClose
// from the shard goroutine, or from the goroutine that calls Start, before
// it does.
func (s *Shard) OnClose(fn func()) {
	s.checkOwner("Shard.OnClose")
	if fn == nil {
		panic("BUG: sched: OnClose with a nil func")
	}
	s.hooks = append(s.hooks, fn)
}

// Timer is a handle to a one-shot (After) or periodic job (Every). The zero
// Timer is valid and stops nothing. A Timer is a small value: copy it freely.
type Timer struct {
	s   *Shard
	t   *timer
	gen uint32
}

// Stop cancels the timer and reports whether it was pending: false if it
// already fired (a one-shot), was stopped, or was dropped by Close. Once
// Stop returns, the callback will not start again; a job may stop itself
// from its callback. Call Stop from the shard goroutine.
func (t Timer) Stop() bool {
	if t.t == nil {
		return false
	}
	t.s.checkOwner("Timer.Stop")
	if t.t.gen != t.gen {
		return false
	}
	periodic := t.t.period != 0
	if !t.s.timers.stop(t.t) {
		return false
	}
	if periodic {
		t.s.dropJob(t.t)
	}
	return true
}

func (s *Shard) dropJob(t *timer) {
	s.jobs.Lock()
	defer s.jobs.Unlock()
	if i := slices.Index(s.jobs.list, t); i >= 0 {
		s.jobs.list = slices.Delete(s.jobs.list, i, i+1)
	}
}
