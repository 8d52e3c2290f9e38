package sched

import (
	"strings"
	"sync"
	"testing"
	"time"

	"sluice/internal/invariants"
)

// idle waits until shard s's goroutine is parked: its turn is free.
func idle(t *testing.T, s *Shard) {
	t.Helper()
	waitFor(t, "the shard to park", func() bool {
		if s.turn.TryLock() {
			s.turn.Unlock()
			return true
		}
		return false
	})
}

// TestTryRunIdle: an idle shard's work runs in the caller's goroutine, and may use the
// shard-only methods (checked under -tags invariants).
func TestTryRunIdle(t *testing.T) {
	sc := start(t, Config{Shards: 1})
	s := sc.Shard(0)
	idle(t, s)
	fired := make(chan struct{})
	ran := false
	if !s.TryRun(func(sh *Shard) {
		ran = sh == s
		tm := sh.After(time.Hour, func(time.Time) {})
		tm.Stop()
		sh.After(0, func(time.Time) { close(fired) })
	}) {
		t.Fatal("TryRun refused on an idle shard")
	}
	if !ran {
		t.Fatal("fn did not run with its shard")
	}
	waitClosed(t, fired, "the timer set inline to run on the shard goroutine")
	if st := s.Stats(); st.Inline != 1 || st.TasksRun < 1 {
		t.Fatalf("stats after one inline run: %+v", st)
	}
	if invariants.Enabled {
		// Off the shard and not in TryRun, the shard-only methods still panic.
		defer func() {
			if msg, _ := recover().(string); !strings.HasPrefix(msg, "BUG: sched: Shard.After") {
				t.Fatalf("After off the shard after TryRun: recovered %q", msg)
			}
		}()
		s.After(time.Hour, func(time.Time) {})
	}
}

// TestTryRunBusy: a shard running a task runs nothing inline.
func TestTryRunBusy(t *testing.T) {
	sc := start(t, Config{Shards: 1})
	s := sc.Shard(0)
	hold, holding := make(chan struct{}), make(chan struct{})
	if err := s.SubmitFunc(func(*Shard) { close(holding); <-hold }); err != nil {
		t.Fatal(err)
	}
	<-holding
	defer close(hold)
	if s.TryRun(func(*Shard) { t.Error("ran inline while the shard ran a task") }) {
		t.Fatal("TryRun took a busy shard")
	}
}

// TestTryRunQueued: a parked shard with a task queued (pushed, its wake-up not yet
// delivered) runs nothing inline: the queued task goes first.
func TestTryRunQueued(t *testing.T) {
	sc := start(t, Config{Shards: 1})
	s := sc.Shard(0)
	idle(t, s)
	var order []int
	// Queue a task without waking the shard, as a push caught between its append and
	// its signal would leave it.
	s.mb.mu.Lock()
	s.mb.mu.q = append(s.mb.mu.q, funcTask(func(*Shard) { order = append(order, 1) }))
	s.mb.mu.Unlock()
	if s.TryRun(func(*Shard) { order = append(order, 2) }) {
		t.Fatal("TryRun ran ahead of a queued task")
	}
	s.mb.signal()
	do(t, s, func(*Shard) { order = append(order, 3) })
	if len(order) != 2 || order[0] != 1 || order[1] != 3 {
		t.Fatalf("order %v, want the queued task, then the next", order)
	}
}

// TestTryRunEarlierTimer: a timer set inline earlier than the one the parked goroutine
// waits for fires without waiting for that one (an hour).
func TestTryRunEarlierTimer(t *testing.T) {
	s := parkedForAnHour(t)
	fired := make(chan struct{})
	if !s.TryRun(func(sh *Shard) { sh.After(time.Millisecond, func(time.Time) { close(fired) }) }) {
		t.Fatal("TryRun refused on an idle shard")
	}
	waitClosed(t, fired, "the timer set inline (the parked goroutine waits for an hour)")
}

// TestTryRunTimerAfterStop: a shard whose only timer was stopped parks without a clock;
// a timer set inline then, even at the stopped one's deadline, fires.
func TestTryRunTimerAfterStop(t *testing.T) {
	sc := start(t, Config{Shards: 1, TickInterval: 100 * time.Millisecond})
	s := sc.Shard(0)
	var tm Timer
	do(t, s, func(sh *Shard) { tm = sh.After(300*time.Millisecond, func(time.Time) {}) })
	idle(t, s) // parked, its clock armed for the timer
	do(t, s, func(*Shard) { tm.Stop() })
	idle(t, s) // parked with no timer
	fired := make(chan struct{})
	if !s.TryRun(func(sh *Shard) { sh.After(300*time.Millisecond, func(time.Time) { close(fired) }) }) {
		t.Fatal("TryRun refused on an idle shard")
	}
	waitClosed(t, fired, "the timer set inline on a shard parked without a clock")
}

// TestTryRunPanic: fn panicking releases the shard, and a timer it set first still fires.
func TestTryRunPanic(t *testing.T) {
	s := parkedForAnHour(t)
	fired := make(chan struct{})
	func() {
		defer func() {
			if r := recover(); r != "boom" {
				t.Fatalf("recovered %v", r)
			}
		}()
		s.TryRun(func(sh *Shard) {
			sh.After(time.Millisecond, func(time.Time) { close(fired) })
			panic("boom")
		})
	}()
	waitClosed(t, fired, "the timer set before the panic")
	do(t, s, func(*Shard) {}) // the shard runs tasks again
}

// parkedForAnHour returns the shard of a started one-shard scheduler, parked with its
// clock armed for a timer an hour away.
func parkedForAnHour(t *testing.T) *Shard {
	t.Helper()
	s := start(t, Config{Shards: 1}).Shard(0)
	do(t, s, func(sh *Shard) { sh.After(time.Hour, func(time.Time) {}) })
	idle(t, s)
	return s
}

// waitClosed waits for ch to close, failing the test after 10 s.
func waitClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
}

// TestTryRunExclusive: work run inline and work run by the shard goroutine never
// overlap. Both add to a plain counter; the race detector sees any overlap, and the
// count sees a lost update.
func TestTryRunExclusive(t *testing.T) {
	sc := start(t, Config{Shards: 1, QueueLen: 1 << 16})
	s := sc.Shard(0)
	n := 0 // shard-owned
	const each = 2000
	var inlined, submitted sync.WaitGroup
	var mu sync.Mutex
	ran := 0
	for range 4 {
		inlined.Go(func() {
			for range each {
				if s.TryRun(func(*Shard) { n++ }) {
					mu.Lock()
					ran++
					mu.Unlock()
				} else if s.SubmitFunc(func(*Shard) { n++ }) == nil {
					mu.Lock()
					ran++
					mu.Unlock()
				}
			}
		})
	}
	submitted.Go(func() {
		for range each {
			for s.SubmitFunc(func(*Shard) { n++ }) != nil {
				time.Sleep(time.Microsecond)
			}
		}
	})
	inlined.Wait()
	submitted.Wait()
	var got int
	do(t, s, func(*Shard) { got = n })
	if got != ran+each {
		t.Fatalf("counter %d, want %d: updates were lost", got, ran+each)
	}
	t.Logf("%d of %d calls ran inline", s.Stats().Inline, 4*each)
	if s.Stats().Inline == 0 {
		t.Log("no call ran inline (the shard was never idle); exclusivity untested this time")
	}
}

// TestTryRunBeforeStartAndAfterClose: a shard not started, or finished, runs nothing
// inline.
func TestTryRunBeforeStartAndAfterClose(t *testing.T) {
	sc, err := New(Config{Shards: 1})
	if err != nil {
		t.Fatal(err)
	}
	s := sc.Shard(0)
	if s.TryRun(func(*Shard) { t.Error("ran before Start") }) {
		t.Fatal("TryRun before Start")
	}
	if err := sc.Start(); err != nil {
		t.Fatal(err)
	}
	sc.Close()
	if s.TryRun(func(*Shard) { t.Error("ran after Close") }) {
		t.Fatal("TryRun after Close")
	}
}

// TestInline: work knows whether it runs inline (TryRun, in the caller's goroutine) or
// on the shard goroutine; TryRun from the shard's own goroutine, or nested in an inline
// run of the same shard, runs nothing (the turn is the caller's already) and does not
// deadlock; one of another, idle shard runs.
func TestInline(t *testing.T) {
	sc := start(t, Config{Shards: 2})
	s, other := sc.Shard(0), sc.Shard(1)
	onShard := make(chan [2]bool, 1)
	if err := s.SubmitFunc(func(sh *Shard) {
		nested := sh.TryRun(func(*Shard) { t.Error("ran inline on its own shard's goroutine") })
		onShard <- [2]bool{sh.Inline(), nested}
	}); err != nil {
		t.Fatal(err)
	}
	if got := <-onShard; got != [2]bool{false, false} {
		t.Fatalf("on the shard goroutine: Inline, TryRun = %v, want false, false", got)
	}
	idle(t, s)
	idle(t, other)
	var inline, nested, otherInline, otherRan bool
	if !s.TryRun(func(sh *Shard) {
		inline = sh.Inline()
		nested = sh.TryRun(func(*Shard) { t.Error("ran nested on a shard already run inline") })
		otherRan = other.TryRun(func(o *Shard) { otherInline = o.Inline() })
	}) {
		t.Fatal("TryRun refused on an idle shard")
	}
	if !inline || nested || !otherRan || !otherInline {
		t.Fatalf("inline run: Inline %v, nested TryRun %v, other shard's %v (Inline %v); want true, false, true, true",
			inline, nested, otherRan, otherInline)
	}
	// After the inline run, work on the shard goroutine sees false again.
	if err := s.SubmitFunc(func(sh *Shard) { onShard <- [2]bool{sh.Inline(), false} }); err != nil {
		t.Fatal(err)
	}
	if got := <-onShard; got[0] {
		t.Fatal("Inline true on the shard goroutine after an inline run")
	}
}
