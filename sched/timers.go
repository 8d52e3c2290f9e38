package sched

import (
	"sync/atomic"
	"time"

	"sluice/internal/invariants"
)

// timer is one pending deadline of a shard: a one-shot (After) or a periodic
// job (Every). Times are nanoseconds since the shard's base time, rounded up
// to the tick. One-shot entries are recycled through timerSet.free; gen
// tells a live handle from a stale one.
type timer struct {
	when   int64 // deadline, a multiple of the tick
	period int64 // 0 for a one-shot; else a multiple of the tick
	seq    uint64
	idx    int // position in the heap, -1 when not queued
	gen    uint32
	fn     func(now time.Time)

	// Periodic jobs only; read by Stats from any goroutine.
	name   string
	runs   atomic.Uint64
	maxRun atomic.Int64 // nanoseconds
}

// timerSet is a shard's timers: a min-heap on (when, seq), so timers due in
// the same tick run in the order they were set. It is a plain data structure
// driven by the shard goroutine with explicit times; it reads no clock.
type timerSet struct {
	tick int64
	seq  uint64
	heap []*timer
	free []*timer // recycled one-shot entries
}

// roundUp returns the first tick boundary at or after at.
func (ts *timerSet) roundUp(at int64) int64 {
	return (at + ts.tick - 1) / ts.tick * ts.tick
}

// add schedules fn at now+d (d < 0 counts as 0), rounded up to a tick;
// with period > 0 it repeats every period, rounded up to a tick.
func (ts *timerSet) add(now, d, period int64, fn func(time.Time)) *timer {
	var t *timer
	if n := len(ts.free); n > 0 && period == 0 {
		t, ts.free = ts.free[n-1], ts.free[:n-1]
	} else {
		t = &timer{}
	}
	t.when = ts.roundUp(now + max(d, 0))
	t.period = 0
	if period > 0 {
		t.period = ts.roundUp(period)
	}
	t.fn = fn
	ts.push(t)
	return t
}

// stop unqueues t and retires it; false if it was not queued.
func (ts *timerSet) stop(t *timer) bool {
	if t.idx < 0 {
		return false
	}
	ts.remove(t.idx)
	ts.retire(t)
	return true
}

// retire invalidates handles to t and recycles a one-shot entry. Periodic
// entries are never reused, so Stats may still read them.
func (ts *timerSet) retire(t *timer) {
	t.gen++
	t.fn = nil
	if t.period == 0 {
		ts.free = append(ts.free, t)
	}
}

// next returns the earliest deadline, if any.
func (ts *timerSet) next() (int64, bool) {
	if len(ts.heap) == 0 {
		return 0, false
	}
	return ts.heap[0].when, true
}

// popDue returns the next timer due at now and its callback, or nil. A
// one-shot is retired (its handle goes stale) before it is returned; a
// periodic job is requeued for its next period, skipping periods missed
// while the shard was busy, so it may stop itself from its callback.
func (ts *timerSet) popDue(now int64) (*timer, func(time.Time)) {
	if len(ts.heap) == 0 || ts.heap[0].when > now {
		return nil, nil
	}
	t := ts.heap[0]
	fn := t.fn
	if t.period == 0 {
		ts.remove(0)
		ts.retire(t)
		return t, fn
	}
	t.when += t.period
	if t.when <= now {
		t.when = ts.roundUp(now + t.period)
	}
	t.seq = ts.nextSeq()
	ts.down(0)
	ts.check()
	return t, fn
}

// popAny removes the earliest timer whatever its deadline, for Close: it
// returns a one-shot's callback to run early, and nil for a periodic job,
// which is dropped. ok is false when no timer is left.
func (ts *timerSet) popAny() (fn func(time.Time), ok bool) {
	if len(ts.heap) == 0 {
		return nil, false
	}
	t := ts.heap[0]
	if t.period == 0 {
		fn = t.fn
	}
	ts.remove(0)
	ts.retire(t)
	return fn, true
}

func (ts *timerSet) nextSeq() uint64 { ts.seq++; return ts.seq }

func (ts *timerSet) push(t *timer) {
	t.seq = ts.nextSeq()
	t.idx = len(ts.heap)
	ts.heap = append(ts.heap, t)
	ts.up(t.idx)
	ts.check()
}

func (ts *timerSet) remove(i int) {
	h := ts.heap
	last := len(h) - 1
	h[i].idx = -1
	if i != last {
		h[i], h[last] = h[last], h[i]
		h[i].idx = i
	}
	h[last] = nil
	ts.heap = h[:last]
	if i != last && !ts.down(i) {
		ts.up(i)
	}
	ts.check()
}

func (ts *timerSet) less(i, j int) bool {
	a, b := ts.heap[i], ts.heap[j]
	return a.when < b.when || (a.when == b.when && a.seq < b.seq)
}

func (ts *timerSet) swap(i, j int) {
	h := ts.heap
	h[i], h[j] = h[j], h[i]
	h[i].idx, h[j].idx = i, j
}

func (ts *timerSet) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !ts.less(i, p) {
			return
		}
		ts.swap(i, p)
		i = p
	}
}

// down sifts i toward the leaves and reports whether it moved.
func (ts *timerSet) down(i int) bool {
	start, n := i, len(ts.heap)
	for {
		c := 2*i + 1
		if c >= n {
			break
		}
		if r := c + 1; r < n && ts.less(r, c) {
			c = r
		}
		if !ts.less(c, i) {
			break
		}
		ts.swap(i, c)
		i = c
	}
	return i > start
}

// check verifies the heap order and indexes under the invariants tag.
func (ts *timerSet) check() {
	if !invariants.Enabled {
		return
	}
	for i, t := range ts.heap {
		if t.idx != i {
			panic("BUG: sched: timer heap index out of date")
		}
		if i > 0 && ts.less(i, (i-1)/2) {
			panic("BUG: sched: timer heap out of order")
		}
	}
}
