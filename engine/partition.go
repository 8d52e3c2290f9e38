package engine

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"sluice/batch"
	"sluice/memarena"
	"sluice/persist"
	"sluice/wire"
)

// Partition is one physical partition: its write buffer in the arena, its stored log
// (behind persist.Store), the write window, the producers' sequences and the requests
// parked on it. See the package comment for which goroutine may call what.
type Partition struct {
	topic   string
	id      int
	version atomic.Uint32 // V: the topic version this partition serves; raised by Switch
	session uint64        // S: set when the partition is loaded

	store persist.Store
	arena *memarena.Arena
	buf   *memarena.WriteBuffer // set at Open, never replaced; guards itself
	// records checks produced batches' records (PartitionConfig.Records; nil: not).
	records *RecordChecker
	// logical is the range of logical ids the partition serves in the layout of its
	// version, with that version (nil: unknown, records not held to it). Set at Open and
	// by Switch, with the version; read without the append lock by checkBatches.
	logical atomic.Pointer[logicalRange]

	// app is the append domain: Produce runs here, on whichever event loop read the
	// request, so that a produced byte is copied once, from the socket buffer to its
	// place in the arena. Its lock is held for memory work only (the sequences, placement,
	// the copy), never for I/O.
	app struct {
		sync.Mutex
		producers map[int64]*producerState
		segs      []segStart // where each segment still in the buffer starts in its stream
		frozen    bool       // Freeze: nothing is appended until Switch or Thaw
	}
	// fetchParked counts the long polls parked here. The owner raises it before it
	// checks the end and parks; an appender reads it after it moved the end: with
	// sequentially consistent atomics, either the appender sees the poll and has the
	// owner wake it (DataArrived), or the poll sees the new end and does not park.
	fetchParked atomic.Int64
	// end is the readers' end of the log: the offset after the last batch copied into
	// the write buffer. The store's end moves first, when it places a batch, and the
	// copy follows under the append lock; a reader that took the store's end in between
	// would find the batch in neither the buffer nor the file, and answer a long poll
	// empty (not parked) though its record had come. So reads, parking and the window
	// use end, which the appender moves once the bytes are there, and which a read that
	// took a batch copied before its appender moved it moves itself (advanceEnd): only
	// ever up, so that the window never goes back and a poll at the offset the read
	// answered parks.
	end atomic.Int64

	// replicated is set when C also waits for a replica (PartitionConfig.Replicated);
	// shipped is the offset below which the replica acknowledged everything.
	replicated   bool
	shipped      atomic.Int64
	replicaStart int64 // PartitionConfig.ReplicaStart; -1 when unknown or not replicated

	// Owner (shard) only.
	durable int64 // checkpoint C last passed to the waits
	local   int64 // the store's durable offset last passed to the write buffer
	waits   waits
	closing bool

	// Persister only: the spans a Persist holds while the store writes them.
	held    []memarena.Span
	release func()

	// damage is set once, when the partition opens damaged, and read by any goroutine.
	damage atomic.Pointer[damageError]
	// Read from any goroutine by metrics.
	hits, misses atomic.Uint64
}

// PartitionConfig says where a partition lives and how it is identified.
type PartitionConfig struct {
	Topic   string
	ID      int
	Version uint32
	// Session is the S of this load; it must differ from every earlier load of the
	// partition (the loader passes a clock reading or an epoch).
	Session uint64
	// Replicated makes C wait for a replica too (distributed mode: HDFS): the driver
	// reports what it acknowledged with Shipped.
	Replicated bool
	// ReplicaStart is the first offset the replica holds, from which it holds every
	// offset up to the store's data (the driver read it from HDFS at load), or -1 when
	// unknown: with Replicated, the partition's start (Window.Start: what a consumer asking
	// for the earliest offset gets) is the lower of it and the store's.
	ReplicaStart int64
	// Prior are the headers of batches before the store's first offset, oldest first,
	// that the producers' sequences must remember too: a partition loaded from its
	// replica (HDFS) onto an empty or older local store gets the replica's tail here, so
	// a resend of a batch the replica holds is recognized.
	Prior []batch.Header
	// DedupHorizon bounds how many bytes at the end of the log are read, when loading, to
	// rebuild the producers' sequences. 0 means DefaultDedupHorizon (64 MiB).
	DedupHorizon int64
	// Records checks the records of every produced batch before it is appended (shared
	// by the broker's partitions); nil checks each batch's header and CRC only.
	Records *RecordChecker
	// Partitions is how many partitions the topic has in the layout of Version (0:
	// unknown). With Records, the records of every batch stamped with a layout (its
	// producer says which layout routed them, batch.Header.Layout) must have logical ids
	// in the range this partition serves at Version, wire.LogicalRange(ID, Partitions):
	// what is appended from now on is read by the consumers of that range. A producer
	// that routed a record elsewhere (a client's bug, or batches routed before an
	// expansion and sent again after it unrouted) would put it where no consumer of its
	// logical range reads it, out of order with its key's other records. Switch gives
	// the count of each later version.
	Partitions int
}

// logicalRange is the range of logical ids [lo, hi) a partition serves at a version.
type logicalRange struct {
	version uint32
	lo, hi  int
}

// setLogical sets the range the partition serves at version v of a topic of n
// partitions (n = 0: unknown).
func (p *Partition) setLogical(v uint32, n int) {
	if n <= p.id || n > wire.MaxPartitions {
		p.logical.Store(nil)
		return
	}
	lo, hi := wire.LogicalRange(p.id, n)
	p.logical.Store(&logicalRange{version: v, lo: lo, hi: hi})
}

// Open loads a partition over an opened store: it rebuilds producer state from the
// store's tail and starts an empty write buffer at the store's end.
//
// Damage does not fail Open: a store that found corrupt acknowledged data, or a tail
// whose batch headers cannot be read to rebuild the producers' sequences, gives a
// partition that serves what it can read and refuses writes (Damage says why), so that
// one damaged partition never keeps the others from loading. Open fails only when the
// arena refuses the write buffer.
func Open(cfg PartitionConfig, store persist.Store, arena *memarena.Arena) (*Partition, error) {
	p := &Partition{topic: cfg.Topic, id: cfg.ID, session: cfg.Session,
		store: store, arena: arena, replicated: cfg.Replicated, replicaStart: -1, records: cfg.Records}
	p.version.Store(cfg.Version)
	p.setLogical(cfg.Version, cfg.Partitions)
	if cfg.Replicated {
		p.replicaStart = cfg.ReplicaStart
	}
	start, _ := store.Bounds()
	p.shipped.Store(start) // nothing acknowledged by a replica yet: the shipper says what is
	p.app.producers = map[int64]*producerState{}
	p.waits.fetchesParked = &p.fetchParked
	p.release = p.releaseHeld // made once: each Persist reuses it
	if err := store.Damage(); err != nil {
		p.setDamage(err)
	} else if err := p.rebuildProducers(cfg.Prior, cfg.DedupHorizon); err != nil {
		// Without every producer's last sequences a resend could be appended twice:
		// refuse writes rather than risk a duplicate.
		p.setDamage(fmt.Errorf("cannot rebuild producer sequences: %w", err))
	}
	// The buffer's stream follows the active segment's file: it starts where the next
	// batch goes, with the segment's byte 0 at stream position 0 (docs/writepath.md §1).
	_, next := store.Bounds()
	p.end.Store(next)
	seg, pos := store.Tail()
	buf, err := arena.NewWriteBufferAt(next, pos)
	if err != nil {
		return nil, fmt.Errorf("cannot load partition %s/%d: %w", cfg.Topic, cfg.ID, err)
	}
	p.app.segs = []segStart{{seg: seg, start: 0}}
	p.buf = buf
	p.local = store.Durable()
	buf.SetDurable(p.local)
	p.durable = p.checkpoint()
	return p, nil
}

// DefaultDedupHorizon is PartitionConfig.DedupHorizon's default (the broker's
// log.dedup_horizon): how much of a log's end is read at load to rebuild its producers'
// sequences.
const DefaultDedupHorizon = 64 << 20

// rebuildProducers records every idempotent batch of prior (below the store's start),
// then reads batch headers from the last horizon bytes of the store (whole segments at
// least back to the active one) and records those.
func (p *Partition) rebuildProducers(prior []batch.Header, horizon int64) error {
	start, _ := p.store.Bounds()
	for i := range prior {
		if h := &prior[i]; h.BaseOffset < start {
			p.remember(h, h.BaseOffset, h.LastOffset())
		}
	}
	if horizon == 0 {
		horizon = DefaultDedupHorizon
	}
	start, next := p.store.Bounds()
	from := start
	if bytes, err := p.store.Size(); err == nil && bytes > horizon && next > start {
		// Offsets are not bytes; estimate the start from the average batch density.
		from = next - int64(float64(next-start)*float64(horizon)/float64(bytes))
	}
	return p.store.WalkHeaders(from, func(h batch.Header) bool {
		p.remember(&h, h.BaseOffset, h.LastOffset())
		return true
	})
}

// remember records an idempotent batch in the producers' sequences. Requires p.app (or
// Open, before anyone else has the partition).
func (p *Partition) remember(h *batch.Header, base, last int64) {
	if !idempotent(h) {
		return
	}
	s := p.app.producers[h.ProducerID]
	if s == nil {
		s = &producerState{}
		p.app.producers[h.ProducerID] = s
	}
	s.add(appended{firstSeq: h.BaseSequence, lastSeq: h.BaseSequence + int32(h.Count) - 1, base: base, last: last})
}

// damageError marks a partition that takes no writes.
type damageError struct{ cause error }

func (e *damageError) Error() string   { return "partition damaged: " + e.cause.Error() }
func (e *damageError) Unwrap() []error { return []error{ErrDamaged, e.cause} }

func (p *Partition) setDamage(cause error) {
	var de *damageError
	if errors.As(cause, &de) {
		p.damage.Store(de)
		return
	}
	p.damage.Store(&damageError{cause: cause})
}

// Damage returns why the partition takes no writes (errors.Is(err, ErrDamaged)), or nil.
// Safe from any goroutine.
func (p *Partition) Damage() error {
	if d := p.damage.Load(); d != nil {
		return d
	}
	return nil
}

// Window is the partition's (V, S, C) plus its bounds, as answers report them.
type Window struct {
	Version    uint32
	Session    uint64
	Checkpoint int64 // durable checkpoint C
	Next       int64 // high watermark: the offset the next batch gets
	Start      int64 // first offset held
}

// Window returns the current (V, S, C) and offsets. Safe from any goroutine, and it takes
// no lock: the store keeps its bounds and checkpoint in atomics, so an event loop that
// answers a describe or a busy never waits for a write, a sync or a roll.
func (p *Partition) Window() Window {
	// C first: it never passes what is readable (the persister writes only what was
	// copied), and end only grows, so C stays below the end read after it.
	c := p.checkpoint()
	start, next := p.bounds()
	if p.replicaStart >= 0 {
		start = min(start, p.replicaStart) // older offsets are read from the replica
	}
	return Window{Version: p.version.Load(), Session: p.session, Checkpoint: c, Next: next, Start: start}
}

// bounds returns the first offset the store holds and the readers' end (see end). Any
// goroutine.
func (p *Partition) bounds() (start, next int64) {
	start, _ = p.store.Bounds()
	return start, p.end.Load()
}

// advanceEnd raises end to next, unless it is there already: the appender after each
// copy, and a read that took a batch copied before its appender got there (see end).
// Only whole batches in the write buffer are ever below next. Any goroutine.
func (p *Partition) advanceEnd(next int64) {
	for {
		cur := p.end.Load()
		if next <= cur || p.end.CompareAndSwap(cur, next) {
			return
		}
	}
}

// CheckWindow verifies a request's V and S (S = 0: the client's first request, which
// learns S from the answer). Safe from any goroutine.
func (p *Partition) CheckWindow(v uint32, s uint64) error {
	var err error
	switch {
	case v != p.version.Load():
		err = ErrVersionMismatch
	case s != 0 && s != p.session:
		err = ErrSessionMismatch
	default:
		return nil
	}
	w := p.Window()
	return &WindowError{Err: err, Version: w.Version, Session: w.Session, Checkpoint: w.Checkpoint}
}

// Counters returns the read hits (served from memory) and misses (from the store). Safe
// from any goroutine.
func (p *Partition) Counters() (hits, misses uint64) { return p.hits.Load(), p.misses.Load() }

// DirectIO reports whether the partition's store writes with O_DIRECT (direct), and
// whether the store is one that can (known; see persist.DirectWriter). Any goroutine.
func (p *Partition) DirectIO() (direct, known bool) {
	if d, ok := p.store.(persist.DirectWriter); ok {
		return d.DirectIO(), true
	}
	return false, false
}

// ReusedFiles returns how many segments the store started in files retention deleted
// (persist.FileReuser), and false for a store that does not reuse files.
func (p *Partition) ReusedFiles() (int64, bool) {
	if r, ok := p.store.(persist.FileReuser); ok {
		return r.ReusedFiles(), true
	}
	return 0, false
}

// DiskBytes returns the bytes of data in the store's files on this host
// (persist.DiskSizer), and false for a store that keeps none. Any goroutine.
func (p *Partition) DiskBytes() (int64, bool) {
	if d, ok := p.store.(persist.DiskSizer); ok {
		return d.DiskBytes(), true
	}
	return 0, false
}

// Shutdown makes everything appended durable (a last Persist, on the owner: the
// persister has stopped and no appender runs any more) and wakes every parked request,
// so that the driver answers them before Close: fetches with what they can read,
// produces with the final C. Later fetches are not parked. Owner only.
func (p *Partition) Shutdown() error {
	_, err := p.Persist()
	p.Checkpointed()
	p.closing = true
	p.waits.wakeAll(&p.waits.fetches, WokeShutdown)
	p.waits.wakeAll(&p.waits.durables, WokeShutdown)
	return err
}

// Close frees the write buffer and closes the store. Requests still parked are dropped:
// call Shutdown and answer Ready first. Owner only, once no appender runs.
func (p *Partition) Close() error {
	p.closing = true
	p.app.Lock()
	p.buf.Close()
	p.app.Unlock()
	// Not under the append lock: the store's persister lock comes before it (Persist
	// holds that lock while it asks Bytes for the write buffer's memory).
	return p.store.Close()
}
