package sched

import (
	"errors"
	"testing"
)

type nopTask struct{}

func (nopTask) Run(*Shard) {}

func TestMailboxBusyAndSwap(t *testing.T) {
	m := newMailbox(3)
	spare := make([]Task, 0, 3)
	for i := range 3 {
		if err := m.push(nopTask{}); err != nil {
			t.Fatalf("push %d: %v", i, err)
		}
	}
	if err := m.push(nopTask{}); !errors.Is(err, ErrBusy) {
		t.Fatalf("push to full mailbox: %v, want ErrBusy", err)
	}
	batch, closed := m.take(spare)
	if len(batch) != 3 || closed {
		t.Fatalf("take: %d tasks, closed %v; want 3, false", len(batch), closed)
	}
	if err := m.push(nopTask{}); err != nil {
		t.Fatalf("push after take: %v", err)
	}
	if queued, busy, maxBatch := m.stats(); queued != 1 || busy != 1 || maxBatch != 3 {
		t.Fatalf("stats: queued %d busy %d maxBatch %d; want 1 1 3", queued, busy, maxBatch)
	}
}

func TestMailboxWakesOnlyASleeper(t *testing.T) {
	m := newMailbox(8)
	spare := make([]Task, 0, 8)
	woken := func() bool {
		select {
		case <-m.wake:
			return true
		default:
			return false
		}
	}
	if err := m.push(nopTask{}); err != nil {
		t.Fatal(err)
	}
	if woken() {
		t.Fatal("push to an awake consumer woke it")
	}
	spare, _ = m.take(spare)
	clear(spare)
	if b, _ := m.take(spare[:0]); len(b) != 0 {
		t.Fatal("second take not empty")
	}
	_ = m.push(nopTask{})
	_ = m.push(nopTask{})
	if !woken() || woken() {
		t.Fatal("a burst to a sleeping consumer must leave exactly one token")
	}
}

func TestMailboxClose(t *testing.T) {
	m := newMailbox(2)
	_ = m.push(nopTask{})
	m.close()
	if err := m.push(nopTask{}); !errors.Is(err, ErrClosed) {
		t.Fatalf("push after close: %v", err)
	}
	batch, closed := m.take(make([]Task, 0, 2))
	if len(batch) != 1 || !closed {
		t.Fatalf("take after close: %d tasks, closed %v; want 1, true", len(batch), closed)
	}
}

func TestMailboxPushNoAllocs(t *testing.T) {
	m := newMailbox(1)
	spare := make([]Task, 0, 1)
	allocs := testing.AllocsPerRun(1000, func() {
		_ = m.push(nopTask{})
		spare, _ = m.take(spare[:0])
	})
	if allocs != 0 {
		t.Fatalf("push+take: %v allocs", allocs)
	}
}
