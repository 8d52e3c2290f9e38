package local

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"sluice/batch"
	"sluice/persist/vfs"
)

// Log is one physical partition's segment log.
//
// Concurrency: one goroutine, the partition's owner, calls the writing methods (Append,
// Truncate, ApplyRetention, Tick, Close). Sync may run on another goroutine at the same
// time as Append. The reading methods (ReadRegion, Read, OffsetForTime, Start, Next,
// Durable) are safe from any goroutine. Lock order: syncMu, then mu.
type Log struct {
	dir  string
	opts Options
	fs   vfs.FS

	// durable is the last offset covered by an fsync: the durable checkpoint. It only
	// grows, except that Truncate lowers it to the truncation point.
	durable atomic.Int64
	// syncMu serializes Sync with itself and with Truncate.
	syncMu sync.Mutex

	mu struct {
		sync.Mutex
		segs     []*segment // ascending base offsets; the last one is active
		start    int64      // first offset held
		next     int64      // offset the next batch gets (the high watermark)
		total    int64      // bytes in all sized segments; see totalLocked
		unsynced int64      // bytes appended since the last fsync
		lastSync time.Time
		failed   error // sticky; see ErrFailed
		closed   bool
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
	if seg.size > 0 && (seg.size+int64(len(b)) > l.opts.SegmentBytes || now.Sub(seg.created) >= l.opts.SegmentAge) {
		if err := l.rollLocked(now); err != nil {
			l.mu.Unlock()
			return 0, err
		}
		seg = l.activeLocked()
	}
	base, pos := l.mu.next, seg.size
	l.mu.Unlock()

	// The write runs without the lock: readers never look past seg.size, which moves only
	// after the whole batch is in the file, so they cannot see a torn batch.
	batch.SetBaseOffset(b, base)
	if n, err := seg.file.WriteAt(b, pos); err != nil {
		return 0, l.undoWrite(seg, pos, n, err)
	}
	size, last := int64(len(b)), base+int64(h.Count)-1

	l.mu.Lock()
	if seg.size == 0 {
		seg.created = now
	}
	seg.idx.add(seg.base, base, h.MaxTimestamp, pos, size, l.opts.IndexInterval)
	seg.size += size
	seg.next = last + 1
	l.mu.next = last + 1
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

// undoWrite handles a failed write of n bytes at pos: it cuts the partial batch off. A
// full disk leaves the log usable; any other error, or a failed cut, fails it.
func (l *Log) undoWrite(seg *segment, pos int64, n int, werr error) error {
	werr = fmt.Errorf("cannot append to %s: %w", seg.path, werr)
	var terr error
	if n > 0 {
		terr = seg.file.Truncate(pos)
	}
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
// the dirty pages and a second fsync could report success for data that is gone.
func (l *Log) Sync() error {
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	l.mu.Lock()
	if err := l.writableLocked(); err != nil {
		l.mu.Unlock()
		return err
	}
	seg, target, pending := l.activeLocked(), l.mu.next-1, l.mu.unsynced
	seg.acquire()
	l.mu.Unlock()
	defer seg.release()
	if pending == 0 && target <= l.durable.Load() {
		return nil
	}
	err := seg.file.Sync()
	now := l.opts.Clock()
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		return l.failLocked(fmt.Errorf("cannot fsync %s: %w", seg.path, err))
	}
	l.mu.unsynced -= pending
	l.mu.lastSync = now
	l.advanceDurable(target)
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

// rollLocked seals the active segment (fsync, index files) and starts a new one.
func (l *Log) rollLocked(now time.Time) error {
	old := l.activeLocked()
	if l.opts.Sync != SyncNever {
		if err := old.file.Sync(); err != nil {
			return l.failLocked(fmt.Errorf("cannot fsync %s: %w", old.path, err))
		}
		l.mu.unsynced, l.mu.lastSync = 0, now
		l.advanceDurable(old.next - 1)
	}
	old.idx.seal()
	if err := old.writeIndexFiles(l, old.idx); err != nil {
		return l.writeErrorLocked(fmt.Errorf("cannot seal segment %s: %w", old.path, err))
	}
	if l.opts.Strict {
		if err := l.verifySealedLocked(old); err != nil {
			return l.failLocked(err)
		}
	}
	seg, err := l.createSegmentLocked(old.next)
	if err != nil {
		return l.writeErrorLocked(err)
	}
	old.sealed = true
	l.mu.segs = append(l.mu.segs, seg)
	return nil
}

// verifySealedLocked re-reads a segment and checks it against its in-memory index.
func (l *Log) verifySealedLocked(s *segment) error {
	idx, err := s.rebuildIndex(l.opts.IndexInterval)
	if err != nil {
		return err
	}
	if len(idx.offs) != len(s.idx.offs) || len(idx.times) != len(s.idx.times) || idx.maxTs != s.idx.maxTs {
		return &CorruptionError{File: s.path, Reason: "segment does not match its index after sealing"}
	}
	return nil
}

// createSegmentLocked creates an empty active segment at base.
func (l *Log) createSegmentLocked(base int64) (*segment, error) {
	seg := newSegment(l.dir, base)
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
	seg.file, seg.idx, seg.created = f, newIndex(), l.opts.Clock()
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
	if l.mu.closed {
		return ErrClosed
	}
	return l.mu.failed
}

func (l *Log) activeLocked() *segment { return l.mu.segs[len(l.mu.segs)-1] }

// Close fsyncs the active segment (unless the policy is never) and releases the files;
// regions still held keep theirs open until released.
func (l *Log) Close() error {
	var err error
	if l.opts.Sync != SyncNever {
		if serr := l.Sync(); serr != nil && !errors.Is(serr, ErrClosed) {
			err = serr
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.mu.closed {
		return nil
	}
	l.mu.closed = true
	for _, s := range l.mu.segs {
		s.release()
	}
	l.mu.segs = nil
	return err
}

// Dir returns the partition directory.
func (l *Log) Dir() string { return l.dir }

// Durable returns the durable checkpoint: the last offset covered by an fsync (or by a
// write, with SyncNever); Start()-1 when nothing is.
func (l *Log) Durable() int64 { return l.durable.Load() }

// Start returns the first offset the log holds.
func (l *Log) Start() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mu.start
}

// Next returns the offset the next batch will get: one past the last offset readable.
func (l *Log) Next() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mu.next
}

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
	return Stats{Segments: len(l.mu.segs), Bytes: total, Start: l.mu.start, Next: l.mu.next, Durable: l.durable.Load()}, err
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
