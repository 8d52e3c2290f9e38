package broker

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"sluice/memarena"
	"sluice/netio"
	"sluice/persist/local"
	"sluice/sched"
)

// Broker is a running embedded broker.
type Broker struct {
	cfg   Config
	arena *memarena.Arena
	sched *sched.Scheduler
	net   *netio.Server
	addr  string

	mu struct {
		sync.RWMutex
		topics map[string]*topic
		// byShard lists each shard's partitions, indexed by shard id. Slices only grow
		// (append under the lock), so a reader may keep a copied slice header.
		byShard [][]*part
	}
	createMu    sync.Mutex
	lastSession atomic.Uint64
	stopReclaim chan struct{}
	reclaimDone chan struct{}
	flushers    sync.WaitGroup
	stopFlush   chan struct{}
	payloads    sync.Pool // *[]byte buffers for produce payloads; see getPayload
	parkMu      sync.Mutex
	nParked     atomic.Int64                 // entries in parked, read without parkMu
	parked      map[*netio.Conn][]*fetchTask // long polls waiting, by connection; see respondTo
}

// Start opens the data directory (recovering every partition), starts the shards and
// serves. It returns once the listener is up.
func Start(cfg Config) (*Broker, error) {
	cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return nil, fmt.Errorf("cannot create data directory: %w", err)
	}
	// Group fsync runs on flusher goroutines, never on a shard: a shard that waited for
	// the disk would hold up every partition it owns.
	cfg.Log.ExternalSync = cfg.Log.Sync == local.SyncGroup
	b := &Broker{cfg: cfg}
	b.mu.topics = map[string]*topic{}
	b.parked = map[*netio.Conn][]*fetchTask{}
	var err error
	if b.arena, err = memarena.New(cfg.Arena); err != nil {
		return nil, err
	}
	if b.sched, err = sched.New(cfg.Sched); err != nil {
		b.arena.Close()
		return nil, err
	}
	b.mu.byShard = make([][]*part, b.sched.NumShards())
	if err := b.loadTopics(); err != nil {
		b.closeAll()
		return nil, err
	}
	b.scheduleBackground()
	if err := b.sched.Start(); err != nil {
		b.closeAll()
		return nil, err
	}
	ntopics := len(b.mu.topics) // read before requests can create topics
	if b.net, err = netio.Start(cfg.Net, b); err != nil {
		b.sched.Close()
		b.closeAll()
		return nil, err
	}
	b.addr = b.net.Addr()
	b.stopReclaim, b.reclaimDone = make(chan struct{}), make(chan struct{})
	go b.reclaimLoop()
	b.stopFlush = make(chan struct{})
	if cfg.Log.ExternalSync {
		for i := range b.sched.NumShards() {
			b.flushers.Add(1)
			go b.flushLoop(b.sched.Shard(i))
		}
	}
	cfg.Logger.Info("broker serving", "addr", b.addr, "topics", ntopics, "config", cfg.String())
	return b, nil
}

// scheduleBackground registers each shard's periodic work: group fsync (which also
// answers producers waiting for durability) and retention; and closes the shard's
// partitions when the shard stops. It runs before the shards start.
func (b *Broker) scheduleBackground() {
	for i := range b.sched.NumShards() {
		sh := b.sched.Shard(i)
		if !b.cfg.Log.ExternalSync {
			sh.Every(b.cfg.Log.SyncInterval, "fsync", func(time.Time) { b.forParts(sh, b.tickPart) })
		}
		sh.Every(b.cfg.RetentionCheck, "retention", func(time.Time) { b.forParts(sh, b.retainPart) })
		sh.OnClose(func() { b.forParts(sh, b.closePart) })
	}
}

// forParts runs fn on every partition of shard sh.
func (b *Broker) forParts(sh *sched.Shard, fn func(*part)) {
	for _, pt := range b.partsOf(sh) {
		fn(pt)
	}
}

// partsOf lists the partitions of shard sh; safe from any goroutine. The flusher calls it
// every fsync interval, so it neither scans every topic nor allocates.
func (b *Broker) partsOf(sh *sched.Shard) []*part {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.mu.byShard[sh.ID()]
}

// addTopicLocked makes a loaded topic visible to lookups and to its shards' background
// work. Requires b.mu held for writing.
func (b *Broker) addTopicLocked(t *topic) {
	b.mu.topics[t.meta.Name] = t
	for _, pt := range t.parts {
		id := pt.shard.ID()
		b.mu.byShard[id] = append(b.mu.byShard[id], pt)
	}
}

// flushLoop is a shard's group fsync, on a goroutine of its own: every fsync interval it
// syncs the shard's partitions that have pending data (Log.Sync runs concurrently with
// appends), then has the shard pass the new checkpoints on and answer the producers
// waiting for them.
func (b *Broker) flushLoop(sh *sched.Shard) {
	defer b.flushers.Done()
	t := time.NewTicker(b.cfg.Log.SyncInterval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-b.stopFlush:
			return
		}
		synced := false
		for _, pt := range b.partsOf(sh) {
			if pt.p.Log().Pending() == 0 {
				continue
			}
			if err := pt.p.Log().Sync(); err != nil {
				b.cfg.Logger.Error("fsync failed: the partition accepts no more writes", "topic", pt.topic.meta.Name, "partition", pt.id, "err", err)
				continue
			}
			synced = true
		}
		if synced {
			sh.SubmitFunc(func(*sched.Shard) { b.forParts(sh, b.tickPart) })
		}
	}
}

func (b *Broker) tickPart(pt *part) {
	if err := pt.p.Tick(); err != nil {
		b.cfg.Logger.Error("fsync failed", "topic", pt.topic.meta.Name, "partition", pt.id, "err", err)
	}
	b.answerDurable(pt)
}

func (b *Broker) retainPart(pt *part) {
	if _, err := pt.p.Log().ApplyRetention(pt.p.Log().Durable()); err != nil {
		b.cfg.Logger.Error("retention failed", "topic", pt.topic.meta.Name, "partition", pt.id, "err", err)
	}
}

func (b *Broker) closePart(pt *part) {
	b.answerAllParked(pt)
	if err := pt.p.Close(); err != nil {
		b.cfg.Logger.Error("close failed", "topic", pt.topic.meta.Name, "partition", pt.id, "err", err)
	}
}

// Addr returns the address the broker serves on.
func (b *Broker) Addr() string { return b.addr }

// Shutdown stops serving and makes everything accepted durable: it closes the listener
// and the connections, lets the shards run every queued request, fsyncs and closes every
// partition, and frees the arena.
func (b *Broker) Shutdown(ctx context.Context) error {
	err := b.net.Stop(ctx)
	close(b.stopReclaim)
	<-b.reclaimDone
	close(b.stopFlush)
	b.flushers.Wait()
	b.sched.Close() // runs queued requests, then closes (and fsyncs) every partition
	b.arena.Close()
	return err
}

// closeAll closes partitions and the arena when start fails.
func (b *Broker) closeAll() {
	for _, t := range b.mu.topics {
		b.closeParts(t.parts)
	}
	b.arena.Close()
}

// Stats returns the network and arena figures.
func (b *Broker) Stats() (netio.Stats, memarena.Stats) { return b.net.Stats(), b.arena.Stats() }

// reclaimLoop is the arena's background driver: allocations reclaim when memory runs low,
// and this pass every second also gives idle slabs back to the kernel (MADV_DONTNEED)
// and keeps free memory above the low watermark between bursts.
func (b *Broker) reclaimLoop() {
	defer close(b.reclaimDone)
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			b.arena.Reclaim()
		case <-b.stopReclaim:
			return
		}
	}
}
