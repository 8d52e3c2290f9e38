package sched

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// record is a task that appends its (producer, seq) to its shard's log, a
// slice only the shard goroutine touches.
type record struct {
	producer, seq int
	logs          [][][2]int // by shard
}

func (r *record) Run(s *Shard) {
	r.logs[s.ID()] = append(r.logs[s.ID()], [2]int{r.producer, r.seq})
}

func TestSubmitRunsOnceInOrder(t *testing.T) {
	const producers, perProducer, shards = 8, 5000, 3
	sc := start(t, Config{Shards: shards, QueueLen: 64})
	logs := make([][][2]int, shards)
	var wg sync.WaitGroup
	for p := range producers {
		wg.Go(func() {
			for i := range perProducer {
				submitRetry(t, sc.ShardFor(uint64(i)), &record{p, i, logs})
			}
		})
	}
	wg.Wait()
	sc.Close()
	seen := make([]int, producers)
	for sh, log := range logs {
		last := make(map[int]int)
		for _, e := range log {
			p, seq := e[0], e[1]
			if prev, ok := last[p]; ok && seq <= prev {
				t.Fatalf("shard %d ran producer %d's task %d after %d", sh, p, seq, prev)
			}
			if sc.ShardFor(uint64(seq)).ID() != sh {
				t.Fatalf("task %d ran on shard %d", seq, sh)
			}
			last[p] = seq
			seen[p]++
		}
	}
	for p, n := range seen {
		if n != perProducer {
			t.Errorf("producer %d: %d tasks ran, want %d", p, n, perProducer)
		}
	}
	var busy, batches, run uint64
	for _, st := range sc.Stats() {
		busy, batches, run = busy+st.Busy, batches+st.Batches, run+st.TasksRun
	}
	t.Logf("%d tasks in %d batches, %d busy refusals", run, batches, busy)
}

func TestBusyWhenFullThenRecovers(t *testing.T) {
	const queueLen = 16
	sc, err := New(Config{Shards: 1, QueueLen: queueLen})
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	s := sc.Shard(0)
	var ran atomic.Int64
	count := func(*Shard) { ran.Add(1) }
	for i := range queueLen {
		if err := s.SubmitFunc(count); err != nil {
			t.Fatalf("submit %d before Start: %v", i, err)
		}
	}
	if err := s.SubmitFunc(count); !errors.Is(err, ErrBusy) {
		t.Fatalf("submit to a full queue: %v, want ErrBusy", err)
	}
	if st := s.Stats(); st.Busy != 1 || st.Queued != queueLen {
		t.Fatalf("stats %+v, want Busy 1, Queued %d", st, queueLen)
	}
	if err := sc.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the queue to drain", func() bool { return ran.Load() == queueLen })
	if err := s.SubmitFunc(count); err != nil {
		t.Fatalf("submit after drain: %v", err)
	}
	waitFor(t, "the last task", func() bool { return ran.Load() == queueLen+1 })
	if st := s.Stats(); st.MaxBatch != queueLen || st.TasksRun != queueLen+1 {
		t.Fatalf("stats %+v, want MaxBatch %d, TasksRun %d", st, queueLen, queueLen+1)
	}
}

// TestCloseDrains blocks a shard, queues tasks and a timer, closes, and
// checks the order: queued tasks, then one-shots (early), then hooks in
// reverse.
func TestCloseDrains(t *testing.T) {
	sc := start(t, Config{Shards: 2, QueueLen: 128})
	s := sc.Shard(0)
	var events []string // shard 0's goroutine only
	note := func(e string) func(*Shard) { return func(*Shard) { events = append(events, e) } }
	unblock := make(chan struct{})
	do(t, s, func(s *Shard) {
		s.OnClose(func() { events = append(events, "hook1") })
		s.OnClose(func() { events = append(events, "hook2") })
		s.After(time.Hour, func(time.Time) { events = append(events, "timer:"+closing(s)) })
		s.Every(time.Hour, "never", func(time.Time) { events = append(events, "job") })
	})
	if err := s.SubmitFunc(func(*Shard) { <-unblock }); err != nil {
		t.Fatal(err)
	}
	for _, e := range []string{"a", "b", "c"} {
		if err := s.SubmitFunc(note(e)); err != nil {
			t.Fatal(err)
		}
	}
	closed := make(chan struct{})
	go func() { sc.Close(); close(closed) }()
	waitFor(t, "Close to begin", s.Closing)
	if err := s.SubmitFunc(note("late")); !errors.Is(err, ErrClosed) {
		t.Fatalf("submit during Close: %v, want ErrClosed", err)
	}
	close(unblock)
	<-closed
	want := []string{"a", "b", "c", "timer:closing", "hook2", "hook1"}
	if len(events) != len(want) {
		t.Fatalf("events %v, want %v", events, want)
	}
	for i := range want {
		if events[i] != want[i] {
			t.Fatalf("events %v, want %v", events, want)
		}
	}
	if err := sc.Shard(1).SubmitFunc(note("x")); !errors.Is(err, ErrClosed) {
		t.Fatalf("submit after Close: %v, want ErrClosed", err)
	}
	sc.Close() // idempotent
}

func closing(s *Shard) string {
	if s.Closing() {
		return "closing"
	}
	return "open"
}

func TestCloseWithoutStartRunsQueued(t *testing.T) {
	sc, err := New(Config{Shards: 2})
	if err != nil {
		t.Fatal(err)
	}
	var ran atomic.Int64
	for i := range 10 {
		if err := sc.ShardFor(uint64(i)).SubmitFunc(func(*Shard) { ran.Add(1) }); err != nil {
			t.Fatal(err)
		}
	}
	sc.Close()
	if ran.Load() != 10 {
		t.Fatalf("%d of 10 queued tasks ran", ran.Load())
	}
}

func TestEveryRunsOnShardGoroutine(t *testing.T) {
	sc := start(t, Config{Shards: 1, TickInterval: 100 * time.Microsecond})
	s := sc.Shard(0)
	var shardG int64
	runs := 0 // shard goroutine only: -race flags any other access
	var offShard atomic.Bool
	var job Timer
	do(t, s, func(s *Shard) {
		shardG = goid()
		job = s.Every(time.Millisecond, "tick", func(time.Time) {
			runs++
			offShard.Store(offShard.Load() || goid() != shardG)
		})
	})
	waitFor(t, "three runs", func() bool {
		n := 0
		do(t, s, func(*Shard) { n = runs })
		return n >= 3
	})
	if offShard.Load() {
		t.Fatal("a periodic job ran off the shard goroutine")
	}
	st := s.Stats()
	if len(st.Jobs) != 1 || st.Jobs[0].Name != "tick" || st.Jobs[0].Runs < 3 || st.Jobs[0].Period != time.Millisecond {
		t.Fatalf("job stats %+v", st.Jobs)
	}
	do(t, s, func(*Shard) {
		if !job.Stop() || job.Stop() {
			t.Error("Stop of a running job must succeed once")
		}
	})
	if st := s.Stats(); len(st.Jobs) != 0 {
		t.Fatalf("stopped job still listed: %+v", st.Jobs)
	}
}

func TestAfterFiresAndStopCancels(t *testing.T) {
	sc := start(t, Config{Shards: 1})
	s := sc.Shard(0)
	var fired, cancelled atomic.Int64
	var soon, late Timer
	do(t, s, func(s *Shard) {
		soon = s.After(time.Millisecond, func(time.Time) { fired.Add(1) })
		late = s.After(time.Hour, func(time.Time) { cancelled.Add(1) })
		s.After(0, func(time.Time) { fired.Add(1) })
	})
	waitFor(t, "the one-shots", func() bool { return fired.Load() == 2 })
	do(t, s, func(*Shard) {
		if soon.Stop() {
			t.Error("Stop of a fired timer reported it pending")
		}
		if !late.Stop() || late.Stop() {
			t.Error("Stop of a pending timer must succeed once")
		}
		// A stale handle must not stop the entry's next use.
		again := s.After(time.Hour, func(time.Time) {})
		if late.Stop() || !again.Stop() {
			t.Error("a stale handle stopped a recycled timer")
		}
	})
	sc.Close() // pending one-shots fire at Close: a stopped one must not
	if cancelled.Load() != 0 {
		t.Fatal("a stopped timer fired")
	}
	if st := s.Stats(); st.Fired != 2 {
		t.Fatalf("Fired = %d, want 2", st.Fired)
	}
	var zero Timer
	if zero.Stop() {
		t.Fatal("the zero Timer stopped something")
	}
}
