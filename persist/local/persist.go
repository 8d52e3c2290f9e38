package local

import (
	"errors"
	"fmt"
	"math"
	"time"

	"sluice/persist"
	"sluice/persist/vfs"
)

// writerState is the persister's: the segment whose file is open for writing, and how
// far it is written and durable. Guarded by Log.persistMu.
type writerState struct {
	// seg is the segment whose file bw writes; nil between a finished segment and the
	// next one's file (whose creation may have found the disk full).
	seg *segment
	bw  blockWriter
	// next is the offset after seg's written batches; synced the bytes of seg counted in
	// Log.durableBytes (fdatasync'd, or written under SyncNever).
	next, synced int64
	// dirty is set while bytes written to the file wait for an fdatasync (Close makes
	// them durable whatever the policy).
	dirty bool
	// finished is set once seg, which the log has moved past, is cut to its length and
	// synced: a finish that ran out of space writing the index files resumes there.
	finished bool
	// reported is set once the fall-back from O_DIRECT has been logged.
	reported bool
	// allocated is how far seg's file is known to be preallocated (or past where the
	// filesystem cannot preallocate): a write that would go further extends the
	// preallocation first, so that a full disk is ErrNoSpace before any byte is written,
	// never a failed write (a batch larger than SegmentBytes, a file cut by Truncate, an
	// active segment recovery could not preallocate again).
	allocated int64

	jobs   []persistJob
	pieces [][]byte
	// collect lists the jobs into jobs and jobsErr (Persist, under persistMu): made once,
	// because a closure made per call and handed to Source.Settled moved the list to the
	// heap on every pass.
	collect func()
	jobsErr error
}

// close closes the write descriptor, if any.
func (w *writerState) close() {
	if w.bw.f != nil {
		w.bw.f.Close()
		w.bw.f = nil
	}
	w.seg = nil
}

// persistJob is one unsealed segment as Persist found it.
type persistJob struct {
	seg          *segment
	placed, next int64 // the segment's placed end and the offset there
	last         bool  // the active segment: written, not finished
}

// Persist writes everything placed and not yet written, reading the bytes from src (see
// persist.Store). Persister only: at most one goroutine at a time, concurrently with the
// owner's Place. It never holds mu across I/O, so readers and Place never wait for it.
//
// For each unsealed segment in order: its file is created (preallocated to
// SegmentBytes) if it has none, the bytes from where the file is written to where the
// segment is placed are written as whole aligned blocks (blockwriter.go), and a segment
// the log has moved past is finished: cut to its length, fdatasync'd, indexed and sealed,
// before the next file is created. Then the active file is fdatasync'd by the policy
// (SyncGroup and SyncEveryBatch: every call that wrote; SyncNever: never), the checkpoint
// moves to the last offset wholly written and synced, and at most every
// RecoveryPointInterval the recovery point records it (sync policies; under SyncNever
// the record moves over each segment sealed, after its fsync: recordSealed).
//
// A failed write or fdatasync fails the log for good: the kernel may have dropped the
// pages or the device the blocks, so a retry could report success for data that is gone.
// A full disk while creating a file or writing index files is ErrNoSpace: the log stays
// usable, Place refuses until a Persist succeeds, and nothing placed is lost.
func (l *Log) Persist(src persist.Source) (bool, error) {
	l.persistMu.Lock()
	defer l.persistMu.Unlock()
	// What is placed, read where no placement is under way (persist.Source).
	if l.w.collect == nil {
		l.w.collect = func() { l.w.jobs, l.w.jobsErr = l.persistJobs(l.w.jobs[:0]) }
	}
	src.Settled(l.w.collect)
	jobs, err := l.w.jobs, l.w.jobsErr
	l.w.jobsErr = nil
	defer func() { clear(jobs); l.w.jobs = jobs[:0] }()
	if err != nil {
		return false, err
	}
	wrote := false
	for _, j := range jobs {
		if l.w.seg != j.seg {
			if err := l.startSegment(j.seg); err != nil {
				return wrote, err
			}
		}
		if j.placed > l.w.bw.written {
			if err := l.writeSegment(src, j); err != nil {
				return wrote, err
			}
			wrote = true
		}
		if !j.last {
			if err := l.finishSegment(j); err != nil {
				return wrote, err
			}
			if err := l.recordSealed(j.seg); err != nil {
				return wrote, err
			}
		}
	}
	if l.opts.Sync != SyncNever {
		if err := l.datasyncWriter(); err != nil {
			return wrote, err
		}
	}
	l.mu.Lock()
	l.mu.noSpace = nil
	l.mu.Unlock()
	return wrote, l.recordCheckpoint()
}

// persistJobs lists the unsealed segments (a suffix of the list: segments are sealed in
// order) with their placed ends as of now.
func (l *Log) persistJobs(jobs []persistJob) ([]persistJob, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.writableLocked(); err != nil {
		return jobs, err
	}
	segs := l.mu.segs
	i := len(segs)
	for i > 0 && !segs[i-1].sealed {
		i--
	}
	for k, s := range segs[i:] {
		jobs = append(jobs, persistJob{seg: s, placed: s.placed, next: s.placedNext, last: i+k == len(segs)-1})
	}
	return jobs, nil
}

// startSegment creates s's file, preallocated (allocStep) so that writes into it
// change no size, or takes a file retention kept for reuse (reuse.go), zeroed in place,
// and makes it the one the persister writes. The segment before s is finished
// (sealed), so a file exists only once the one before it is whole. Nothing is written
// yet: a full disk leaves no file behind and is ErrNoSpace.
func (l *Log) startSegment(s *segment) error {
	if l.w.seg != nil {
		panic(fmt.Sprintf("BUG: creating %s while %s is not finished", s.path, l.w.seg.path))
	}
	fw, reused := l.reuseFile(s)
	if !reused {
		var err error
		if fw, err = l.createSegmentFile(s); err != nil {
			return err
		}
	}
	f := fw.f
	if l.opts.Sync == SyncNever {
		l.mu.Lock()
		l.mu.dirUnsynced++
		l.mu.Unlock()
	} else if err := l.fs.SyncDir(l.dir); err != nil {
		f.Close()
		return l.noSpaceOrFail(fmt.Errorf("cannot sync directory %s: %w", l.dir, err))
	}
	l.useWriter(s, f, fw.direct, nil, fw.allocated)
	if reused {
		l.reused.Add(1)
	}
	return nil
}

// createSegmentFile creates s's file, preallocated by the first step.
func (l *Log) createSegmentFile(s *segment) (fileForWrite, error) {
	f, direct, err := l.fs.OpenDirect(s.path, true)
	if err != nil {
		return fileForWrite{}, l.noSpaceOrFail(fmt.Errorf("cannot create segment %s: %w", s.path, err))
	}
	allocated, err := l.preallocate(f, 0, l.allocTarget(0))
	if err != nil {
		f.Close()
		if rerr := removeIfExists(l.fs, s.path); rerr != nil {
			err = fmt.Errorf("%w; and cannot remove it: %w", err, rerr)
		}
		return fileForWrite{}, l.noSpaceOrFail(fmt.Errorf("cannot preallocate segment %s: %w", s.path, err))
	}
	return fileForWrite{f: f, direct: direct, allocated: allocated}, nil
}

// allocStep is how far ahead of the data a segment file is preallocated: a size change
// (journaled by fdatasync) every 64 MiB written costs nothing measurable, while a whole
// segment per partition (1 GiB by default) would reserve a terabyte of disk on a broker
// with a thousand quiet partitions.
const allocStep = 64 << 20

// allocTarget returns how far to preallocate a segment file whose writes reach end: one
// allocStep past it, rounded to the step, and not past SegmentBytes unless end is (a
// batch larger than a segment).
func (l *Log) allocTarget(end int64) int64 {
	return max(end, min((end+allocStep)&^(allocStep-1), l.opts.SegmentBytes))
}

// preallocate reserves f's space [from, to), where the filesystem can, and returns how
// far the file is then known to be allocated: to, or MaxInt64 where the filesystem
// cannot preallocate (it journals size changes; the data is as safe). On an error
// nothing past from is known to be allocated.
func (l *Log) preallocate(f vfs.File, from, to int64) (int64, error) {
	if from >= to {
		return from, nil
	}
	err := f.Allocate(from, to-from)
	switch {
	case errors.Is(err, errors.ErrUnsupported):
		return math.MaxInt64, nil
	case err != nil:
		return from, err
	}
	return to, nil
}

// useWriter makes f, whose data ends at s.size (tail holding the bytes of the partial
// block there), the file the persister writes.
func (l *Log) useWriter(s *segment, f vfs.File, direct bool, tail []byte, allocated int64) {
	w := &l.w
	w.bw.reset(f, s.size, tail)
	w.allocated = allocated
	w.seg, w.next, w.synced, w.dirty, w.finished = s, s.next, s.size, false, false
	l.direct.Store(direct)
	if !direct && !w.reported {
		w.reported = true
		l.opts.Logger.Warn("the filesystem refuses O_DIRECT: segment files are written through the page cache",
			"dir", l.dir, "segment", s.path)
	}
}

// writeSegment writes j's bytes from where the file is written to where it is placed,
// and shows them to readers. With SyncNever, written is durable.
func (l *Log) writeSegment(src persist.Source, j persistJob) error {
	w := &l.w
	from, to := w.bw.written, j.placed
	if end := (to + Block - 1) &^ (Block - 1); end > w.allocated {
		allocated, err := l.preallocate(w.bw.f, w.allocated, l.allocTarget(end))
		if err != nil {
			return l.noSpaceOrFail(fmt.Errorf("cannot preallocate segment %s to %d bytes: %w", j.seg.path, end, err))
		}
		w.allocated = allocated
	}
	pieces, release, err := src.Bytes(j.seg.base, from, to, w.pieces[:0])
	if err != nil {
		return fmt.Errorf("cannot persist bytes [%d, %d) of segment %s: %w", from, to, j.seg.path, err)
	}
	defer func() {
		clear(pieces) // keep no reference to the source's memory
		w.pieces = pieces[:0]
		if release != nil {
			release()
		}
	}()
	n := int64(0)
	for _, p := range pieces {
		n += int64(len(p))
	}
	if n != to-from {
		return fmt.Errorf("cannot persist bytes [%d, %d) of segment %s: the source gave %d bytes", from, to, j.seg.path, n)
	}
	w.dirty = true
	if err := w.bw.write(pieces, to); err != nil {
		return l.fail(fmt.Errorf("cannot write segment %s at [%d, %d): %w", j.seg.path, from, to, err))
	}
	w.next = j.next
	l.mu.Lock()
	j.seg.size, j.seg.next = to, j.next
	l.total.Add(to - from)
	l.written.Store(j.next)
	l.mu.Unlock()
	if l.opts.Sync == SyncNever {
		l.madeDurable()
	}
	return nil
}

// madeDurable counts what the writer has written as durable and moves the checkpoint to
// its end.
func (l *Log) madeDurable() {
	w := &l.w
	l.durableBytes.Add(w.bw.written - w.synced)
	w.synced = w.bw.written
	l.advanceDurable(w.next - 1)
}

// datasyncWriter fdatasyncs the file being written if it has bytes no fdatasync covers,
// and moves the checkpoint over them.
func (l *Log) datasyncWriter() error {
	w := &l.w
	if w.bw.f == nil || !w.dirty {
		return nil
	}
	if err := w.bw.f.Datasync(); err != nil {
		return l.fail(fmt.Errorf("cannot fdatasync %s: %w", w.seg.path, err))
	}
	w.dirty = false
	l.madeDurable()
	return nil
}

// finishSegment seals j's segment, which the log has moved past and which is wholly
// written: the file is cut to its length (dropping the preallocated space and the last
// block's padding) and fdatasync'd (the size change with it), under every policy, then
// its index files are written (synced unless SyncNever) and it is sealed; the write
// descriptor is closed.
func (l *Log) finishSegment(j persistJob) error {
	w, s := &l.w, j.seg
	if !w.finished {
		if err := w.bw.f.Truncate(j.placed); err != nil {
			return l.fail(fmt.Errorf("cannot cut segment %s to its length %d: %w", s.path, j.placed, err))
		}
		// Under every policy, SyncNever too, and through the write descriptor, which
		// needs no open that could fail: the next segment's file is created only
		// after this, so a sealed segment no fsync covered is never followed by
		// another (recovery would call bad data in it damage). Kafka flushes a
		// segment when it rolls for the same reason. One fdatasync per segment, of data
		// O_DIRECT has put on the device already; where the filesystem refuses
		// O_DIRECT it writes back what the kernel has not yet (the persister waits:
		// the arena holds what comes meanwhile).
		w.dirty = true
		if err := l.datasyncWriter(); err != nil {
			return err
		}
		w.finished = true
	}
	l.mu.Lock()
	s.idx.seal() // appends to the time index: under mu, like every index change
	idx := s.idx
	l.mu.Unlock()
	if err := s.writeIndexFiles(l, idx); err != nil {
		return l.noSpaceOrFail(fmt.Errorf("cannot seal segment %s: %w", s.path, err))
	}
	if l.opts.Strict {
		if err := l.verifySealed(s); err != nil {
			return l.fail(err)
		}
	}
	w.close()
	l.mu.Lock()
	s.sealed = true
	s.sealedAt = l.opts.Clock().UnixMilli()
	s.needSync = false // the fdatasync above covers the whole file
	l.mu.Unlock()
	return nil
}

// verifySealed re-reads a sealed segment and checks it against its in-memory index.
// Persister only (nothing else changes the segment's fields meanwhile).
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

// recordSealed records, under SyncNever, a segment just sealed (and fdatasync'd:
// finishSegment) as covered by the recovery point, after an fsync of the directory and
// of any other segment no fsync covered yet: so that after a crash recovery scans the
// active segment only, not everything written since the last clean stop (a 1 TiB
// partition, minutes). A failure to write the record is logged and leaves the old one,
// which stays true; the segment is durable anyway. persistMu held.
func (l *Log) recordSealed(s *segment) error {
	if l.opts.Sync != SyncNever {
		return nil // the sync policies fsynced it in finishSegment; recordCheckpoint records
	}
	l.mu.Lock()
	r := s.next - 1
	l.mu.Unlock()
	return l.advanceRecord(r, l.opts.Clock(), "over a sealed segment")
}

// recordCheckpoint rewrites the recovery point to the checkpoint, at most every
// RecoveryPointInterval and only under a sync policy (under SyncNever a sealed segment
// moves it, recordSealed, and Close, after the fsyncs they need). persistMu held.
func (l *Log) recordCheckpoint() error {
	if l.opts.Sync == SyncNever {
		return nil
	}
	now := l.opts.Clock()
	if now.Sub(l.rp.written) < l.opts.RecoveryPointInterval {
		return nil
	}
	return l.advanceRecord(l.durable.Load(), now, "to the checkpoint")
}

// advanceRecord moves the recovery point up to r, durable already (saveRecoveryPoint),
// unless the record is at or above it or r is below the log's start. A failure to write
// it is logged and leaves the old record, which stays true; only ErrFailed is returned.
// persistMu held.
func (l *Log) advanceRecord(r int64, now time.Time, what string) error {
	if l.rp.valid && r <= l.rp.offset || r < l.start.Load() {
		return nil
	}
	l.rp.written = now
	if err := l.saveRecoveryPoint(r, false); err != nil {
		if errors.Is(err, ErrFailed) {
			return err
		}
		l.opts.Logger.Warn("cannot advance the recovery point "+what, "dir", l.dir, "to", r, "err", err)
	}
	return nil
}

// saveRecoveryPoint records r as the recovery point, after making durable whatever below
// it no fsync has covered yet (sealed segments of SyncNever, segments recovery scanned,
// the directory). r must be durable in the segment being written already. persistMu
// held.
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

// syncSegments fsyncs the segments marked needSync, through their read descriptors, and
// the directory when a segment was created without a sync of it. A failed fsync fails
// the log, as in Persist. persistMu held (nobody else clears the marks meanwhile).
func (l *Log) syncSegments() error {
	l.mu.Lock()
	var marks []*segment
	for _, s := range l.mu.segs {
		if s.needSync {
			marks = append(marks, s)
		}
	}
	dir := l.mu.dirUnsynced
	l.mu.Unlock()
	for _, s := range marks {
		h, err := s.use()
		if errors.Is(err, errSegmentGone) {
			continue // deleted by retention meanwhile: nothing left to make durable
		}
		if err != nil {
			return err
		}
		err = h.f.Sync()
		h.release()
		if err != nil {
			return l.fail(fmt.Errorf("cannot fsync %s: %w", s.path, err))
		}
	}
	if dir > 0 {
		if err := l.fs.SyncDir(l.dir); err != nil {
			return l.fail(fmt.Errorf("cannot sync directory %s: %w", l.dir, err))
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range marks {
		s.needSync = false // sealed or recovered: nothing is added to them but through w
	}
	l.mu.dirUnsynced -= dir
	return nil
}
