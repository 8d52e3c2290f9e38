package sched

import (
	"runtime"
	"sync/atomic"
	"testing"
)

// TestHandOffRunsTheWokenShard holds HandOff: after a Submit that woke a parked shard,
// HandOff returns once the shard has run its task. On a single P this is exact: the
// submitter keeps the P until it yields, so without the hand-off the task cannot have
// run (in a broker the submitter, an event loop, would go on into epoll_wait with the
// shard stranded behind it). Submit alone does not yield, which the first check holds.
func TestHandOffRunsTheWokenShard(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	sc := start(t, Config{Shards: 2, QueueLen: 16})
	var ran atomic.Int64
	count := func(*Shard) { ran.Add(1) }
	const rounds = 500
	for i := range rounds {
		s := sc.Shard(i % 2)
		waitFor(t, "the shard to park", func() bool {
			s.mb.mu.Lock()
			defer s.mb.mu.Unlock()
			return s.mb.mu.asleep
		})
		if err := s.SubmitFunc(count); err != nil {
			t.Fatal(err)
		}
		if got := ran.Load(); got != int64(i) {
			t.Fatalf("round %d: %d tasks had run when Submit returned, want %d: Submit yielded", i, got, i)
		}
		if !sc.woken() {
			t.Fatalf("round %d: the woken shard is not marked woken", i)
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
