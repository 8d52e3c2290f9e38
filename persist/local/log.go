package local

import (
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"sluice/batch"
	"sluice/persist"
	"sluice/persist/vfs"
)

// Log is one physical partition's segment log.
//
// Log implements persist.Store; the package persist states the contract. Concurrency:
// one goroutine, the partition's owner, calls Place, Tail, Truncate, ApplyRetention and
// Close; one persister at a time calls Persist, concurrently with the owner. The reading
// methods (ReadRegion, Read, OffsetForTime, WalkHeaders, Bounds, Start, Next, Durable,
// Pending, Damage, DirectIO, Stats) are safe from any goroutine. Lock order: persistMu,
// then mu, then FilePool.mu (see the package comment). Place never waits for I/O of the
// log's own; Persist never holds mu across a write, a sync or a file creation; lookups
// may read index files and headers under mu; Truncate holds it throughout.
type Log struct {
	dir  string
	opts Options
	fs   vfs.FS

	// durable is the checkpoint: the last offset covered by an fdatasync (with
	// SyncNever, by a write). It only grows, except that Truncate lowers it.
	durable atomic.Int64
	// written is the offset after the last batch wholly written to its file: reads end
	// there. Changed with mu held.
	written atomic.Int64
	// placedBytes counts the bytes placed since Open, durableBytes those of them durable:
	// Pending is the difference.
	placedBytes, durableBytes atomic.Int64
	// direct reports whether the active segment is written with O_DIRECT.
	direct atomic.Bool

	// persistMu serializes Persist with itself, with Truncate and with Close, and guards
	// rp and w.
	persistMu sync.Mutex
	// rp is the recovery point on disk, as this log last read or wrote it.
	rp struct {
		valid   bool // false: none yet, or an unreadable one
		offset  int64
		clean   bool
		written time.Time // when Persist last tried to write it (the rate limit)
	}
	// w is the persister's writer state (persist.go).
	w writerState

	// damage is the corruption of acknowledged data that Open found, or nil; damaged
	// wraps it with ErrDamaged for writes. Set before Open returns, then fixed.
	damage  *CorruptionError
	damaged error
	// start (first offset held) and next (the offset the next batch gets: the end of
	// what is placed) change only with mu held, and are read without it by Bounds, so
	// that no reader waits for a lock.
	start, next atomic.Int64
	// total is the bytes written in all sized segments (see totalLocked); it changes
	// only with mu held, and is read without it by DiskBytes, so that a metrics scrape
	// never waits for a partition's lock.
	total atomic.Int64

	mu struct {
		sync.Mutex
		segs   []*segment // ascending base offsets; the last one is active
		failed error      // sticky; see ErrFailed
		// noSpace is set by a Persist that found the disk full creating a file, and
		// cleared by the next one that succeeds; Place refuses while it is set.
		noSpace error
		closed  bool
		// dirUnsynced counts segments created without an fsync of the directory
		// (SyncNever), which must happen before a recovery point may cover them.
		dirUnsynced int
		// spares are the files retention kept for new segments (reuse.go), newest last.
		spares []string
	}
	noReuse atomic.Bool  // the filesystem cannot zero in place: keep no files (reuse.go)
	reused  atomic.Int64 // segments started in a kept file

	// hdrs holds header-sized scratch buffers for lookups on any goroutine: a pool keeps
	// lookups free of allocation without serializing readers on a shared buffer.
	hdrs sync.Pool
}

// Place reserves the place of one whole batch of size bytes at the end of the log (see
// persist.Store): it gives the batch the next offset, a segment and a file position,
// records it in the segment's in-memory index and moves Next. No I/O: the file is
// written by a later Persist, from the caller's copy of the bytes. h is the batch's
// parsed header (its base offset field is ignored: the caller stamps the returned Base
// into its bytes); the caller has checked the batch's CRC. now decides rolls by age.
//
// A batch rolls to a new segment when the active one would grow past SegmentBytes, is
// SegmentAge old (from its first batch), or would hold offsets too far from its base
// for the index's 32-bit relative offsets; a batch larger than SegmentBytes gets a
// segment of its own. Errors: ErrBadBatch (size is not the header's), ErrDamaged,
// ErrFailed, ErrClosed, and ErrNoSpace while the last Persist could not create a file.
func (l *Log) Place(h batch.Header, size int64, now time.Time) (persist.Placement, error) {
	if h.Count == 0 || size != int64(h.Size()) {
		return persist.Placement{}, fmt.Errorf("%w: %d bytes placed, the header says %d and %d records", ErrBadBatch, size, h.Size(), h.Count)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.writableLocked(); err != nil {
		return persist.Placement{}, err
	}
	if l.mu.noSpace != nil {
		return persist.Placement{}, l.mu.noSpace
	}
	base := l.next.Load()
	last := base + int64(h.Count) - 1
	seg := l.activeLocked()
	roll := l.rollDueLocked(seg, size, last, now)
	if roll { // the file is created by Persist, once this one is finished
		seg = l.newSegment(base)
		seg.idx = newIndex()
		l.mu.segs = append(l.mu.segs, seg)
	}
	pos := seg.placed
	if pos == 0 {
		seg.created = now
	}
	seg.idx.add(seg.base, base, h.MaxTimestamp, pos, size, l.opts.IndexInterval)
	seg.placed, seg.placedNext = pos+size, last+1
	l.next.Store(last + 1)
	l.placedBytes.Add(size)
	return persist.Placement{Base: base, Segment: seg.base, Pos: pos, Roll: roll}, nil
}

// rollDueLocked reports whether a batch of size bytes whose last offset is last must go
// into a new segment: the active one would grow past SegmentBytes, is older than
// SegmentAge, or would hold offsets too far from its base for the index's 32-bit
// relative offsets. An empty segment takes any batch.
func (l *Log) rollDueLocked(seg *segment, size, last int64, now time.Time) bool {
	if seg.placed == 0 {
		return false
	}
	return seg.placed+size > l.opts.SegmentBytes || now.Sub(seg.created) >= l.opts.SegmentAge ||
		last-seg.base > math.MaxUint32
}

// Tail returns the active segment's base offset and the position where the next batch
// goes unless it rolls: after Open, where the owner's write buffer starts. Owner only.
func (l *Log) Tail() (segment, pos int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.activeLocked()
	return s.base, s.placed
}

// Pending returns the bytes placed and not yet durable. Safe from any goroutine.
func (l *Log) Pending() int64 { return l.placedBytes.Load() - l.durableBytes.Load() }

// Written returns the offset after the last batch written to its file: reads serve the
// offsets below it. Safe from any goroutine; takes no lock.
func (l *Log) Written() int64 { return l.written.Load() }

// DirectIO reports whether the log writes its segment files with O_DIRECT (true), or
// through the page cache because the filesystem refuses O_DIRECT (false; Open logs it
// once). A damaged log, which writes nothing, reports false. Safe from any goroutine.
func (l *Log) DirectIO() bool { return l.direct.Load() }

// ReusedFiles returns how many segments the log started in a file retention kept
// (reuse.go) since Open (persist.FileReuser). Safe from any goroutine.
func (l *Log) ReusedFiles() int64 { return l.reused.Load() }

// advanceDurable raises the durable checkpoint to off if it is higher.
func (l *Log) advanceDurable(off int64) {
	for {
		cur := l.durable.Load()
		if off <= cur || l.durable.CompareAndSwap(cur, off) {
			return
		}
	}
}

// fail is failLocked for a caller without mu.
func (l *Log) fail(err error) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.failLocked(err)
}

func (l *Log) failLocked(cause error) error {
	if l.mu.failed == nil {
		l.mu.failed = &failedError{cause: cause}
		l.opts.Logger.Error("partition log failed", "dir", l.dir, "err", cause)
	}
	return l.mu.failed
}

// noSpaceOrFail classifies an error of a step that wrote no data (creating a file,
// writing index files): a full disk is ErrNoSpace, leaves the log usable and makes Place
// refuse until a Persist succeeds; anything else fails the log.
func (l *Log) noSpaceOrFail(err error) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if vfs.IsNoSpace(err) {
		l.mu.noSpace = fmt.Errorf("%w: %w", ErrNoSpace, err)
		return l.mu.noSpace
	}
	return l.failLocked(err)
}

func (l *Log) writableLocked() error {
	switch {
	case l.mu.closed:
		return ErrClosed
	case l.damaged != nil:
		return l.damaged
	}
	return l.mu.failed
}

func (l *Log) activeLocked() *segment { return l.mu.segs[len(l.mu.segs)-1] }

// Close makes everything written durable, records it as the recovery point (marked
// clean) and releases the files; regions still held keep theirs open until released.
// It persists nothing: the owner runs a last Persist first (what is placed and not
// written is not in the files, and not in the record).
//
// Close fdatasyncs whatever the policy, SyncNever included: the clean-shutdown record
// must be true after a crash of the host too, or the next open would take data the
// kernel lost for damage. A failed or damaged log writes nothing.
func (l *Log) Close() error {
	l.persistMu.Lock()
	defer l.persistMu.Unlock()
	l.mu.Lock()
	if l.mu.closed {
		l.mu.Unlock()
		return nil
	}
	healthy := l.mu.failed == nil && l.damaged == nil
	l.mu.Unlock()
	var err error
	if healthy {
		if err = l.datasyncWriter(); err == nil {
			if r := l.written.Load() - 1; !l.rp.valid || l.rp.offset != r || !l.rp.clean {
				err = l.saveRecoveryPoint(r, true)
			}
		}
	}
	l.w.close()
	l.mu.Lock()
	l.mu.closed = true
	for _, s := range l.mu.segs {
		s.drop()
	}
	l.mu.segs = nil
	spares := l.mu.spares
	l.mu.spares = nil
	l.mu.Unlock()
	l.discardFiles(spares)
	return err
}

// Dir returns the partition directory.
func (l *Log) Dir() string { return l.dir }

// Durable returns the durable checkpoint: the last offset covered by an fdatasync (or
// by a write, with SyncNever); Start()-1 when nothing is.
func (l *Log) Durable() int64 { return l.durable.Load() }

// Start returns the first offset the log holds. Safe from any goroutine; takes no lock.
func (l *Log) Start() int64 { return l.start.Load() }

// Next returns the offset the next batch will get: one past the last offset placed.
// Safe from any goroutine; takes no lock.
func (l *Log) Next() int64 { return l.next.Load() }

// Bounds returns Start and Next, read together under no lock: a concurrent placement or
// retention may move either between the two loads, never backwards.
func (l *Log) Bounds() (start, next int64) { return l.start.Load(), l.next.Load() }

// Stats describes the log's size.
type Stats struct {
	Segments int
	Bytes    int64 // written
	Start    int64
	Next     int64 // placed
	Written  int64
	Durable  int64
	Spares   int   // files kept for reuse by new segments (reuse.go); not in Bytes
	Reused   int64 // segments started in a kept file since Open
}

// Stats returns the log's current size and offsets. The first call after Open sizes
// every segment (a stat each).
func (l *Log) Stats() (Stats, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	total, err := l.totalLocked()
	return Stats{Segments: len(l.mu.segs), Bytes: total, Start: l.start.Load(), Next: l.next.Load(),
		Written: l.written.Load(), Durable: l.durable.Load(), Spares: len(l.mu.spares), Reused: l.reused.Load()}, err
}

// totalLocked returns the bytes in all segments, sizing the ones Open left unsized.
func (l *Log) totalLocked() (int64, error) {
	for _, s := range l.mu.segs {
		if err := l.sizeLocked(s); err != nil {
			return l.total.Load(), err
		}
	}
	return l.total.Load(), nil
}

// sizeLocked makes s.size valid (a stat) and counts it in the total.
func (l *Log) sizeLocked(s *segment) error {
	if s.sized {
		return nil
	}
	size, err := l.fs.Stat(s.path)
	if err != nil {
		return fmt.Errorf("cannot stat segment %s: %w", s.path, err)
	}
	s.size, s.sized = size, true
	l.total.Add(size)
	return nil
}

// DiskBytes returns the bytes of record batches in the log's segment files: what was
// written, not the space the files hold (the active segment's file is preallocated).
// The segments Open found sealed count once they are sized: by the first retention
// pass, with or without retention settings (ApplyRetention), or by Stats. Any
// goroutine; it takes no lock.
func (l *Log) DiskBytes() int64 { return l.total.Load() }

// Damage returns the corruption of acknowledged data found when the log was opened (a
// *CorruptionError whose Offset is where the log now ends), or nil. Safe from any
// goroutine.
func (l *Log) Damage() error {
	if l.damage == nil {
		return nil // not a typed nil in an interface
	}
	return l.damage
}

// The segment log is the host's storage tier.
var _ persist.Store = (*Log)(nil)
