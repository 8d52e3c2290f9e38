package sched

import (
	"errors"
	"sync/atomic"
	"testing"
)

type nopTask struct{}

func (nopTask) Run(*Shard) {}

func TestMailboxBusyAndSwap(t *testing.T) {
	m := newMailbox(3, nil)
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
	m := newMailbox(8, nil)
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
	m := newMailbox(2, nil)
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
	m := newMailbox(1, nil)
	spare := make([]Task, 0, 1)
	allocs := testing.AllocsPerRun(1000, func() {
		_ = m.push(nopTask{})
		spare, _ = m.take(spare[:0])
	})
	if allocs != 0 {
		t.Fatalf("push+take: %v allocs", allocs)
	}
}

// TestMailboxCountsWokenOnce: the scheduler's count of woken mailboxes (HandOff's one
// load) counts a parked consumer once however many nudges and pushes wake it before it
// takes, never counts one that is awake, and drops by one at its take.
func TestMailboxCountsWokenOnce(t *testing.T) {
	var woken atomic.Int32
	boxes := []*mailbox{newMailbox(8, &woken), newMailbox(8, &woken), newMailbox(8, &woken)}
	for _, m := range boxes {
		if batch, _ := m.take(make([]Task, 0, 8)); len(batch) != 0 { // parks: asleep
			t.Fatalf("empty mailbox took %d tasks", len(batch))
		}
	}
	for i, m := range boxes[:2] {
		m.nudge() // a nudge leaves the consumer marked asleep: the next nudge and push wake it again
		m.nudge()
		for range 3 {
			if err := m.push(nopTask{}); err != nil {
				t.Fatal(err)
			}
		}
		if got := woken.Load(); got != int32(i+1) {
			t.Fatalf("after waking %d mailboxes (two nudges and three pushes each) the count is %d", i+1, got)
		}
		if !m.isWoken() {
			t.Fatalf("mailbox %d woken by a push is not marked", i)
		}
	}
	boxes[2].mu.Lock()
	boxes[2].mu.asleep = false // awake: a push does not wake it
	boxes[2].mu.Unlock()
	if err := boxes[2].push(nopTask{}); err != nil {
		t.Fatal(err)
	}
	boxes[2].nudge()
	if got := woken.Load(); got != 2 || boxes[2].isWoken() {
		t.Fatalf("pushes to an awake consumer were counted as wakes: count %d", got)
	}
	for i, m := range boxes[:2] {
		if batch, _ := m.take(make([]Task, 0, 8)); len(batch) != 3 {
			t.Fatalf("mailbox %d took %d tasks, want 3", i, len(batch))
		}
		if got := woken.Load(); got != int32(1-i) || m.isWoken() {
			t.Fatalf("after %d takes the count is %d (mailbox still marked: %v)", i+1, got, m.isWoken())
		}
	}
}
