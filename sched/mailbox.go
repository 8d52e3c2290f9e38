package sched

import (
	"sync"
	"sync/atomic"
)

// mailbox is a shard's bounded queue: many producers, one consumer (the
// shard goroutine). Producers append to one slice under a mutex; the
// consumer takes the whole slice at once and hands back the one it finished,
// so a drain is one lock and one swap, and a burst of submissions costs the
// consumer one wake-up. Both slices are allocated at full capacity up front:
// push never allocates.
//
// Wake-ups: when take finds the queue empty it marks the consumer asleep;
// the next push clears the mark and sends one token on wake (capacity 1).
// Pushes while the consumer is awake send nothing. Because the mark is set
// and cleared under the same lock as the queue, no wake-up is lost; a token
// can be stale (the consumer woke for a timer and took the task anyway),
// which costs one empty take.
type mailbox struct {
	limit int
	wake  chan struct{}
	// woken counts, over every shard of the scheduler, the mailboxes marked woken
	// (mu.woken): Scheduler.HandOff reads this one word instead of a flag per shard,
	// each on a line that every push writes (the lock's), which on a host of many cores
	// would be a cache miss per shard per event-loop callback. nil: not counted (tests).
	woken *atomic.Int32
	mu    struct {
		sync.Mutex
		q      []Task
		asleep bool // the consumer found q empty and may be parked
		// woken is set by a push or nudge that wakes the parked consumer and cleared by
		// its next take: while it is set the consumer is runnable and has not run yet.
		woken    bool
		closed   bool   // push refuses with ErrClosed
		busy     uint64 // pushes refused with ErrBusy
		maxBatch int    // longest q taken
	}
}

func newMailbox(limit int, woken *atomic.Int32) *mailbox {
	m := &mailbox{limit: limit, wake: make(chan struct{}, 1), woken: woken}
	m.mu.q = make([]Task, 0, limit)
	return m
}

// push queues t, or returns ErrBusy or ErrClosed without waiting.
func (m *mailbox) push(t Task) error {
	m.mu.Lock()
	switch {
	case m.mu.closed:
		m.mu.Unlock()
		return ErrClosed
	case len(m.mu.q) >= m.limit:
		m.mu.busy++
		m.mu.Unlock()
		return ErrBusy
	}
	m.mu.q = append(m.mu.q, t)
	wake := m.mu.asleep
	m.mu.asleep = false
	if wake {
		m.markWokenLocked()
	}
	m.mu.Unlock()
	if wake {
		m.signal()
	}
	return nil
}

// nudge wakes a consumer that may be parked, as push does but with nothing queued (a
// TryRun that set an earlier timer): a parked consumer is marked woken too, so that
// Scheduler.HandOff lets it run.
func (m *mailbox) nudge() {
	m.mu.Lock()
	if m.mu.asleep {
		m.markWokenLocked()
	}
	m.mu.Unlock()
	m.signal()
}

// markWokenLocked marks the consumer woken, counted once however often it is woken
// before it takes.
func (m *mailbox) markWokenLocked() {
	if !m.mu.woken {
		m.mu.woken = true
		if m.woken != nil {
			m.woken.Add(1)
		}
	}
}

// signal leaves a wake token unless one is already waiting.
func (m *mailbox) signal() {
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// take returns every queued task and queues further pushes into spare,
// which must be empty with capacity limit (the batch the consumer just
// finished). With nothing queued it returns spare, marks the consumer
// asleep, and reports whether the mailbox is closed: closed and empty means
// it will stay empty. Consumer only.
func (m *mailbox) take(spare []Task) (batch []Task, closed bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mu.woken {
		m.mu.woken = false
		if m.woken != nil {
			m.woken.Add(-1)
		}
	}
	if len(m.mu.q) == 0 {
		m.mu.asleep = true
		return spare, m.mu.closed
	}
	batch, m.mu.q = m.mu.q, spare[:0]
	m.mu.maxBatch = max(m.mu.maxBatch, len(batch))
	return batch, m.mu.closed
}

// empty reports whether no task is queued. Safe from any goroutine.
func (m *mailbox) empty() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.mu.q) == 0
}

// close makes push refuse and wakes the consumer so it sees it.
func (m *mailbox) close() {
	m.mu.Lock()
	m.mu.closed = true
	m.mu.Unlock()
	m.signal()
}

// stats returns the queue's length now, pushes refused as busy, and the
// longest batch taken (also the queue's high-water mark: a drain takes all).
func (m *mailbox) stats() (queued int, busy uint64, maxBatch int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.mu.q), m.mu.busy, m.mu.maxBatch
}
