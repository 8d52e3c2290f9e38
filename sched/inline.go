package sched

// TryRun runs fn(s) at once in the calling goroutine, as a task of the shard,
// when the shard is idle: its goroutine parked with no task queued. Otherwise
// it runs nothing and returns false; submit fn then (SubmitFunc).
//
// Why: a task submitted to a parked shard costs the shard goroutine's wake-up,
// a thread hand-off that on these shared two-core hosts takes tens of µs at the
// median and half a millisecond at p99 (BENCHMARKS.md, the broker's wake stage).
// An event loop that has just appended to an idle shard's partition can answer
// the long polls parked there itself, in the same turn. A busy shard or one with
// work queued is not run ahead of its queue: tasks from one submitter keep their
// order.
//
// fn has the shard to itself, as a task on its goroutine has: the shard
// goroutine waits for fn to return before it runs anything (it holds the
// shard's turn whenever it is not parked). fn may use every shard-only method
// (After, Every, Timer.Stop) and Submit; a timer it sets earlier than the one
// the parked goroutine waits for wakes that goroutine to re-arm. fn must not
// wait for the shard (it would wait for itself). Before Start and after the
// shard has finished, TryRun returns false. Safe from any goroutine; the
// shard's own, and one running the shard's work inline already, get false (the
// turn is theirs).
func (s *Shard) TryRun(fn func(*Shard)) bool {
	if fn == nil {
		panic("BUG: sched: TryRun of a nil func")
	}
	if !s.turn.TryLock() {
		return false
	}
	defer s.turn.Unlock()
	if !s.mb.empty() {
		return false
	}
	s.enterInline()
	s.running = true
	defer func() {
		// Also when fn panics: a timer it set before is not left waiting.
		s.running = false
		s.exitInline()
		if when, ok := s.timers.next(); ok && (s.armed < 0 || when < s.armed) {
			// The parked goroutine waits on no clock, or on a later one: wake it to
			// re-arm.
			s.mb.nudge()
		}
	}()
	fn(s)
	s.c.tasks.Add(1)
	s.c.inline.Add(1)
	return true
}

// Inline reports whether the work running now runs inline, in the goroutine that
// called TryRun (an event loop), rather than on the shard's goroutine: work that
// must not make an event loop wait for the disk checks it and submits that part
// instead. Shard only (from a task or a TryRun function).
func (s *Shard) Inline() bool {
	s.checkOwner("Inline")
	return s.running
}
