package hdfs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// Source is a partition the shipper ships (the broker adapts an engine.Partition).
// Every method is called from the shipper's goroutines and must not block on anything
// but memory or the local disk.
type Source interface {
	// Bounds returns the first offset the partition holds and the offset its next batch
	// gets: what is below next and not shipped yet is to ship.
	Bounds() (start, next int64)
	// Read returns whole batches from the one starting at offset on, up to maxBytes but
	// at least one batch, as pieces, with a release to call once they are shipped (or
	// abandoned); no pieces at the end.
	Read(offset int64, maxBytes int) (pieces [][]byte, release func(), err error)
	// Shipped reports that HDFS acknowledged every batch below next.
	Shipped(next int64)
}

// ShipperOptions configure a broker's shipper.
type ShipperOptions struct {
	Conn Options
	// Root is the directory of every topic on HDFS (ROOT in the package comment).
	Root string
	// Workers is how many partitions ship at once, each worker with a connection of
	// its own. Default 2.
	Workers int
	// CommitInterval is how often a partition with data waiting is shipped. Default
	// 50 ms.
	CommitInterval time.Duration
	// CommitBytes bounds one commit round of one partition. Default 16 MiB.
	CommitBytes int
	Writer      WriterOptions
	Logger      *slog.Logger
}

func (o *ShipperOptions) ensureDefaults() error {
	if err := o.Conn.ensureDefaults(); err != nil {
		return err
	}
	if o.Root == "" {
		o.Root = "/sluice"
	}
	if o.Workers <= 0 {
		o.Workers = 2
	}
	if o.CommitInterval <= 0 {
		o.CommitInterval = 50 * time.Millisecond
	}
	if o.CommitBytes <= 0 {
		o.CommitBytes = 16 << 20
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	o.Writer.ensureDefaults()
	return nil
}

// Shipper ships many partitions to HDFS with a small pool of workers: every commit
// interval each partition with batches waiting is queued once, and a worker ships up
// to CommitBytes of it in one round (Writer.Commit), then requeues it if more waits. A
// failed round is retried from the first offset not acknowledged, into a new file,
// after a backoff that doubles up to maxBackoff; nothing ever runs on an event loop or
// a shard, and every HDFS call has the connection's timeout.
type Shipper struct {
	opts  ShipperOptions
	queue chan *shipPart
	stop  chan struct{}
	wg    sync.WaitGroup

	mu struct {
		sync.Mutex
		parts  map[string]*shipPart
		closed bool
	}
	commits, failures, shippedBytes atomic.Uint64
	switches                        atomic.Uint64 // rounds moved to a new file (Writer.PipelineSwitches)
}

// maxBackoff bounds the wait before a failed partition is shipped again: short, since a
// retry against a NameNode that is down fails at once (one against a paused one waits
// the connection's timeout). After a 60 s outage a 10 s cap held shipping back 9 s past
// HDFS's return.
const maxBackoff = 2 * time.Second

// shipPart is one partition's shipping state.
type shipPart struct {
	topic    string
	id       int
	key, dir string
	epoch    uint64
	from     int64 // where shipping starts; -1: where HDFS ends (resume)
	src      Source
	queued   atomic.Bool // in the queue or with a worker
	removed  atomic.Bool

	// Worker-owned (one worker at a time: queued).
	w          *Writer
	failures   int
	retryAt    time.Time
	switchedAt time.Time // when a pipeline switch was last logged

	acked   atomic.Int64  // Writer.Next after the last acknowledged round; -1 before the first
	arrived arrivals      // when offsets appeared, for the lag in seconds
	failing atomic.Bool   // the last round failed
	bytes   atomic.Uint64 // batch bytes HDFS acknowledged since the partition was added
}

// NewShipper starts a shipper.
func NewShipper(opts ShipperOptions) (*Shipper, error) {
	if err := opts.ensureDefaults(); err != nil {
		return nil, err
	}
	s := &Shipper{opts: opts, queue: make(chan *shipPart, 1024), stop: make(chan struct{})}
	s.mu.parts = map[string]*shipPart{}
	for range opts.Workers {
		conn, err := NewConn(opts.Conn)
		if err != nil {
			close(s.stop)
			s.wg.Wait()
			return nil, err
		}
		s.wg.Add(1)
		go s.worker(conn)
	}
	s.wg.Add(1)
	go s.tick()
	return s, nil
}

func partKey(topic string, id int) string { return fmt.Sprintf("%s/%d", topic, id) }

// Add starts shipping a partition loaded with the given epoch (its session: higher than
// every earlier epoch of the partition). The first round finds where HDFS ends.
func (s *Shipper) Add(topic string, id int, epoch uint64, src Source) {
	s.AddAt(topic, id, epoch, -1, src)
}

// AddAt is Add for a partition whose shipping starts at offset from, already known
// (from >= 0): a partition just taken over from another broker, whose start is where
// HDFS ended when it was loaded. The shipper does not look on HDFS for where to resume:
// the broker it was taken from may still be finishing a commit there (its later data is
// fenced by this epoch's first file, and never acknowledged), and resuming after that
// data would skip this broker's own batches at the same offsets.
func (s *Shipper) AddAt(topic string, id int, epoch uint64, from int64, src Source) {
	sp := &shipPart{topic: topic, id: id, key: partKey(topic, id), dir: PartitionDir(s.opts.Root, topic, id), epoch: epoch, src: src, from: from}
	sp.acked.Store(-1)
	s.mu.Lock()
	defer s.mu.Unlock()
	if old := s.mu.parts[sp.key]; old != nil {
		old.removed.Store(true)
	}
	s.mu.parts[sp.key] = sp
}

// Remove stops shipping a partition; a round under way finishes (the caller keeps the
// partition open until Close, or accepts that its last round fails).
func (s *Shipper) Remove(topic string, id int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sp := s.mu.parts[partKey(topic, id)]; sp != nil {
		sp.removed.Store(true)
		delete(s.mu.parts, sp.key)
	}
}

// Flush ships until HDFS holds everything every partition holds, or ctx ends (a
// partition backing off after failures is retried when its backoff ends): the broker's
// last round at shutdown, once nothing is appended any more.
func (s *Shipper) Flush(ctx context.Context) error {
	for {
		pending := false
		for _, sp := range s.list(nil) {
			if _, next := sp.src.Bounds(); sp.acked.Load() < next {
				pending = true
				s.enqueue(sp)
			}
		}
		if !pending {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(min(s.opts.CommitInterval, 20*time.Millisecond)):
		}
	}
}

// Close stops the shipper: no new round starts, rounds under way end (each bounded by
// the connection's timeout) and Close waits for them.
func (s *Shipper) Close() {
	s.mu.Lock()
	if s.mu.closed {
		s.mu.Unlock()
		return
	}
	s.mu.closed = true
	s.mu.Unlock()
	close(s.stop)
	s.wg.Wait()
}

// tick queues, every commit interval, each partition with data waiting and no backoff.
func (s *Shipper) tick() {
	defer s.wg.Done()
	t := time.NewTicker(s.opts.CommitInterval)
	defer t.Stop()
	var due []*shipPart
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		due = s.list(due[:0])
		now := time.Now()
		for _, sp := range due {
			_, next := sp.src.Bounds()
			acked := sp.acked.Load()
			sp.arrived.note(next, acked, now)
			if acked >= 0 && next <= acked {
				continue
			}
			s.enqueue(sp)
		}
	}
}

// list appends the partitions shipped to dst.
func (s *Shipper) list(dst []*shipPart) []*shipPart {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, sp := range s.mu.parts {
		dst = append(dst, sp)
	}
	return dst
}

// enqueue hands sp to a worker unless it is queued already.
func (s *Shipper) enqueue(sp *shipPart) {
	if sp.removed.Load() || !sp.queued.CompareAndSwap(false, true) {
		return
	}
	select {
	case s.queue <- sp:
	case <-s.stop:
		sp.queued.Store(false)
	}
}

// worker ships the partitions handed to it, one round each.
func (s *Shipper) worker(conn *Conn) {
	defer s.wg.Done()
	defer conn.Close()
	for {
		select {
		case <-s.stop:
			return
		case sp := <-s.queue:
			more := s.round(conn, sp)
			sp.queued.Store(false)
			if more {
				go s.enqueue(sp) // not from a worker: the queue may be full
			}
		}
	}
}

// round ships one round of sp and reports whether more waits.
func (s *Shipper) round(conn *Conn, sp *shipPart) bool {
	if sp.removed.Load() || time.Now().Before(sp.retryAt) {
		return false
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-s.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	err := s.ship(ctx, conn, sp)
	if err == nil {
		if sp.failures > 0 {
			s.opts.Logger.Info("shipping to HDFS again", "partition", sp.key, "after_failures", sp.failures)
		}
		sp.failures, sp.retryAt = 0, time.Time{}
		sp.failing.Store(false)
		_, next := sp.src.Bounds()
		return next > sp.acked.Load()
	}
	s.failures.Add(1)
	sp.failing.Store(true)
	if sp.failures == 0 {
		s.opts.Logger.Warn("cannot ship to HDFS: retrying with backoff (the checkpoint waits)", "partition", sp.key, "err", err,
			"hdfs_says", RemoteMessage(err))
	}
	sp.failures++
	sp.retryAt = time.Now().Add(min(100*time.Millisecond<<min(sp.failures, 8), maxBackoff))
	return false
}

// ship starts sp's writer if needed, then commits one round.
func (s *Shipper) ship(ctx context.Context, conn *Conn, sp *shipPart) error {
	if sp.w == nil {
		next := sp.from
		if next < 0 {
			var err error
			if next, err = s.resume(ctx, conn, sp); err != nil {
				return err
			}
		}
		sp.w = NewWriter(sp.dir, sp.epoch, next, s.opts.Writer)
		sp.acked.Store(next)
		sp.src.Shipped(next)
	}
	pieces, release, err := sp.src.Read(sp.w.Next(), s.opts.CommitBytes)
	if err != nil {
		return fmt.Errorf("cannot read partition %s at %d to ship it: %w", sp.key, sp.w.Next(), err)
	}
	if len(pieces) == 0 {
		release()
		return nil
	}
	switches := sp.w.PipelineSwitches
	err = sp.w.Commit(ctx, conn, pieces)
	release()
	if err != nil {
		return err
	}
	s.commits.Add(1)
	if sp.w.PipelineSwitches != switches {
		s.switched(sp)
	}
	var n uint64
	for _, p := range pieces {
		n += uint64(len(p))
	}
	s.shippedBytes.Add(n)
	sp.bytes.Add(n)
	sp.acked.Store(sp.w.Next())
	sp.src.Shipped(sp.w.Next())
	return nil
}

// switched counts a round that went into a new file because an append would not have
// reached every replica of the current one, and logs it at most once a minute per
// partition (while HDFS has fewer live DataNodes than the replication, every round
// does).
func (s *Shipper) switched(sp *shipPart) {
	s.switches.Add(1)
	if time.Since(sp.switchedAt) < time.Minute {
		return
	}
	sp.switchedAt = time.Now()
	s.opts.Logger.Info("HDFS listed another set of DataNodes than the file's replicas: the round went into a new file",
		"partition", sp.key, "next", sp.w.Next(), "switches", sp.w.PipelineSwitches)
}

// PipelineSwitches returns how many rounds went into a new file because an append would
// not have reached exactly the replicas of the current one (pipeline.go).
func (s *Shipper) PipelineSwitches() uint64 { return s.switches.Load() }

// resume finds where shipping starts for a partition just added: where HDFS's data ends,
// within what the partition holds. HDFS ahead of the partition (this broker lost the end
// of its log in a crash after shipping it; C never covered it) starts at the partition's
// end: the new epoch's file fences the rest. HDFS behind the partition's start (HDFS
// enabled on an existing partition, or its data removed there) starts at the start.
func (s *Shipper) resume(ctx context.Context, conn *Conn, sp *shipPart) (int64, error) {
	r := NewReader(conn, sp.dir, nil)
	if err := r.Refresh(ctx); err != nil {
		return 0, err
	}
	end, ok, err := r.End(ctx)
	if err != nil && !errors.Is(err, ErrCorrupt) {
		return 0, err
	}
	start, next := sp.src.Bounds()
	switch {
	case err != nil:
		s.opts.Logger.Error("the partition's data on HDFS is damaged: shipping from the partition's start into a new epoch",
			"partition", sp.key, "dir", sp.dir, "err", err)
		return start, nil
	case !ok || end < start:
		if ok {
			s.opts.Logger.Warn("HDFS holds less than the partition: shipping from the partition's start", "partition", sp.key,
				"hdfs_end", end, "start", start)
		}
		return start, nil
	case end > next:
		s.opts.Logger.Warn("HDFS holds more than the partition (lost locally in a crash, never acknowledged): continuing at the partition's end in a new epoch",
			"partition", sp.key, "hdfs_end", end, "next", next)
		return next, nil
	}
	return end, nil
}

// arrivals remembers, every commit interval, the partition's end and the time it was
// seen, so that the lag in seconds is the age of the oldest offset HDFS has not
// acknowledged (to a commit interval), not the time since the shipper was last caught
// up. At most arrivalsKept samples: beyond that the lag is at least the oldest's age.
type arrivals struct {
	mu      sync.Mutex
	samples []arrival
}

type arrival struct {
	next int64 // offsets below existed at
	at   time.Time
}

const arrivalsKept = 4096

// note records the end next seen at now, and forgets samples HDFS has acknowledged.
func (a *arrivals) note(next, acked int64, now time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	drop := 0
	for drop < len(a.samples) && a.samples[drop].next <= acked {
		drop++
	}
	a.samples = append(a.samples[:0], a.samples[drop:]...)
	if n := len(a.samples); n == 0 || a.samples[n-1].next < next {
		if n == arrivalsKept {
			copy(a.samples[1:], a.samples[2:]) // keep the oldest: the lag's lower bound
			a.samples = a.samples[:n-1]
		}
		a.samples = append(a.samples, arrival{next, now})
	}
}

// lag returns the age of the oldest offset not acknowledged (acked < 0: not started).
func (a *arrivals) lag(acked int64, now time.Time) time.Duration {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, s := range a.samples {
		if s.next > max(acked, 0) {
			return now.Sub(s.at)
		}
	}
	return 0
}

// PartStats are one partition's shipping figures.
type PartStats struct {
	Topic      string
	Partition  int
	Acked      int64         // the offset below which HDFS acknowledged everything; -1 before the first round
	LagOffsets int64         // offsets waiting to ship
	Lag        time.Duration // how long data has been waiting (0 when caught up)
	Failing    bool          // the last round failed
	Shipped    uint64        // batch bytes HDFS acknowledged since the partition was added
}

// Stats returns the shipper's counters and each partition's figures.
func (s *Shipper) Stats() (commits, failures, bytes uint64, parts []PartStats) {
	now := time.Now()
	for _, sp := range s.list(nil) {
		_, next := sp.src.Bounds()
		ps := PartStats{Topic: sp.topic, Partition: sp.id, Acked: sp.acked.Load()}
		if ps.Acked >= 0 {
			ps.LagOffsets = max(next-ps.Acked, 0)
		}
		ps.Lag = sp.arrived.lag(ps.Acked, now)
		ps.Failing = sp.failing.Load()
		ps.Shipped = sp.bytes.Load()
		parts = append(parts, ps)
	}
	return s.commits.Load(), s.failures.Load(), s.shippedBytes.Load(), parts
}
