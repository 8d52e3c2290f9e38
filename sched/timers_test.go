package sched

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func TestTimerRounding(t *testing.T) {
	ts := timerSet{tick: 10}
	var fired []int
	on := func(i int) func(time.Time) { return func(time.Time) { fired = append(fired, i) } }
	ts.add(0, 1, 0, on(1))  // due 10
	ts.add(0, 10, 0, on(2)) // due 10, set after 1
	ts.add(3, 0, 0, on(3))  // due 10 (d 0 at 3)
	ts.add(0, 11, 0, on(4)) // due 20
	run := func(now int64) {
		for t, fn := ts.popDue(now); t != nil; t, fn = ts.popDue(now) {
			fn(time.Time{})
		}
	}
	if run(9); len(fired) != 0 {
		t.Fatalf("fired early: %v", fired)
	}
	if run(10); !slices.Equal(fired, []int{1, 2, 3}) {
		t.Fatalf("at 10 fired %v, want [1 2 3]", fired)
	}
	if when, ok := ts.next(); !ok || when != 20 {
		t.Fatalf("next = %d %v, want 20", when, ok)
	}
}

func TestTimerPeriodicSkipsMissed(t *testing.T) {
	ts := timerSet{tick: 10}
	runs := 0
	job := ts.add(0, 15, 15, func(time.Time) { runs++ }) // period rounds to 20, due 20
	if tm, _ := ts.popDue(19); tm != nil {
		t.Fatal("job ran early")
	}
	tm, fn := ts.popDue(95) // 20 is due; 40, 60, 80 were missed
	fn(time.Time{})
	if tm != job || runs != 1 || job.when != 120 {
		t.Fatalf("after a late run: runs %d, next due %d; want 1, 120", runs, job.when)
	}
	if !ts.stop(job) || ts.stop(job) {
		t.Fatal("stop of a queued job must succeed once")
	}
}

// modelTimer is a timer in TestTimerSetModel's model: a slice searched for
// the earliest (when, seq) on every step.
type modelTimer struct {
	id     int
	when   int64
	seq    uint64
	period int64
	t      *timer
}

type timerModel struct {
	tick   int64
	seq    uint64 // mirrors timerSet.seq: bumped by every push and requeue
	timers []modelTimer
}

func (m *timerModel) roundUp(at int64) int64 { return (at + m.tick - 1) / m.tick * m.tick }

// fire runs what is due at now, in order, appending ids to fired.
func (m *timerModel) fire(now int64, fired *[]int) {
	for {
		i := -1
		for j, e := range m.timers {
			if e.when <= now && (i < 0 || e.when < m.timers[i].when ||
				e.when == m.timers[i].when && e.seq < m.timers[i].seq) {
				i = j
			}
		}
		if i < 0 {
			return
		}
		e := &m.timers[i]
		*fired = append(*fired, e.id)
		if e.period == 0 {
			m.timers = slices.Delete(m.timers, i, i+1)
			continue
		}
		if e.when += e.period; e.when <= now {
			e.when = m.roundUp(now + e.period)
		}
		m.seq++
		e.seq = m.seq
	}
}

// TestTimerSetModel runs random adds, stops and clock advances against a
// simple model.
func TestTimerSetModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	ts := timerSet{tick: 4}
	m := timerModel{tick: 4}
	var got, want []int
	now := int64(0)
	for id := range 20000 {
		switch op := rng.IntN(10); {
		case op < 4 || len(m.timers) == 0:
			d, period := rng.Int64N(100)-5, int64(0)
			if rng.IntN(8) == 0 {
				period = 1 + rng.Int64N(50)
			}
			tm := ts.add(now, d, period, func(time.Time) { got = append(got, id) })
			m.seq++
			m.timers = append(m.timers, modelTimer{id, m.roundUp(now + max(d, 0)), m.seq, m.roundUp(period), tm})
		case op < 6:
			i := rng.IntN(len(m.timers))
			if !ts.stop(m.timers[i].t) {
				t.Fatal("stop of a queued timer failed")
			}
			m.timers = slices.Delete(m.timers, i, i+1)
		default:
			now += rng.Int64N(40)
			for tm, fn := ts.popDue(now); tm != nil; tm, fn = ts.popDue(now) {
				fn(time.Time{})
			}
			m.fire(now, &want)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("at %d fired %v, want %v", now, got, want)
		}
	}
	if len(ts.heap) != len(m.timers) {
		t.Fatalf("%d timers queued, model has %d", len(ts.heap), len(m.timers))
	}
}

func TestTimerOneShotRecycled(t *testing.T) {
	ts := timerSet{tick: 1}
	a := ts.add(0, 5, 0, func(time.Time) {})
	gen := a.gen
	if tm, _ := ts.popDue(5); tm != a || a.gen == gen {
		t.Fatal("a fired one-shot must be retired")
	}
	if b := ts.add(0, 5, 0, func(time.Time) {}); b != a {
		t.Fatal("a retired one-shot entry was not reused")
	}
	allocs := testing.AllocsPerRun(100, func() {
		tm := ts.add(0, 7, 0, nil)
		ts.stop(tm)
	})
	if allocs != 0 {
		t.Fatalf("add+stop of a one-shot: %v allocs", allocs)
	}
}
