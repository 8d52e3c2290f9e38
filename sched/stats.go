package sched

import "time"

// Stats is a snapshot of one shard's figures, for metrics. Fields are read
// one by one, so they can be off by a concurrent change.
type Stats struct {
	Shard int // the shard's ID
	Core  int // the core it is pinned to, or -1

	TasksRun uint64 // tasks run, ever
	Batches  uint64 // drains that took at least one task; TasksRun/Batches is the mean batch
	// MaxBatch is the most tasks taken in one drain. A drain takes every
	// queued task, so this is also the queue's high-water mark.
	MaxBatch int
	Queued   int    // tasks waiting now
	Busy     uint64 // submissions refused with ErrBusy
	Wakeups  uint64 // times the parked shard woke, for a task or a timer
	Fired    uint64 // one-shot timers run
	Inline   uint64 // tasks run by TryRun in their caller's goroutine (counted in TasksRun too)

	Jobs []JobStats // periodic jobs not stopped, in registration order
}

// JobStats describes one periodic job.
type JobStats struct {
	Name   string
	Period time.Duration // as rounded up to the tick
	Runs   uint64
	MaxRun time.Duration // the longest run: the longest the job held up the shard
}

// Stats returns the shard's figures. Safe from any goroutine.
func (s *Shard) Stats() Stats {
	st := Stats{
		Shard:    s.id,
		Core:     s.core,
		TasksRun: s.c.tasks.Load(),
		Batches:  s.c.batches.Load(),
		Wakeups:  s.c.wakeups.Load(),
		Fired:    s.c.fired.Load(),
		Inline:   s.c.inline.Load(),
	}
	st.Queued, st.Busy, st.MaxBatch = s.mb.stats()
	s.jobs.Lock()
	defer s.jobs.Unlock()
	for _, t := range s.jobs.list {
		st.Jobs = append(st.Jobs, JobStats{
			Name:   t.name,
			Period: time.Duration(t.period),
			Runs:   t.runs.Load(),
			MaxRun: time.Duration(t.maxRun.Load()),
		})
	}
	return st
}
