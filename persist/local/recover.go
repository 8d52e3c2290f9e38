package local

import (
	"errors"
	"fmt"

	"sluice/persist/vfs"
)

// loadSegmentsLocked builds the segment list and recovers it by the rule in Open's
// comment: trusted segments from their names, the rest scanned, the first bad batch
// either cut (above the recovery point) or reported as damage (at or below it).
func (l *Log) loadSegmentsLocked(bases []int64) error {
	for i, base := range bases {
		seg := l.newSegment(base)
		l.mu.segs = append(l.mu.segs, seg)
		if i < len(bases)-1 { // trusted and not touched: sized, opened and indexed when first used
			seg.next, seg.sealed, seg.sized = bases[i+1], true, false
		}
	}
	first := 0 // without a recovery point: every segment (nothing is known durable)
	if l.rp.valid {
		first = max(0, segmentIndex(bases, l.rp.offset+1))
	}
	l.start.Store(bases[0])
	sizes := make([]int64, len(bases)) // of the scanned files, which may end past their data
	for i := first; i < len(bases); i++ {
		seg := l.mu.segs[i]
		brk, size, err := l.scanLocked(seg)
		if err != nil {
			return err // an I/O error says nothing about the data: never truncate on one
		}
		sizes[i] = size
		if brk == nil && i+1 < len(bases) && seg.next != bases[i+1] {
			brk = &CorruptionError{File: seg.path, Pos: seg.size, Offset: seg.next,
				Reason: fmt.Sprintf("segment ends at offset %d but the next segment starts at %d", seg.next, bases[i+1])}
		}
		if brk == nil {
			if i+1 < len(bases) { // stays sealed
				seg.idx.seal()
			}
			continue
		}
		// Only the last segment can have a torn tail: a roll makes the sealed segment
		// whole (fsynced, under every policy) before the next one starts, so bad data
		// in a segment that has a successor is damage whatever the recovery point says.
		// (The recovery point is written at most every RecoveryPointInterval, so it may
		// lag well behind acknowledged data.)
		if (l.rp.valid && brk.Offset <= l.rp.offset) || i+1 < len(bases) {
			l.damageLocked(i, brk)
			return nil
		}
		if err := l.cutTornTailLocked(i, brk); err != nil {
			return err
		}
		return l.finishLocked(sizes)
	}
	if last := l.activeLocked(); l.rp.valid && last.next-1 < l.rp.offset {
		l.damageLocked(len(l.mu.segs)-1, &CorruptionError{File: last.path, Pos: last.size, Offset: last.next,
			Reason: fmt.Sprintf("the log ends at offset %d, below its recovery point %d", last.next-1, l.rp.offset)})
		return nil
	}
	return l.finishLocked(sizes)
}

// segmentIndex returns the index of the last base at most offset, -1 if none.
func segmentIndex(bases []int64, offset int64) int {
	lo, hi := 0, len(bases)
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if bases[mid] <= offset {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo - 1
}

// scanLocked scans seg from the start through its read descriptor, and sets its size,
// next and index from what is whole and valid; the data ends at the first bad batch, at
// zeros where a header should be, or at the end of the file. It returns the corruption
// that stopped the scan, if any, and the file's size; the error is for I/O.
func (l *Log) scanLocked(seg *segment) (*CorruptionError, int64, error) {
	h, err := seg.use()
	if err != nil {
		return nil, 0, err
	}
	defer h.release()
	size, err := h.f.Size()
	if err != nil {
		return nil, 0, fmt.Errorf("cannot stat segment %s: %w", seg.path, err)
	}
	idx := newIndex()
	sc := newScanner(h.f, seg.path, size, seg.base)
	for sc.Next() {
		idx.add(seg.base, sc.h.BaseOffset, sc.h.MaxTimestamp, sc.pos, int64(len(sc.batch)), l.opts.IndexInterval)
	}
	var corrupt *CorruptionError
	if err := sc.Err(); err != nil && !errors.As(err, &corrupt) {
		return nil, 0, err
	}
	if corrupt == nil && !sc.zeros && sc.pos < size { // the scan stops only at the end, at zeros or on an error
		panic(fmt.Sprintf("BUG: scan of %s stopped at %d of %d without an error", seg.path, sc.pos, size))
	}
	seg.size, seg.next, seg.idx, seg.created = sc.pos, sc.next, idx, l.opts.Clock()
	seg.placed, seg.placedNext = seg.size, seg.next
	seg.sized, seg.verified, seg.needSync = true, nil, true
	l.total.Add(seg.size)
	return corrupt, size, nil
}

// damageLocked opens the log damaged at brk, found in segment i: the log ends there, in
// memory only. Nothing on disk changes.
func (l *Log) damageLocked(i int, brk *CorruptionError) {
	l.damage = brk
	l.damaged = fmt.Errorf("%w: %w", ErrDamaged, brk)
	for _, s := range l.mu.segs[i+1:] {
		s.drop() // never opened: this only marks them
	}
	l.mu.segs = l.mu.segs[:i+1]
	seg := l.mu.segs[i]
	l.total.Add(-(seg.size - brk.Pos))
	seg.size, seg.next = brk.Pos, brk.Offset
	seg.idx.seal()
	seg.sealed = true // nothing is appended to a damaged log
	last := l.activeLocked()
	l.next.Store(last.next)
	l.written.Store(last.next)
	l.durable.Store(last.next - 1)
	l.opts.Logger.Error("partition log damaged: acknowledged data is corrupt; serving the offsets below it, refusing writes until `sluice segment repair`",
		"dir", l.dir, "offset", brk.Offset, "recovery_point", l.rp.offset, "err", brk)
}

// cutTornTailLocked cuts the log at brk, a torn tail in segment i, the last one (above
// the recovery point, or with none): the segment's data ends there, and finishLocked
// cuts the file and preallocates it again. (It still deletes any later segment, newest
// first, so that a crash leaves a prefix, but the recovery rule only cuts the last.)
func (l *Log) cutTornTailLocked(i int, brk *CorruptionError) error {
	seg := l.mu.segs[i]
	later := l.mu.segs[i+1:]
	if l.rp.valid {
		l.opts.Logger.Warn("truncating the torn tail above the recovery point", "segment", seg.path,
			"pos", brk.Pos, "offset", brk.Offset, "recovery_point", l.rp.offset, "later_segments", len(later), "reason", brk.Reason)
	} else {
		l.opts.Logger.Warn("truncating the torn tail of the last segment (no recovery point)", "segment", seg.path,
			"pos", brk.Pos, "offset", brk.Offset, "reason", brk.Reason)
	}
	for j := len(later) - 1; j >= 0; j-- {
		s := later[j]
		for _, suffix := range []string{logSuffix, indexSuffix, timeIndexSuffix} {
			if err := removeIfExists(l.fs, segmentName(l.dir, s.base, suffix)); err != nil {
				return err
			}
		}
		s.drop()
	}
	l.mu.segs = l.mu.segs[:i+1]
	seg.sealed, seg.sized = false, true
	return nil
}

// finishLocked ends a recovery that found no damage. It sets the log's bounds from the
// recovered segments; cuts the scanned sealed segments whose files go on past their
// data (zeros: a seal whose cut did not reach the disk) to their length; and makes the
// last segment the active one: its index files are removed (its index lives in memory,
// and stale files are rewritten when it seals), its file is cut at the end of the data
// (a torn tail, the zeros after the data, or whatever a torn write left past them: all of
// it, so that no stale batch can reappear after the next crash) and preallocated again,
// and it is opened for writing with its partial last block read back. sizes holds the
// file sizes of the scanned segments.
func (l *Log) finishLocked(sizes []int64) error {
	last := l.activeLocked()
	l.next.Store(last.next)
	l.written.Store(last.next)
	l.durable.Store(last.next - 1)
	for _, suffix := range []string{indexSuffix, timeIndexSuffix} {
		if err := removeIfExists(l.fs, segmentName(l.dir, last.base, suffix)); err != nil {
			return err
		}
	}
	n := len(l.mu.segs)
	for i, s := range l.mu.segs[:n-1] {
		if sizes[i] > s.size {
			l.opts.Logger.Info("cutting a sealed segment to the end of its data", "segment", s.path, "size", sizes[i], "data", s.size)
			if err := cutFile(l.fs, s.path, s.size); err != nil {
				return err
			}
		}
	}
	f, direct, err := l.fs.OpenDirect(last.path, false)
	if err != nil {
		return fmt.Errorf("cannot open segment %s for writing: %w", last.path, err)
	}
	if sizes[n-1] > last.size {
		if err := f.Truncate(last.size); err != nil {
			f.Close()
			return fmt.Errorf("cannot truncate segment %s at %d: %w", last.path, last.size, err)
		}
	}
	allocated, err := l.preallocate(f, last.size, l.allocTarget(last.size))
	if err != nil {
		if !vfs.IsNoSpace(err) {
			f.Close()
			return fmt.Errorf("cannot preallocate segment %s: %w", last.path, err)
		}
		l.opts.Logger.Warn("cannot preallocate the active segment: the disk is full", "segment", last.path, "err", err)
	}
	tail, err := readTail(last, last.size)
	if err != nil {
		f.Close()
		return err
	}
	l.useWriter(last, f, direct, tail, max(allocated, last.size))
	return nil
}

// readTail returns the bytes of the block holding position size of s's file, up to size
// (the partial block the next write completes), read through s's read descriptor.
func readTail(s *segment, size int64) ([]byte, error) {
	n := size % Block
	if n == 0 {
		return nil, nil
	}
	h, err := s.use()
	if err != nil {
		return nil, err
	}
	defer h.release()
	tail := make([]byte, n)
	if _, err := h.f.ReadAt(tail, size-n); err != nil {
		return nil, fmt.Errorf("cannot read the last block of %s: %w", s.path, err)
	}
	return tail, nil
}

// cutFile truncates the file at path to size.
func cutFile(fs vfs.FS, path string, size int64) error {
	f, err := fs.OpenReadWrite(path)
	if err != nil {
		return fmt.Errorf("cannot open segment %s: %w", path, err)
	}
	err = f.Truncate(size)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("cannot truncate segment %s at %d: %w", path, size, err)
	}
	return nil
}

// afterRecovery makes the recovered log durable and records it, under every policy
// (SyncNever only when it holds data above the record): the active segment is fsynced (recovery may have cut it), then the recovery point
// moves to the recovered end, fsyncing first whatever else it covers that no fsync may
// have (segments scanned above the old point; every segment, without one). A damaged
// log changes nothing. Open only: nobody else has the log yet.
func (l *Log) afterRecovery() error {
	l.mu.Lock()
	active := l.activeLocked()
	if !l.rp.valid {
		for _, s := range l.mu.segs[:len(l.mu.segs)-1] {
			s.needSync = true // trusted without a record: not known durable
		}
	}
	l.mu.Unlock()
	if l.damage != nil {
		return nil // damaged: nothing changes
	}
	// Under SyncNever too, when the recovered end is above the record: one fsync at
	// open, so that a broker that crashes again does not scan the same data again.
	if end := active.next - 1; l.opts.Sync == SyncNever && (end < l.start.Load() || l.rp.valid && end <= l.rp.offset) {
		return nil // nothing above the record was scanned: no fsync to pay at every open
	}
	if err := l.w.bw.f.Sync(); err != nil { // the data scanned, the cut, the preallocation
		return fmt.Errorf("cannot fsync recovered segment %s: %w", active.path, err)
	}
	active.needSync = false
	if r := active.next - 1; !l.rp.valid || r > l.rp.offset {
		l.persistMu.Lock()
		defer l.persistMu.Unlock()
		if err := l.saveRecoveryPoint(r, false); err != nil {
			if errors.Is(err, ErrFailed) {
				return err
			}
			l.opts.Logger.Warn("cannot record the recovered end as the recovery point", "dir", l.dir, "err", err)
		}
		l.rp.written = l.opts.Clock()
	}
	return nil
}
