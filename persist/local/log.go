package local

import (
	"errors"
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
// one goroutine, the partition's owner, calls the writing methods (Append, Truncate,
// ApplyRetention, Tick, Close). Sync may run on another goroutine at the same time as
// Append. The reading methods (ReadRegion, Read, OffsetForTime, WalkHeaders, Bounds,
// Start, Next, Durable, Damage) are safe from any goroutine. Lock order: syncMu, then mu,
// then FilePool.mu (see the package comment). Append, Sync and roll never hold mu across
// a write or an fsync; lookups may read index files and headers under it; Truncate holds
// it throughout.
type Log struct {
	dir  string
	opts Options
	fs   vfs.FS

	// durable is the last offset covered by an fsync: the durable checkpoint. It only
	// grows, except that Truncate lowers it to the truncation point.
	durable atomic.Int64
	// syncMu serializes Sync with itself, with Truncate and with Close, and guards rp.
	syncMu sync.Mutex
	// rp is the recovery point on disk, as this log last read or wrote it.
	rp struct {
		valid   bool // false: none yet, or an unreadable one
		offset  int64
		clean   bool
		written time.Time // when Sync last tried to write it (the rate limit)
	}
	// damage is the corruption of acknowledged data that Open found, or nil; damaged
	// wraps it with ErrDamaged for writes. Set before Open returns, then fixed.
	damage  *CorruptionError
	damaged error
	// start (first offset held) and next (the offset the next batch gets: the high
	// watermark) change only with mu held, and are read without it by Bounds, so that no
	// reader waits for a lock.
	start, next atomic.Int64

	mu struct {
		sync.Mutex
		segs     []*segment // ascending base offsets; the last one is active
		total    int64      // bytes in all sized segments; see totalLocked
		unsynced int64      // bytes appended since the last fsync
		lastSync time.Time
		failed   error // sticky; see ErrFailed
		closed   bool
		// dirUnsynced counts segments created without an fsync of the directory
		// (SyncNever), which must happen before a recovery point may cover them.
		dirUnsynced int
	}

	// hdrs holds header-sized scratch buffers for lookups on any goroutine: a pool keeps
	// lookups free of allocation without serializing readers on a shared buffer.
	hdrs sync.Pool
}

// Append writes one whole batch at the end of the log, stamping its base offset into b
// (the only bytes changed; they are outside the CRC), and returns that offset. It makes
// one write call; fsync follows the policy. b must hold exactly one batch whose header is
// valid; the caller has verified its CRC (the broker does so once, on arrival).
//
// On ErrNoSpace nothing was appended and the log stays usable. On ErrFailed the log
// accepts no more writes; whether the batch survives is decided by recovery on reopen.
func (l *Log) Append(b []byte) (int64, error) {
	h, err := batch.ParseHeader(b)
	if err != nil {
		return 0, fmt.Errorf("%w: %w", ErrBadBatch, err)
	}
	if h.Size() != len(b) {
		return 0, fmt.Errorf("%w: %d bytes given, header says %d", ErrBadBatch, len(b), h.Size())
	}
	now := l.opts.Clock()
	l.mu.Lock()
	if err := l.writableLocked(); err != nil {
		l.mu.Unlock()
		return 0, err
	}
	seg := l.activeLocked()
	if l.rollDueLocked(seg, int64(len(b)), h.Count, now) {
		l.mu.Unlock()
		if err := l.roll(now); err != nil {
			return 0, err
		}
		l.mu.Lock()
		seg = l.activeLocked()
	}
	base, pos := l.next.Load(), seg.size
	l.mu.Unlock()

	// The write runs without the lock: readers never look past seg.size, which moves only
	// after the whole batch is in the file, so they cannot see a torn batch.
	batch.SetBaseOffset(b, base)
	if _, err := seg.writer().WriteAt(b, pos); err != nil {
		return 0, l.undoWrite(seg, pos, err)
	}
	size, last := int64(len(b)), base+int64(h.Count)-1

	l.mu.Lock()
	if seg.size == 0 {
		seg.created = now
	}
	seg.idx.add(seg.base, base, h.MaxTimestamp, pos, size, l.opts.IndexInterval)
	seg.size += size
	seg.next = last + 1
	l.next.Store(last + 1)
	l.mu.total += size
	l.mu.unsynced += size
	due := l.syncDueLocked(now)
	l.mu.Unlock()

	if l.opts.Sync == SyncNever {
		l.advanceDurable(last)
	} else if due {
		if err := l.Sync(); err != nil {
			return base, err
		}
	}
	return base, nil
}

// rollDueLocked reports whether a batch of size bytes and count records must go into a
// new segment: the active one would grow past SegmentBytes, is older than SegmentAge, or
// would hold offsets too far from its base for the index's 32-bit relative offsets.
func (l *Log) rollDueLocked(seg *segment, size int64, count uint32, now time.Time) bool {
	if seg.size == 0 {
		return false
	}
	last := l.next.Load() + int64(count) - 1
	return seg.size+size > l.opts.SegmentBytes || now.Sub(seg.created) >= l.opts.SegmentAge ||
		last-seg.base > math.MaxUint32
}

// undoWrite handles a failed write at pos: it cuts the file back to pos, whatever the
// write reported (os.File.WriteAt reports 0 bytes after a short write followed by
// ENOSPC, yet bytes reached the file; left there, they would be sealed into the segment
// by the next roll). A full disk leaves the log usable; any other error, or a failed cut,
// fails it.
func (l *Log) undoWrite(seg *segment, pos int64, werr error) error {
	werr = fmt.Errorf("cannot append to %s: %w", seg.path, werr)
	terr := seg.writer().Truncate(pos)
	if terr == nil && vfs.IsNoSpace(werr) {
		return fmt.Errorf("%w: %w", ErrNoSpace, werr)
	}
	if terr != nil {
		werr = fmt.Errorf("%w; cannot cut the partial batch off: %w", werr, terr)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.failLocked(werr)
}

// Sync fsyncs what has been appended and advances the durable checkpoint to cover it. A
// failed fsync fails the log: it is never retried, because the kernel may have dropped
// the dirty pages and a second fsync could report success for data that is gone. At
// most every RecoveryPointInterval it also rewrites the recovery point to the new
// checkpoint (a failure there is logged and leaves the old record, which stays true).
func (l *Log) Sync() error {
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	target, err := l.flush()
	if err != nil || target < 0 {
		return err
	}
	if now := l.opts.Clock(); now.Sub(l.rp.written) >= l.opts.RecoveryPointInterval && (!l.rp.valid || target > l.rp.offset) {
		l.rp.written = now
		if err := l.saveRecoveryPoint(target, false); err != nil {
			if errors.Is(err, ErrFailed) {
				return err
			}
			l.opts.Logger.Warn("cannot advance the recovery point", "dir", l.dir, "err", err)
		}
	}
	return nil
}

// flush fsyncs the active segment if anything is pending and advances the durable
// checkpoint; it returns the checkpoint it made durable, or -1 when it did nothing.
// syncMu held.
func (l *Log) flush() (int64, error) {
	l.mu.Lock()
	if err := l.writableLocked(); err != nil {
		l.mu.Unlock()
		return -1, err
	}
	seg, target, pending := l.activeLocked(), l.next.Load()-1, l.mu.unsynced
	if pending == 0 && target <= l.durable.Load() {
		l.mu.Unlock()
		return -1, nil
	}
	h := seg.h.Load()
	if !h.tryAcquire() {
		panic(fmt.Sprintf("BUG: active segment %s has no descriptor", seg.path))
	}
	l.mu.Unlock()
	defer h.release()
	err := h.f.Sync()
	now := l.opts.Clock()
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		return -1, l.failLocked(fmt.Errorf("cannot fsync %s: %w", seg.path, err))
	}
	l.mu.unsynced -= pending
	l.mu.lastSync = now
	l.advanceDurable(target)
	return target, nil
}

// saveRecoveryPoint records r as the recovery point, after making durable whatever below
// it no fsync has covered yet (sealed segments of SyncNever, segments recovery scanned,
// the directory). r must be durable in the active segment already. syncMu held.
func (l *Log) saveRecoveryPoint(r int64, clean bool) error {
	if err := l.syncSegments(); err != nil {
		return err
	}
	if err := writeRecoveryPoint(l.fs, l.dir, RecoveryPoint{Offset: r, Clean: clean}); err != nil {
		return err
	}
	l.rp.valid, l.rp.offset, l.rp.clean = true, r, clean
	return nil
}

// syncSegments fsyncs the segments marked needSync (the active one too: after a
// recovery with SyncNever, its recovered bytes are not counted as pending), and the
// directory when a segment was created without a sync of it. A failed fsync fails the
// log, as in Sync. syncMu held (nobody else clears the marks meanwhile).
func (l *Log) syncSegments() error {
	type mark struct {
		s    *segment
		next int64 // the segment's end when collected: later appends are not covered
	}
	l.mu.Lock()
	var marks []mark
	for _, s := range l.mu.segs {
		if s.needSync {
			marks = append(marks, mark{s, s.next})
		}
	}
	dir := l.mu.dirUnsynced
	l.mu.Unlock()
	for _, m := range marks {
		h, err := m.s.use()
		if errors.Is(err, errSegmentGone) {
			continue // deleted by retention meanwhile: nothing left to make durable
		}
		if err != nil {
			return err
		}
		err = h.f.Sync()
		h.release()
		if err != nil {
			return l.fail(fmt.Errorf("cannot fsync %s: %w", m.s.path, err))
		}
	}
	if dir > 0 {
		if err := l.fs.SyncDir(l.dir); err != nil {
			return l.fail(fmt.Errorf("cannot sync directory %s: %w", l.dir, err))
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, m := range marks {
		if m.s.next == m.next {
			m.s.needSync = false
		}
	}
	l.mu.dirUnsynced -= dir
	return nil
}

// Tick runs the time-driven part of the fsync policy: with SyncGroup, it fsyncs when data
// has waited SyncInterval. The owner calls it at least every SyncInterval.
func (l *Log) Tick() error {
	now := l.opts.Clock()
	l.mu.Lock()
	due := l.opts.Sync == SyncGroup && !l.opts.ExternalSync && l.mu.unsynced > 0 && now.Sub(l.mu.lastSync) >= l.opts.SyncInterval
	l.mu.Unlock()
	if due {
		return l.Sync()
	}
	return nil
}

func (l *Log) syncDueLocked(now time.Time) bool {
	switch l.opts.Sync {
	case SyncEveryBatch:
		return true
	case SyncGroup:
		return !l.opts.ExternalSync && (l.mu.unsynced >= l.opts.SyncBytes || now.Sub(l.mu.lastSync) >= l.opts.SyncInterval)
	}
	return false
}

// advanceDurable raises the durable checkpoint to off if it is higher.
func (l *Log) advanceDurable(off int64) {
	for {
		cur := l.durable.Load()
		if off <= cur || l.durable.CompareAndSwap(cur, off) {
			return
		}
	}
}

// Pending returns the bytes appended since the last fsync. Safe from any goroutine.
func (l *Log) Pending() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mu.unsynced
}

// roll seals the active segment (fsync, index files) and starts a new one. Owner only,
// without mu: the fsync and the file writes run unlocked, so readers on other goroutines
// never wait for them. That is safe because only the owner appends, so the active
// segment cannot change under it; readers see the old segment as active (and readable
// up to its size) until the new one is published at the end.
func (l *Log) roll(now time.Time) error {
	if l.opts.Sync != SyncNever {
		if err := l.Sync(); err != nil { // fsyncs the active segment: the one being sealed
			return err
		}
	}
	l.mu.Lock()
	old := l.activeLocked()
	old.idx.seal() // appends to the time index: under mu, like every index change
	l.mu.Unlock()
	if err := old.writeIndexFiles(l, old.idx); err != nil {
		return l.writeError(fmt.Errorf("cannot seal segment %s: %w", old.path, err))
	}
	if l.opts.Strict {
		if err := l.verifySealed(old); err != nil {
			return l.fail(err)
		}
	}
	seg, err := l.createSegment(old.next)
	if err != nil {
		return l.writeError(err)
	}
	l.mu.Lock()
	old.sealed = true
	if l.opts.Sync == SyncNever {
		old.needSync = true
		l.mu.dirUnsynced++
	}
	l.mu.segs = append(l.mu.segs, seg)
	l.mu.Unlock()
	old.seal() // its descriptor joins the pool: outside mu, since the pool may evict
	return nil
}

// writeError is writeErrorLocked for a caller without mu.
func (l *Log) writeError(err error) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.writeErrorLocked(err)
}

// fail is failLocked for a caller without mu.
func (l *Log) fail(err error) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.failLocked(err)
}

// verifySealed re-reads a sealed segment and checks it against its in-memory index. Owner
// only (the segment's fields are the owner's to read without mu).
func (l *Log) verifySealed(s *segment) error {
	h, err := s.use()
	if err != nil {
		return err
	}
	defer h.release()
	idx, bad, err := s.rebuildIndex(h, l.opts.IndexInterval)
	if err != nil {
		return err
	}
	if bad != nil {
		return bad
	}
	if len(idx.offs) != len(s.idx.offs) || len(idx.times) != len(s.idx.times) || idx.maxTs != s.idx.maxTs {
		return &CorruptionError{File: s.path, Offset: s.base, Reason: "segment does not match its index after sealing"}
	}
	return nil
}

// createSegment creates an empty active segment at base, without publishing it. It does
// I/O: the caller holds no lock, or holds mu only while nobody else can use the log (Open).
func (l *Log) createSegment(base int64) (*segment, error) {
	seg := l.newSegment(base)
	f, err := l.fs.Create(seg.path)
	if err != nil {
		return nil, fmt.Errorf("cannot create segment %s: %w", seg.path, err)
	}
	if l.opts.Sync != SyncNever {
		if err := l.fs.SyncDir(l.dir); err != nil {
			f.Close()
			return nil, fmt.Errorf("cannot sync directory %s: %w", l.dir, err)
		}
	}
	seg.install(f)
	seg.idx, seg.created = newIndex(), l.opts.Clock()
	return seg, nil
}

// writeErrorLocked classifies an error of a step that changed nothing durable: a full
// disk is reported and leaves the log usable, anything else fails it.
func (l *Log) writeErrorLocked(err error) error {
	if vfs.IsNoSpace(err) {
		return fmt.Errorf("%w: %w", ErrNoSpace, err)
	}
	return l.failLocked(err)
}

func (l *Log) failLocked(cause error) error {
	if l.mu.failed == nil {
		l.mu.failed = &failedError{cause: cause}
		l.opts.Logger.Error("partition log failed", "dir", l.dir, "err", cause)
	}
	return l.mu.failed
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

// Close makes everything appended durable, records it as the recovery point (marked
// clean) and releases the files; regions still held keep theirs open until released.
//
// Close fsyncs whatever the policy, SyncNever included: the clean-shutdown record must
// be true after a crash of the host too, or the next open would take data the kernel
// lost for damage. A failed or damaged log writes nothing.
func (l *Log) Close() error {
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	l.mu.Lock()
	if l.mu.closed {
		l.mu.Unlock()
		return nil
	}
	healthy := l.mu.failed == nil && l.damaged == nil
	l.mu.Unlock()
	var err error
	if healthy {
		if _, err = l.flush(); err == nil {
			if r := l.next.Load() - 1; !l.rp.valid || l.rp.offset != r || !l.rp.clean {
				err = l.saveRecoveryPoint(r, true)
			}
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.mu.closed = true
	for _, s := range l.mu.segs {
		s.drop()
	}
	l.mu.segs = nil
	return err
}

// Dir returns the partition directory.
func (l *Log) Dir() string { return l.dir }

// Durable returns the durable checkpoint: the last offset covered by an fsync (or by a
// write, with SyncNever); Start()-1 when nothing is.
func (l *Log) Durable() int64 { return l.durable.Load() }

// Start returns the first offset the log holds. Safe from any goroutine; takes no lock.
func (l *Log) Start() int64 { return l.start.Load() }

// Next returns the offset the next batch will get: one past the last offset readable.
// Safe from any goroutine; takes no lock.
func (l *Log) Next() int64 { return l.next.Load() }

// Bounds returns Start and Next, read together under no lock: a concurrent append or
// retention may move either between the two loads, never backwards.
func (l *Log) Bounds() (start, next int64) { return l.start.Load(), l.next.Load() }

// Stats describes the log's size.
type Stats struct {
	Segments int
	Bytes    int64
	Start    int64
	Next     int64
	Durable  int64
}

// Stats returns the log's current size and offsets. The first call after Open sizes
// every segment (a stat each).
func (l *Log) Stats() (Stats, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	total, err := l.totalLocked()
	return Stats{Segments: len(l.mu.segs), Bytes: total, Start: l.start.Load(), Next: l.next.Load(), Durable: l.durable.Load()}, err
}

// totalLocked returns the bytes in all segments, sizing the ones Open left unsized.
func (l *Log) totalLocked() (int64, error) {
	for _, s := range l.mu.segs {
		if err := l.sizeLocked(s); err != nil {
			return l.mu.total, err
		}
	}
	return l.mu.total, nil
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
	l.mu.total += size
	return nil
}

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
