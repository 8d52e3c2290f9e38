package sched

import (
	"errors"
	"math/bits"
	"slices"
	"sync"
	"sync/atomic"
)

// Scheduler runs the broker's shards. See the package comment for the
// rules.
type Scheduler struct {
	cfg    Config
	shards []*Shard
	// nWoken counts the shards woken (by a push, or a TryRun's nudge) that have not
	// taken their queue since (mailbox.woken; HandOff).
	nWoken atomic.Int32

	startOnce sync.Once
	startErr  error
	closeOnce sync.Once
	running   sync.WaitGroup
}

// New validates cfg (after filling defaults) and returns a scheduler whose
// shards accept tasks but do not run them until Start.
func New(cfg Config) (*Scheduler, error) {
	cfg.Cores = slices.Clone(cfg.Cores)
	cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	sc := &Scheduler{cfg: cfg, shards: make([]*Shard, cfg.Shards)}
	for i := range sc.shards {
		sc.shards[i] = newShard(i, &sc.cfg, &sc.nWoken)
	}
	return sc, nil
}

// Start launches the shard goroutines, each pinned first when Config.Pin is
// set, and returns once every shard is running. A shard that could not be
// pinned runs unpinned and Start reports it (ErrPin); the caller may go on
// or Close. Calls after the first return the first's result.
func (sc *Scheduler) Start() error {
	sc.startOnce.Do(func() { sc.startErr = sc.start() })
	return sc.startErr
}

func (sc *Scheduler) start() error {
	ready := make(chan struct{}, len(sc.shards))
	sc.running.Add(len(sc.shards))
	for _, s := range sc.shards {
		go func() {
			defer sc.running.Done()
			s.run(ready)
		}()
	}
	for range sc.shards {
		<-ready
	}
	var errs []error
	for _, s := range sc.shards {
		if s.pinErr != nil {
			errs = append(errs, s.pinErr)
		}
	}
	return errors.Join(errs...)
}

// Close stops accepting tasks on every shard (Submit returns ErrClosed),
// then lets each shard run every task already queued, fire its pending
// one-shot timers early and run its close hooks, and waits for all of them.
// Shards never started are started to do so. Safe from any goroutine but a
// shard's own (which would wait for itself); later calls wait too.
func (sc *Scheduler) Close() {
	sc.checkNotShard()
	sc.closeOnce.Do(func() {
		for _, s := range sc.shards {
			s.closing.Store(true)
			s.mb.close()
		}
	})
	_ = sc.Start() // a pinning error was reported by the first Start
	sc.running.Wait()
}

// NumShards returns the number of shards.
func (sc *Scheduler) NumShards() int { return len(sc.shards) }

// Shard returns shard i, from 0 to NumShards-1.
func (sc *Scheduler) Shard(i int) *Shard { return sc.shards[i] }

// ShardFor returns the shard that owns key, a hash of topic and partition.
// The mapping depends only on key and NumShards, so it is stable across
// calls and restarts with the same Config.Shards; keys are mixed first, so
// small sequential keys spread too. Safe from any goroutine.
func (sc *Scheduler) ShardFor(key uint64) *Shard {
	return sc.shards[shardIndex(key, len(sc.shards))]
}

// shardIndex maps key to [0, n): a 64-bit mix (the splitmix64 finalizer),
// then a multiply-shift range reduction instead of a division.
func shardIndex(key uint64, n int) int {
	key ^= key >> 30
	key *= 0xbf58476d1ce4e5b9
	key ^= key >> 27
	key *= 0x94d049bb133111eb
	key ^= key >> 31
	hi, _ := bits.Mul64(key, uint64(n))
	return int(hi)
}

// Config returns the configuration in use, defaults filled in.
func (sc *Scheduler) Config() Config {
	cfg := sc.cfg
	cfg.Cores = slices.Clone(cfg.Cores)
	return cfg
}

// Stats returns every shard's figures, in shard order. Safe from any
// goroutine.
func (sc *Scheduler) Stats() []Stats {
	st := make([]Stats, len(sc.shards))
	for i, s := range sc.shards {
		st[i] = s.Stats()
	}
	return st
}
