package sched

import (
	"errors"
	"testing"
	"time"
)

// start returns a started scheduler, closed when the test ends.
func start(t testing.TB, cfg Config) *Scheduler {
	t.Helper()
	sc, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := sc.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sc.Close)
	return sc
}

// do runs fn on s's goroutine and waits for it, retrying while s is busy.
func do(t testing.TB, s *Shard, fn func(*Shard)) {
	t.Helper()
	done := make(chan struct{})
	for {
		err := s.SubmitFunc(func(s *Shard) { fn(s); close(done) })
		if err == nil {
			break
		}
		if !errors.Is(err, ErrBusy) {
			t.Fatalf("submit: %v", err)
		}
		time.Sleep(time.Millisecond)
	}
	<-done
}

// waitFor polls cond until it holds, failing the test after 10s.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// submitRetry submits t, retrying while the shard is busy.
func submitRetry(tb testing.TB, s *Shard, task Task) {
	for {
		switch err := s.Submit(task); {
		case err == nil:
			return
		case errors.Is(err, ErrBusy):
			time.Sleep(10 * time.Microsecond)
		default:
			tb.Errorf("submit: %v", err)
			return
		}
	}
}

// isWoken reports whether the consumer is marked woken. Safe from any goroutine.
func (m *mailbox) isWoken() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.mu.woken
}
