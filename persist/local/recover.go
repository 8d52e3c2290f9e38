package local

import (
	"errors"
	"fmt"
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
	first := len(bases) - 1 // without a recovery point: the last segment only
	if l.rp.valid {
		first = max(0, segmentIndex(bases, l.rp.offset+1))
	}
	l.start.Store(bases[0])
	for i := first; i < len(bases); i++ {
		seg := l.mu.segs[i]
		brk, err := l.scanLocked(seg)
		if err != nil {
			return err // an I/O error says nothing about the data: never truncate on one
		}
		if brk == nil && i+1 < len(bases) && seg.next != bases[i+1] {
			brk = &CorruptionError{File: seg.path, Pos: seg.size, Offset: seg.next,
				Reason: fmt.Sprintf("segment ends at offset %d but the next segment starts at %d", seg.next, bases[i+1])}
		}
		if brk == nil {
			if i+1 < len(bases) { // stays sealed: its descriptor joins the pool now, not after
				seg.idx.seal() // the whole scan (which could open every segment at once)
				seg.seal()
			}
			continue
		}
		// Only the last segment can have a torn tail: a roll makes the sealed segment
		// whole (fsynced, under a sync policy) before the next one starts, so bad data
		// in a segment that has a successor is damage whatever the recovery point says.
		// (The recovery point is written at most every RecoveryPointInterval, so it may
		// lag well behind acknowledged data.)
		if (l.rp.valid && brk.Offset <= l.rp.offset) || i+1 < len(bases) {
			l.damageLocked(i, brk)
			return nil
		}
		return l.cutTornTailLocked(i, brk)
	}
	if last := l.activeLocked(); l.rp.valid && last.next-1 < l.rp.offset {
		l.damageLocked(len(l.mu.segs)-1, &CorruptionError{File: last.path, Pos: last.size, Offset: last.next,
			Reason: fmt.Sprintf("the log ends at offset %d, below its recovery point %d", last.next-1, l.rp.offset)})
		return nil
	}
	return l.finishLocked()
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

// scanLocked opens seg read-write, scans it from the start, and sets its size, next and
// index from what is whole and valid. It returns the corruption that stopped the scan,
// if any; the error is for I/O.
func (l *Log) scanLocked(seg *segment) (*CorruptionError, error) {
	f, err := l.fs.OpenReadWrite(seg.path)
	if err != nil {
		return nil, fmt.Errorf("cannot open segment %s: %w", seg.path, err)
	}
	size, err := f.Size()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("cannot stat segment %s: %w", seg.path, err)
	}
	seg.install(f)
	idx := newIndex()
	sc := newScanner(f, seg.path, size, seg.base)
	for sc.Next() {
		idx.add(seg.base, sc.h.BaseOffset, sc.h.MaxTimestamp, sc.pos, int64(len(sc.batch)), l.opts.IndexInterval)
	}
	var corrupt *CorruptionError
	if err := sc.Err(); err != nil && !errors.As(err, &corrupt) {
		return nil, err
	}
	if corrupt == nil && sc.pos < size { // cannot happen: the scan stops only at the end or on an error
		panic(fmt.Sprintf("BUG: scan of %s stopped at %d of %d without an error", seg.path, sc.pos, size))
	}
	seg.size, seg.next, seg.idx, seg.created = sc.pos, sc.next, idx, l.opts.Clock()
	seg.sized, seg.verified, seg.needSync = true, nil, true
	l.mu.total += seg.size
	return corrupt, nil
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
	l.mu.total -= seg.size - brk.Pos
	seg.size, seg.next = brk.Pos, brk.Offset
	seg.idx.seal()
	seg.sealed = true // nothing is appended to a damaged log
	last := l.activeLocked()
	l.next.Store(last.next)
	l.durable.Store(last.next - 1)
	l.opts.Logger.Error("partition log damaged: acknowledged data is corrupt; serving the offsets below it, refusing writes until `sluice segment repair`",
		"dir", l.dir, "offset", brk.Offset, "recovery_point", l.rp.offset, "err", brk)
}

// cutTornTailLocked truncates segment i, the last one, at brk (above the recovery point,
// or with none). (It still deletes any later segment, newest first, so that a crash
// leaves a prefix, but the recovery rule only cuts the last.)
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
	if err := seg.writer().Truncate(brk.Pos); err != nil {
		return fmt.Errorf("cannot truncate segment %s at %d: %w", seg.path, brk.Pos, err)
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
	return l.finishLocked()
}

// finishLocked sets the log's bounds from the recovered segments and removes the active
// segment's index files: its index lives in memory, and stale files are rewritten when
// it seals.
func (l *Log) finishLocked() error {
	last := l.activeLocked()
	l.next.Store(last.next)
	l.durable.Store(last.next - 1)
	for _, suffix := range []string{indexSuffix, timeIndexSuffix} {
		if err := removeIfExists(l.fs, segmentName(l.dir, last.base, suffix)); err != nil {
			return err
		}
	}
	return nil
}

// afterRecovery makes the recovered log durable and records it, with an fsync policy:
// the active segment is fsynced (recovery may have cut it), then the recovery point
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
		active.seal() // read-only from now on: its descriptor may be pooled
		return nil
	}
	if l.opts.Sync == SyncNever {
		return nil // recorded by Close, after the fsyncs it does
	}
	if err := active.writer().Sync(); err != nil {
		return fmt.Errorf("cannot fsync recovered segment %s: %w", active.path, err)
	}
	active.needSync = false
	if r := active.next - 1; !l.rp.valid || r > l.rp.offset {
		l.syncMu.Lock()
		defer l.syncMu.Unlock()
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
