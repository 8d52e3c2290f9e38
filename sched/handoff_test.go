package sched

import (
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

// TestHandOffRunsTheWokenShard holds HandOff: after a Submit that woke a parked shard,
// HandOff returns once the shard has run its task. On a single P this is exact: the
// submitter keeps the P until it yields, so without the hand-off the task cannot have
// run (in a broker the submitter, an event loop, would go on into epoll_wait with the
// shard stranded behind it). (The runtime's monitor may preempt the test goroutine
// between Submit and HandOff when the host deschedules it, which runs the shard early:
// the checks before HandOff allow that.)
func TestHandOffRunsTheWokenShard(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	sc := start(t, Config{Shards: 2, QueueLen: 16})
	var ran atomic.Int64
	count := func(*Shard) { ran.Add(1) }
	const rounds = 500
	for i := range rounds {
		s := sc.Shard(i % 2)
		waitParked(t, s)
		if err := s.SubmitFunc(count); err != nil {
			t.Fatal(err)
		}
		if ran.Load() == int64(i) && !sc.woken() {
			t.Fatalf("round %d: the woken shard has not run and is not marked woken", i)
		}
		sc.HandOff()
		if got := ran.Load(); got != int64(i+1) {
			t.Fatalf("round %d: %d tasks had run after HandOff, want %d: the woken shard was left waiting for the submitter's P", i, got, i+1)
		}
		if sc.woken() {
			t.Fatalf("round %d: a shard is still marked woken after it ran", i)
		}
	}
}

// TestHandOffWithoutAConsumer: a shard woken that never runs (not started) costs
// HandOff its bounded yields, and HandOff returns.
func TestHandOffWithoutAConsumer(t *testing.T) {
	sc, err := New(Config{Shards: 1, QueueLen: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	s := sc.Shard(0)
	s.mb.mu.asleep = true // as if the consumer had parked
	if err := s.SubmitFunc(func(*Shard) {}); err != nil {
		t.Fatal(err)
	}
	if !sc.woken() {
		t.Fatal("a push to a parked consumer did not mark it woken")
	}
	sc.HandOff() // must return
	if !sc.woken() {
		t.Fatal("woken cleared without a take")
	}
}

// TestTryRunTimerMarksWoken: a TryRun that sets a timer earlier than the parked shard's
// clock wakes the shard to re-arm it, and marks it woken, so that HandOff lets it run
// (on one P: without the mark HandOff returns at once and the shard has not re-armed).
func TestTryRunTimerMarksWoken(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	sc := start(t, Config{Shards: 1, QueueLen: 16})
	s := sc.Shard(0)
	for i := range 50 {
		waitParked(t, s)
		wakeups := s.c.wakeups.Load()
		d := time.Hour - time.Duration(i)*time.Minute // earlier than every timer before it
		if !s.TryRun(func(s *Shard) { s.After(d, func(time.Time) {}) }) {
			t.Fatalf("round %d: TryRun refused on an idle shard", i)
		}
		if s.c.wakeups.Load() == wakeups && !sc.woken() {
			t.Fatalf("round %d: the shard woken to re-arm is not marked woken", i)
		}
		sc.HandOff()
		if s.c.wakeups.Load() == wakeups {
			t.Fatalf("round %d: the shard had not woken after HandOff", i)
		}
	}
}

// waitParked waits until s's goroutine has found its queue empty and parks (or is about
// to: on one P the test runs only once it has).
func waitParked(t *testing.T, s *Shard) {
	t.Helper()
	waitFor(t, "the shard to park", func() bool {
		s.mb.mu.Lock()
		defer s.mb.mu.Unlock()
		return s.mb.mu.asleep
	})
}
