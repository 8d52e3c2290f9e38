package sched

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Task is work for a shard: Run is called once, on the shard goroutine. A
// caller may submit a pooled request object that implements Task, so a
// hand-off allocates nothing.
type Task interface {
	Run(s *Shard)
}

// funcTask adapts a function to Task. A func is one pointer, so converting
// it to an interface does not allocate.
type funcTask func(*Shard)

func (f funcTask) Run(s *Shard) { f(s) }

// Shard is one shard goroutine with its queue, timers and close hooks. The
// partitions a shard owns are touched only by tasks, timers and hooks run on
// its goroutine, so they need no locks.
type Shard struct {
	id      int
	core    int // -1 when not pinned
	mb      *mailbox
	base    time.Time // timer deadlines are nanoseconds since base
	closing atomic.Bool
	goid    atomic.Int64 // the shard goroutine's id, under invariants only
	// inline is the id of the goroutine running the shard's work in TryRun, under
	// invariants only (0: none).
	inline atomic.Int64
	// turn is held by whoever runs the shard's work: the shard goroutine, except while
	// it is parked, when TryRun may take it. Locked from the start (the shard goroutine
	// inherits it) and never unlocked once the goroutine has finished.
	turn   sync.Mutex
	pinErr error // written by the shard goroutine before it signals ready

	// Owned by the shard goroutine (or by the goroutine that calls Start,
	// before Start).
	batch  []Task // the spare slice handed back to the mailbox
	timers timerSet
	clock  *time.Timer // armed for the earliest timer while parked
	armed  int64       // the deadline clock is armed for, or -1
	// running is set while TryRun runs work in another goroutine (Inline); written
	// and read under the turn only.
	running bool
	hooks   []func()

	jobs struct {
		sync.Mutex
		list []*timer // periodic jobs not stopped, for Stats
	}
	c counters
}

// counters feed Stats; written by whoever holds the shard's turn (the shard
// goroutine, or TryRun's caller).
type counters struct {
	tasks, batches, wakeups, fired, inline atomic.Uint64
}

func newShard(id int, cfg *Config, woken *atomic.Int32) *Shard {
	s := &Shard{
		id:    id,
		core:  -1,
		mb:    newMailbox(cfg.QueueLen, woken),
		base:  time.Now(),
		batch: make([]Task, 0, cfg.QueueLen),
		armed: -1,
	}
	if cfg.Pin {
		s.core = cfg.Cores[id]
	}
	s.timers.tick = int64(cfg.TickInterval)
	s.clock = time.NewTimer(time.Hour)
	s.clock.Stop()
	s.turn.Lock() // the shard goroutine's until it parks: nothing runs inline before Start
	return s
}

// ID returns the shard's index, from 0 to NumShards-1.
func (s *Shard) ID() int { return s.id }

// Submit queues t to run on the shard goroutine after the tasks already
// queued (FIFO per submitting goroutine). It never blocks: it returns ErrBusy
// when the queue holds Config.QueueLen tasks and ErrClosed once Close has
// begun. Safe from any goroutine, including the shard's own. Before Start,
// tasks queue and run once the shard starts.
func (s *Shard) Submit(t Task) error {
	if t == nil {
		panic("BUG: sched: Submit of a nil Task")
	}
	return s.mb.push(t)
}

// SubmitFunc is Submit for a function. Safe from any goroutine.
func (s *Shard) SubmitFunc(fn func(*Shard)) error {
	if fn == nil {
		panic("BUG: sched: SubmitFunc of a nil func")
	}
	return s.mb.push(funcTask(fn))
}

// Closing reports whether Close has begun: Submit refuses, queued tasks
// still run, and parked work should answer now rather than wait. Safe from
// any goroutine.
func (s *Shard) Closing() bool { return s.closing.Load() }

// run is the shard goroutine: pin, signal ready, serve until closed and
// drained, then fire the remaining one-shots and run the close hooks. It holds
// the shard's turn throughout but while parked, and keeps it when it returns:
// a finished shard runs nothing inline.
func (s *Shard) run(ready chan<- struct{}) {
	s.goid.Store(shardGoid())
	if s.core >= 0 {
		if err := pinThread(s.core); err != nil {
			s.pinErr = fmt.Errorf("%w %d: %w", ErrPin, s.id, err)
		}
	}
	ready <- struct{}{}
	s.serve()
	s.finish()
}

// serve alternates between draining the queue in batches, running due
// timers, and parking, until the mailbox is closed and empty.
func (s *Shard) serve() {
	for {
		batch, closed := s.mb.take(s.batch)
		if len(batch) > 0 {
			s.runBatch(batch)
		}
		s.batch = batch[:0]
		s.runTimers()
		switch {
		case len(batch) > 0:
		case closed:
			return
		default:
			s.park()
		}
	}
}

func (s *Shard) runBatch(batch []Task) {
	for i, t := range batch {
		batch[i] = nil // let the task be collected or reused at once
		t.Run(s)
	}
	s.c.tasks.Add(uint64(len(batch)))
	s.c.batches.Add(1)
}

// runTimers runs every timer due now: one-shots and periodic jobs, in
// deadline order. It reads the clock only when a timer is set.
func (s *Shard) runTimers() {
	if len(s.timers.heap) == 0 {
		return
	}
	now := time.Now()
	at := s.since(now)
	for {
		t, fn := s.timers.popDue(at)
		if t == nil {
			return
		}
		if t.period == 0 {
			s.c.fired.Add(1)
			fn(now)
			continue
		}
		start := time.Now()
		fn(start)
		t.runs.Add(1)
		if d := int64(time.Since(start)); d > t.maxRun.Load() {
			t.maxRun.Store(d)
		}
	}
}

// park waits for a submission or the earliest timer. The clock is re-armed
// only when the earliest deadline changed since it was armed. While parked, the
// shard's turn is free for TryRun.
func (s *Shard) park() {
	var fire <-chan time.Time
	if when, ok := s.timers.next(); ok {
		if when != s.armed {
			s.clock.Reset(time.Duration(when - s.since(time.Now())))
			s.armed = when
		}
		fire = s.clock.C
	} else {
		// Not waiting on the clock: armed says so, for TryRun (a tick of a stopped
		// timer left behind is dropped by the next Reset).
		s.armed = -1
	}
	s.turn.Unlock()
	fired := false
	select {
	case <-s.mb.wake:
	case <-fire:
		fired = true
	}
	s.turn.Lock()
	if fired {
		s.armed = -1
	}
	s.c.wakeups.Add(1)
}

// finish runs once the queue is closed and drained: pending one-shot timers
// fire early, in deadline order, so nothing parked is left unanswered;
// periodic jobs are dropped; then the close hooks run, last first.
func (s *Shard) finish() {
	now := time.Now()
	for {
		fn, ok := s.timers.popAny()
		if !ok {
			break
		}
		if fn != nil {
			s.c.fired.Add(1)
			fn(now)
		}
	}
	for n := len(s.hooks); n > 0; n = len(s.hooks) {
		h := s.hooks[n-1]
		s.hooks = s.hooks[:n-1]
		h()
	}
	s.clock.Stop()
}

// since converts a time to the shard's timer scale.
func (s *Shard) since(t time.Time) int64 { return int64(t.Sub(s.base)) }
