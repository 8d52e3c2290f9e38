package local

import (
	"fmt"

	"sluice/batch"
	"sluice/persist/vfs"
)

// sealedAtLocked returns when s was sealed (Unix ms, the log's clock): set by the seal in
// this process, else read once from the segment file's last write (a segment found
// sealed at open); when the file cannot be stat'ed, now (it is kept). Requires l.mu.
func (l *Log) sealedAtLocked(s *segment) int64 {
	if s.sealedAt == 0 {
		if mt, err := s.fs.ModTime(s.path); err == nil {
			s.sealedAt = mt.UnixMilli()
		} else {
			return l.opts.Clock().UnixMilli()
		}
	}
	return s.sealedAt
}

// ApplyRetention deletes the oldest whole segments that the retention settings let go:
// while the log would still hold at least RetentionBytes without the oldest segment, or
// while the oldest segment's newest timestamp is older than RetentionAge and it was also
// sealed longer ago than that (sealedAt). The timestamps are the producers': judged by
// them alone, a producer whose clock runs behind (or jumped back) would have records it
// just wrote deleted at once; the seal time, by the log's own clock, keeps every segment
// at least RetentionAge after it was sealed. (A producer whose clock runs ahead makes its
// segments stay longer; RetentionBytes still bounds them.) It never deletes
// the active segment or one the persister has not sealed yet, nor a segment holding an
// offset above limit (the caller passes the durable checkpoint, or in distributed mode
// what the DFS has acknowledged). It returns the number of segments deleted. Readers
// holding regions of a deleted segment keep reading it until they release them. Owner
// only; it may run while Persist does.
func (l *Log) ApplyRetention(limit int64) (int, error) {
	cutoff := l.opts.Clock().UnixMilli() - l.opts.RetentionAge.Milliseconds()
	l.mu.Lock()
	if err := l.writableLocked(); err != nil {
		if !l.mu.closed {
			// A damaged or failed log deletes nothing, but still holds its files and is
			// still read: its segments are sized all the same, for DiskBytes (a stat's
			// error is left to the next pass; the log's own error is the one returned).
			l.totalLocked()
		}
		l.mu.Unlock()
		return 0, err
	}
	// Sized first, with or without retention settings: this pass, every
	// RetentionCheck on the owner, is what sizes the segments Open left unsized, so
	// that DiskBytes counts them (a stat each, once).
	total, err := l.totalLocked()
	if err != nil {
		l.mu.Unlock()
		return 0, err
	}
	if l.opts.RetentionBytes == 0 && l.opts.RetentionAge == 0 {
		l.mu.Unlock()
		return 0, nil
	}
	n := 0
	for ; n < len(l.mu.segs)-1; n++ {
		s := l.mu.segs[n]
		if !s.sealed || s.next-1 > limit {
			break
		}
		expired := l.opts.RetentionBytes > 0 && total-s.size >= l.opts.RetentionBytes
		if !expired && l.opts.RetentionAge > 0 {
			if err := s.loadIndexLocked(l); err != nil {
				l.mu.Unlock()
				return 0, err
			}
			expired = s.idx.maxTs < cutoff && l.sealedAtLocked(s) < cutoff
		}
		if !expired {
			break
		}
		total -= s.size
	}
	victims := append([]*segment(nil), l.mu.segs[:n]...)
	l.mu.segs = append([]*segment(nil), l.mu.segs[n:]...)
	l.total.Store(total)
	l.start.Store(l.mu.segs[0].base)
	// Files kept by the pass before and still unused are not needed: they go, and this
	// pass's victims take their place (reuse.go).
	stale := l.mu.spares
	l.mu.spares = nil
	keep := l.reuseBudgetLocked()
	l.mu.Unlock()
	l.discardFiles(stale)
	kept, err := l.deleteSegments(victims, keep)
	l.keptForReuse(kept)
	return n, err
}

// deleteSegments removes the files of segments already taken out of the list and drops
// the log's references. The .log goes first: a crash in between leaves only index files,
// which Open removes. Each segment is dropped before its files go: a reader that took
// it from the list before it left (and opens it now, its descriptor closed by the pool)
// must find it dead, which reads as offset out of range, and not a missing file, which
// reads as a storage error (TestReadRacingDelete; TestFilePoolConcurrent found it).
// Descriptors open in readers stay valid after the files are removed. With
// Options.Discard the files are only renamed here (*.deleted, which Open also removes)
// and removed by Discard's goroutine: a retention pass of a partition written at 450
// MB/s deleted 57 segments of 64 MiB at once, and their unlinks (about 20 ms each on
// this ext4, mounted with discard) held the partition's shard, and its consumer, for
// over a second. Up to keep .log files that no reader holds are renamed the same way
// but returned (kept) instead, for new segments to reuse (reuse.go).
func (l *Log) deleteSegments(segs []*segment, keep int) (kept []string, _ error) {
	var firstErr error
	var discard []string
	for _, s := range segs {
		s.drop()
		for _, suffix := range []string{logSuffix, indexSuffix, timeIndexSuffix} {
			name := segmentName(l.dir, s.base, suffix)
			var err error
			// Kept for a new segment (reuse.go), or handed to Discard: renamed either way.
			keepIt := suffix == logSuffix && len(kept) < keep && s.reusable()
			if l.opts.Discard == nil && !keepIt {
				err = removeIfExists(l.fs, name)
			} else {
				var moved bool
				if moved, err = renameIfExists(l.fs, name, name+deletedSuffix); moved && keepIt {
					kept = append(kept, name+deletedSuffix)
				} else if moved {
					discard = append(discard, name+deletedSuffix)
				} else if err != nil {
					// A rename can fail where an unlink does not (a full disk: the longer
					// name may need a directory block; btrfs lets only unlinks use its
					// reserve), and retention is what frees a full disk: the file is
					// removed here, as without Discard, not left under its live name by
					// a segment that already left the log (a reopen would bring it back).
					err = removeIfExists(l.fs, name)
				}
			}
			if err != nil && firstErr == nil {
				firstErr = err
			}
		}
		l.opts.Logger.Info("deleted segment", "segment", s.path, "bytes", s.size)
	}
	if len(discard) > 0 {
		l.opts.Discard(discard)
	}
	return kept, firstErr
}

// Truncate removes every batch with an offset above last, so the next batch placed gets
// last+1. last must be the last offset of a batch (or Start()-1 to empty the log), and
// nothing may be pending (everything placed is durable: otherwise ErrPending). The
// durable checkpoint drops to last if it was above, and so does the recovery point,
// before any data is cut (a crash in between leaves data above the recovery point,
// which recovery treats as a tail; the other order would leave the record above the
// data, which recovery would take for lost acknowledged data). The cut segment becomes
// the active one, written from its new end (its file is not preallocated again). For
// recovery: for example to cut the log back to what a distributed store acknowledged.
// Owner only; it waits for a Persist in progress.
func (l *Log) Truncate(last int64) error {
	l.persistMu.Lock()
	defer l.persistMu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.writableLocked(); err != nil {
		return err
	}
	if n := l.Pending(); n != 0 {
		return fmt.Errorf("cannot truncate %s after offset %d: %w (%d bytes)", l.dir, last, ErrPending, n)
	}
	target := last + 1
	if target >= l.next.Load() {
		return nil
	}
	if start := l.start.Load(); target < start {
		return &OffsetOutOfRangeError{Offset: last, Start: start - 1, End: l.next.Load()}
	}
	i := l.segmentForLocked(target)
	old := l.mu.segs[i]
	if err := old.loadIndexLocked(l); err != nil {
		return err
	}
	pos, err := l.boundaryLocked(old, target)
	if err != nil {
		return err
	}
	if l.rp.valid && l.rp.offset > last {
		if err := writeRecoveryPoint(l.fs, l.dir, RecoveryPoint{Offset: last}); err != nil {
			return l.rpErrorLocked(err)
		}
		l.rp.offset, l.rp.clean = last, false
	}
	seg, f, direct, err := l.truncatedCopyLocked(old, pos, target)
	if err != nil {
		return err
	}
	l.w.close() // the segment it wrote is cut, or deleted: seg's descriptor replaces it
	dropped := l.mu.segs[i+1:]
	l.mu.segs = append(l.mu.segs[:i:i], seg)
	if _, err := l.deleteSegments(dropped, 0); err != nil {
		f.Close()
		return l.failLocked(err)
	}
	old.drop()
	if l.opts.Sync != SyncNever {
		if err := f.Sync(); err != nil {
			f.Close()
			return l.failLocked(fmt.Errorf("cannot fsync truncated %s: %w", seg.path, err))
		}
		if err := l.fs.SyncDir(l.dir); err != nil {
			f.Close()
			return l.failLocked(fmt.Errorf("cannot sync directory %s: %w", l.dir, err))
		}
	}
	tail, err := readTail(seg, pos)
	if err != nil {
		f.Close()
		return l.failLocked(err)
	}
	l.useWriter(seg, f, direct, tail, pos) // not preallocated again: a write past pos extends it
	l.next.Store(target)
	l.written.Store(target)
	total := int64(0)
	for _, s := range l.mu.segs {
		if s.sized {
			total += s.size
		}
	}
	l.total.Store(total)
	l.durable.Store(min(l.durable.Load(), last))
	return nil
}

// rpErrorLocked classifies a failed write of the recovery point, which changed nothing
// the log relies on (the old record, or the new one, is true either way): a full disk
// is ErrNoSpace, anything else is returned as it is. The log stays usable.
func (l *Log) rpErrorLocked(err error) error {
	if vfs.IsNoSpace(err) {
		return fmt.Errorf("%w: %w", ErrNoSpace, err)
	}
	return err
}

// boundaryLocked returns the position in s of the batch whose base offset is target, or
// an error wrapping ErrNotBatchBoundary when target falls inside a batch.
func (l *Log) boundaryLocked(s *segment, target int64) (int64, error) {
	switch {
	case target == s.base:
		return 0, nil
	case s.bad != nil && target == s.bad.Offset: // cutting the bad data off
		return s.bad.Pos, nil
	}
	h, err := s.use()
	if err != nil {
		return 0, err
	}
	defer h.release()
	hb := new([batch.HeaderSize]byte)
	start, rel := floor(s.idx.offs, uint32(target-s.base))
	hd, p, err := seekBatch(h, hb, start, s.base+int64(rel), s.size, func(h batch.Header) bool {
		return target <= h.LastOffset()
	})
	if err != nil {
		return 0, err
	}
	if hd.BaseOffset != target {
		return 0, fmt.Errorf("cannot truncate after offset %d: %w (batch %d..%d)",
			target-1, ErrNotBatchBoundary, hd.BaseOffset, hd.LastOffset())
	}
	return p, nil
}

// truncatedCopyLocked cuts old's file at pos, where the batch with base offset target
// starts, and returns a new active segment object for it, with the descriptor the
// persister will write it through, and a trimmed index. old is left to readers that
// still hold it.
func (l *Log) truncatedCopyLocked(old *segment, pos, target int64) (*segment, vfs.File, bool, error) {
	f, direct, err := l.fs.OpenDirect(old.path, false)
	if err != nil {
		return nil, nil, false, fmt.Errorf("cannot open segment %s: %w", old.path, err)
	}
	if err := f.Truncate(pos); err != nil {
		f.Close()
		return nil, nil, false, l.failLocked(fmt.Errorf("cannot truncate segment %s at %d: %w", old.path, pos, err))
	}
	seg := l.newSegment(old.base)
	seg.size, seg.next, seg.created = pos, target, l.opts.Clock()
	seg.sharesFile = true // old's readers may still hold the file (reuse.go)
	seg.placed, seg.placedNext = pos, target
	seg.needSync = l.opts.Sync == SyncNever
	// From here on the file is cut: a failure leaves the log's view of it wrong, so it
	// fails the log (a reopen recovers what the file holds).
	if seg.idx, err = trimIndex(seg, old, l.opts.IndexInterval); err != nil {
		f.Close()
		seg.drop()
		return nil, nil, false, l.failLocked(fmt.Errorf("cannot index truncated segment %s: %w", old.path, err))
	}
	if old.verified != nil { // a sealed segment loaded from disk: what is unchecked stays so
		seg.verified = old.verified.prefix(len(seg.idx.offs))
	}
	for _, suffix := range []string{indexSuffix, timeIndexSuffix} {
		if err := removeIfExists(l.fs, segmentName(l.dir, seg.base, suffix)); err != nil {
			f.Close()
			seg.drop()
			return nil, nil, false, l.failLocked(err)
		}
	}
	return seg, f, direct, nil
}

// trimIndex returns old's index entries that lie below seg's new end, and recomputes the
// maximum timestamp by reading the headers after the last kept time entry (through
// old's read descriptor: the file is the same).
func trimIndex(seg, oldSeg *segment, interval int64) (*index, error) {
	old := oldSeg.idx
	idx := newIndex()
	for _, e := range old.offs {
		if e.pos < seg.size {
			idx.offs = append(idx.offs, e)
		}
	}
	for _, e := range old.times {
		if e.offset < seg.next {
			idx.times = append(idx.times, e)
		}
	}
	if len(idx.times) == 0 {
		return idx, nil
	}
	last := idx.times[len(idx.times)-1]
	idx.maxTs = last.ts
	pos, rel := floor(idx.offs, uint32(last.offset-seg.base))
	h, err := oldSeg.use()
	if err != nil {
		return nil, err
	}
	defer h.release()
	var w walker
	w.start(h, new([batch.HeaderSize]byte), pos, seg.base+int64(rel), seg.size, seg.next)
	for {
		ok, err := w.step()
		if err != nil {
			return nil, err
		}
		if !ok {
			break
		}
		idx.maxTs = max(idx.maxTs, w.cur.MaxTimestamp)
	}
	idx.sinceOff = seg.size - idx.offs[len(idx.offs)-1].pos
	idx.sinceTime = interval // let the next raise of the max timestamp be indexed
	return idx, nil
}
