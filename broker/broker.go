package broker

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"sluice/engine"
	"sluice/internal/dirlock"
	"sluice/memarena"
	"sluice/netio"
	"sluice/netio/tlsfront"
	"sluice/persist/hdfs"
	"sluice/persist/vfs"
	"sluice/sched"
	"sluice/wire"
)

// Broker is a running embedded broker.
type Broker struct {
	cfg   Config
	arena *memarena.Arena
	// records checks the records of every produced batch (nil with Config.TrustRecords).
	records *engine.RecordChecker
	sched   *sched.Scheduler
	net     *netio.Server
	addr    atomic.Pointer[string] // set by Serving, before any request
	epoch   time.Time              // the driver's clock: engine deadlines are ns since epoch

	mu struct {
		sync.RWMutex
		topics map[string]*topic
		// byShard lists each shard's opened partitions, indexed by shard id. A list is
		// copied on every change (never written in place), so a reader may keep the one
		// it got.
		byShard    [][]*part
		partitions int // in all topics
	}
	createMu    sync.Mutex
	lastSession atomic.Uint64
	fdLimit     int // RLIMIT_NOFILE at start
	lock        *dirlock.Lock

	stopReclaim  chan struct{}
	reclaimDone  chan struct{}
	reaper       reaper // removes the files retention deleted, off the shards
	shutdownOnce sync.Once
	shutdownErr  error
	persisters   sync.WaitGroup
	stopPersist  chan struct{}
	wakes        []*persistWake  // per shard: how appenders wake its persister
	shipper      *hdfs.Shipper   // nil unless distributed mode ships to HDFS
	remote       *remoteReads    // fetches served from HDFS; nil unless distributed mode
	cl           *clusterState   // nil unless the broker follows a ZooKeeper cluster
	front        *tlsfront.Front // the TLS front; nil without TLS
	auth         *authState      // users and ACLs; nil without authentication
	metrics      *http.Server    // serves cfg.Metrics; nil without
	metricsAddr  string
	// reopen: partitions offline for want of HDFS opened once it answers (HDFS without
	// a cluster); nil channels when not running.
	stopReopen, reopenDone chan struct{}

	panics   atomic.Uint64 // recovered on shards (netio counts the loops')
	produced atomic.Uint64 // batch bytes accepted by produce requests
	copied   atomic.Uint64 // bytes the produce path copied in user space
	gapLog   everyLog      // sequence gaps, logged once a minute for the whole broker (produce.go)
	// refused counts produce requests answered with an error, by code
	// (sluice_produce_refused_total): the slow path only.
	refused     [wire.CodeTooLarge + 1]atomic.Uint64
	parkedFetch atomic.Int64 // long polls parked on partitions
	// wakesLoop and wakesShard count appends that woke parked long polls, on the
	// appending event loop or on the partition's shard (produce.go).
	wakesLoop, wakesShard atomic.Uint64
	parkedAck             atomic.Int64  // produces waiting for their checkpoint
	skippedDirs           atomic.Int64  // data directory entries that are not topics
	remoteBytes           atomic.Uint64 // batch bytes fetches read from HDFS
	stages                *stages       // where requests wait (stages.go)
}

// Start opens the data directory (recovering every partition), starts the shards and
// serves. It returns once the listener is up; nothing is served before every topic on
// disk is loaded and the broker knows its own address.
func Start(cfg Config) (*Broker, error) {
	cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return nil, fmt.Errorf("cannot create data directory: %w", err)
	}
	// Before anything is read or recovered: a second broker on the same directory would
	// remove the first one's temporary files and fail its partitions.
	lock, err := dirlock.Acquire(cfg.DataDir)
	if err != nil {
		return nil, fmt.Errorf("cannot start on %s: %w", cfg.DataDir, err)
	}
	b := &Broker{cfg: cfg, epoch: time.Now(), fdLimit: fdLimit(), lock: lock, stages: newStages()}
	if !cfg.TrustRecords {
		b.records = engine.NewRecordChecker()
	}
	b.reaper.fs, b.reaper.logger = cfg.Log.FS, cfg.Logger
	if b.reaper.fs == nil {
		b.reaper.fs = vfs.Default()
	}
	b.mu.topics = map[string]*topic{}
	if b.arena, err = memarena.New(cfg.Arena); err != nil {
		lock.Release()
		return nil, err
	}
	if b.sched, err = sched.New(cfg.Sched); err != nil {
		b.arena.Close()
		lock.Release()
		return nil, err
	}
	b.mu.byShard = make([][]*part, b.sched.NumShards())
	b.wakes = make([]*persistWake, b.sched.NumShards())
	for i := range b.wakes {
		b.wakes[i] = newPersistWake()
	}
	if err := b.startShipper(); err != nil {
		b.closeAll()
		return nil, err
	}
	if err := b.startRemoteReads(); err != nil {
		b.closeAll()
		return nil, err
	}
	if cfg.Cluster.Enabled() { // in a cluster, topics come from ZooKeeper
		err = b.dialCluster()
	} else {
		err = b.loadTopics()
	}
	if err != nil {
		b.closeAll()
		return nil, err
	}
	if err := b.startAuth(); err != nil {
		b.closeAll()
		return nil, err
	}
	b.scheduleBackground()
	if err := b.sched.Start(); err != nil {
		b.closeAll()
		return nil, err
	}
	b.mu.RLock()
	ntopics, nparts := len(b.mu.topics), b.mu.partitions
	b.mu.RUnlock()
	b.stopPersist = make(chan struct{})
	for i := range b.sched.NumShards() {
		b.persisters.Add(1)
		go b.persistLoop(b.sched.Shard(i), b.wakes[i])
	}
	if err = b.startNet(); err != nil {
		close(b.stopPersist)
		b.persisters.Wait()
		b.leaveCluster()
		b.stopShipper()
		b.stopAuth()
		b.sched.Close()
		b.reaper.wait(context.Background())
		b.arena.Close()
		b.lock.Release()
		return nil, err
	}
	b.stopReclaim, b.reclaimDone = make(chan struct{}), make(chan struct{})
	go b.reclaimLoop()
	if cfg.HDFS.Enabled() && b.cl == nil {
		b.stopReopen, b.reopenDone = make(chan struct{}), make(chan struct{})
		go b.reopenLoop(b.stopReopen, b.reopenDone)
	}
	if b.cl != nil {
		if err := b.joinCluster(); err != nil {
			b.Shutdown(context.Background())
			return nil, err
		}
	}
	if err := b.startMetrics(); err != nil {
		b.Shutdown(context.Background())
		return nil, err
	}
	if missing := cfg.missingSecurity(); missing != "" && !loopback(cfg.Net.Listen) {
		cfg.Logger.Warn("INSECURE: serving a non-loopback address with "+missing+" off: anyone who reaches it "+exposure(missing),
			"listen", b.Addr())
	}
	cfg.Logger.Info("broker serving", "addr", b.Addr(), "topics", ntopics, "partitions", nparts,
		"fd_limit", b.fdLimit, "config", cfg.String())
	return b, nil
}

// Serving records the address the network layer listens on; netio calls it before it
// accepts any connection, so metadata never carries an empty address.
func (b *Broker) Serving(addr string) {
	if !b.cfg.TLS.Enabled() { // behind a TLS front clients use its address (startNet)
		b.addr.Store(&addr)
	}
}

// BeforeWait runs on an event loop after each of its callbacks (netio.Waiter): it lets
// the shards the handlers woke run before the loop can block in epoll_wait holding its
// processor (sched.Scheduler.HandOff says why).
func (b *Broker) BeforeWait() { b.sched.HandOff() }

var _ netio.Waiter = (*Broker)(nil)

// Addr returns the address the broker serves on.
func (b *Broker) Addr() string {
	if a := b.addr.Load(); a != nil {
		return *a
	}
	return ""
}

// addTopicLocked makes a loaded topic visible to lookups and to its shards' background
// work. Requires b.mu held for writing.
func (b *Broker) addTopicLocked(t *topic) {
	b.mu.topics[t.meta.Name] = t
	b.mu.partitions += len(t.parts)
	for _, pt := range t.parts {
		if pt.p != nil {
			b.addToShardLocked(pt)
			b.ship(pt)
		}
	}
}

// addToShardLocked lists an opened partition with its shard's background work. A shard's
// list is copied on every change, never written in place: the persister iterates a
// list it got under the lock after releasing it. Requires b.mu held for writing.
func (b *Broker) addToShardLocked(pt *part) {
	id := pt.shard.ID()
	b.mu.byShard[id] = append(slices.Clip(b.mu.byShard[id]), pt)
}

// swapPart replaces a partition's part in its topic (distributed mode: a partition
// loaded, or given up): lookups find the new one from here on, and the shard's
// background work moves from the old one to it. A part is never reopened: a load makes
// a new one, so the fields a part's goroutines read without a lock never change.
func (b *Broker) swapPart(old, nw *part) {
	b.mu.Lock()
	defer b.mu.Unlock()
	old.topic.parts[old.id] = nw
	id := old.shard.ID()
	b.mu.byShard[id] = slices.DeleteFunc(slices.Clone(b.mu.byShard[id]), func(p *part) bool { return p == old })
	if nw.p != nil {
		b.addToShardLocked(nw)
	}
}

// partsOf lists the partitions of shard sh; safe from any goroutine. The persister calls
// it every fsync interval, so it neither scans every topic nor allocates.
func (b *Broker) partsOf(sh *sched.Shard) []*part {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.mu.byShard[sh.ID()]
}

// partitionLimit is how many partitions the broker accepts: each keeps its active
// segment open, so at most half of the file limit, leaving the rest to sealed segments
// being read, index files, sockets and the process itself.
func (b *Broker) partitionLimit() int { return max(b.fdLimit/2, 1) }

// fdLimit returns the soft limit on open files (Go raises it to the hard limit at start).
func fdLimit() int {
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err != nil || rl.Cur > 1<<30 {
		return 1 << 20
	}
	return int(rl.Cur)
}

// shutdownFlushWait bounds how long Shutdown waits for clients to read their last
// answers before it closes their connections.
const shutdownFlushWait = 5 * time.Second

// now is the driver's clock for engine deadlines: monotonic nanoseconds since start.
func (b *Broker) now() int64 { return int64(time.Since(b.epoch)) }

// Shutdown stops serving and makes everything accepted durable: new requests are
// answered not_serving, the persisters stop, the shards run every queued request, then
// each shard persists its partitions, answers what is parked on them (on connections
// still open: a producer waiting for durability hears its final checkpoint) and closes
// them; once the answers are written (or ctx ends) it closes the listener and the
// connections, and last frees the arena. Later calls return the first one's result.
func (b *Broker) Shutdown(ctx context.Context) error {
	b.shutdownOnce.Do(func() {
		b.net.Drain() // from here on requests are answered not_serving; no handler runs
		close(b.stopReclaim)
		<-b.reclaimDone
		if b.stopReopen != nil {
			close(b.stopReopen)
			<-b.reopenDone
		}
		close(b.stopPersist)
		b.persisters.Wait()
		b.flushShipper(ctx)
		// Loads and unloads end, and the session with them: the leader moves the
		// partitions now, and HDFS holds what they had.
		b.leaveCluster()
		b.stopShipper() // rounds under way end first: they read from the partitions
		// Runs queued requests, then the OnClose hooks (shutdownPart: the last persist,
		// the answers to everything parked), while the connections are still open.
		b.sched.Close()
		b.reaper.wait(ctx) // retention ran on the shards: its files go before the stop returns
		// The answers written: a client that does not read its answers holds the stop
		// for shutdownFlushWait at most (everything is durable by now).
		fctx, cancel := context.WithTimeout(ctx, shutdownFlushWait)
		if err := b.net.Flushed(fctx); err != nil {
			b.cfg.Logger.Warn("closing connections with answers not yet written", "err", err)
		}
		cancel()
		b.shutdownErr = b.net.Stop(ctx)
		if b.front != nil {
			b.front.Stop() // its relays ended with the event loops' connections
		}
		b.stopAuth()
		b.stopMetrics() // before the arena its figures read goes
		b.arena.Close()
		b.lock.Release()
	})
	return b.shutdownErr
}

// flushShipper gives HDFS what it lacks, for shutdownFlushWait at most: nothing is
// appended any more, and the produces waiting for C hear whether it reached HDFS.
func (b *Broker) flushShipper(ctx context.Context) {
	if b.shipper == nil {
		return
	}
	fctx, cancel := context.WithTimeout(ctx, shutdownFlushWait)
	defer cancel()
	if err := b.shipper.Flush(fctx); err != nil {
		b.cfg.Logger.Warn("stopping with data not yet on HDFS: the next start ships it", "err", err)
	}
}

// stopShipper stops shipping (rounds under way end, each bounded by the HDFS timeout).
func (b *Broker) stopShipper() {
	if b.shipper != nil {
		b.shipper.Close()
	}
	b.stopRemoteReads()
}

// closeAll closes partitions and the arena when start fails.
func (b *Broker) closeAll() {
	b.stopAuth()
	b.leaveCluster()
	b.stopShipper()
	for _, t := range b.mu.topics {
		closeTopic(t)
	}
	b.arena.Close()
	b.lock.Release()
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
