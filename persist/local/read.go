package local

import (
	"errors"
	"fmt"

	"sluice/batch"
	"sluice/persist"
)

// Region is the storage seam's region (package persist): whole batches of one segment
// file, holding a reference to the segment so that its file stays open until Release.
type Region = persist.Region

// ReadRegion returns the whole written batches starting with the one that holds offset,
// up to maxBytes in all but always at least one batch, all from one segment. An offset
// in [Written, Next] (placed and not written yet: the owner serves it from its write
// buffer) returns an empty region at offset; one outside [Start, Next] returns an
// *OffsetOutOfRangeError. In a damaged log, an offset at or past the damage (which is
// Next) returns the damage, a *CorruptionError. The caller must Release the region.
//
// Every batch header the region covers has been checked (verify.go), so bad data is a
// *CorruptionError and never served: a region that reaches it stops before it.
//
// Cost: a binary search of the segment list and the sparse index under the lock, then
// positional reads of batch headers, at most about IndexInterval bytes' worth, without
// it; plus, the first time a region covers an index interval of a sealed segment loaded
// from disk, one header read per batch of that interval.
func (l *Log) ReadRegion(offset, maxBytes int64) (Region, error) {
	l.mu.Lock()
	if l.mu.closed {
		l.mu.Unlock()
		return Region{}, ErrClosed
	}
	start, next := l.start.Load(), l.next.Load()
	if l.damage != nil && offset >= next {
		l.mu.Unlock()
		return Region{}, l.damage
	}
	if offset < start || offset > next {
		l.mu.Unlock()
		return Region{}, &OffsetOutOfRangeError{Offset: offset, Start: start, End: next}
	}
	if offset >= l.written.Load() {
		l.mu.Unlock()
		return persist.EmptyRegion(offset), nil
	}
	seg := l.mu.segs[l.segmentForLocked(offset)]
	if err := seg.loadIndexLocked(l); err != nil {
		l.mu.Unlock()
		return Region{}, err
	}
	if seg.bad != nil && offset >= seg.bad.Offset {
		l.mu.Unlock()
		return Region{}, seg.bad
	}
	v := seg.viewLocked()
	h := seg.h.Load()
	if h == nil || !h.tryAcquire() {
		h = nil // closed by the pool: reopen it without the lock
	}
	l.mu.Unlock()
	if h == nil {
		var err error
		if h, err = seg.use(); err != nil {
			if errors.Is(err, errSegmentGone) { // deleted by retention meanwhile
				return Region{}, &OffsetOutOfRangeError{Offset: offset, Start: l.start.Load(), End: l.next.Load()}
			}
			return Region{}, err
		}
	}
	r, err := l.regionIn(h, &v, offset, maxBytes)
	if err != nil {
		h.release()
		return Region{}, err
	}
	return r, nil
}

// regionIn builds the region of a segment view (as of the lock) through the handle h.
func (l *Log) regionIn(h *handle, v *segView, offset, maxBytes int64) (Region, error) {
	hb := l.hdrs.Get().(*[batch.HeaderSize]byte)
	defer l.hdrs.Put(hb)
	base, size := v.seg.base, v.size
	pos, rel := floor(v.offs, uint32(offset-base))
	hd, pos, err := seekBatch(h, hb, pos, base+int64(rel), size, func(h batch.Header) bool {
		return offset <= h.LastOffset()
	})
	if err != nil {
		return Region{}, err
	}
	end, endOff := pos+int64(hd.Size()), hd.LastOffset()+1
	limit := pos + max(maxBytes, 0)
	switch {
	case size <= limit:
		end, endOff = size, v.next
	default:
		// Index entries mark batch starts, so the last one within the budget ends a run of
		// whole batches without reading their headers.
		if e, ok := lastStartWithin(v.offs, end, limit); ok {
			end, endOff = e.pos, base+int64(e.rel)
		}
		// Fill the rest of the budget header by header: less than an index interval. Bad
		// data ends the fill; checkRegion below says whether and where to cut.
		for end < size {
			nh, err := readHeader(h, hb, end, endOff, size)
			if err != nil {
				var ce *CorruptionError
				if !errors.As(err, &ce) {
					return Region{}, err
				}
				break
			}
			if end+int64(nh.Size()) > limit {
				break
			}
			end, endOff = end+int64(nh.Size()), nh.LastOffset()+1
		}
	}
	if end, endOff, err = checkRegion(h, hb, v, pos, end, endOff); err != nil {
		return Region{}, err
	}
	return persist.NewRegion(h.f, pos, end-pos, hd.BaseOffset, endOff, h), nil
}

// segmentForLocked returns the index of the segment holding offset (start <= offset < next).
func (l *Log) segmentForLocked(offset int64) int {
	segs := l.mu.segs
	lo, hi := 0, len(segs) // first segment with base > offset
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if segs[mid].base <= offset {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo - 1
}

// Read appends the batches that ReadRegion(offset, maxBytes) locates to dst and returns
// dst and the offset after them. It is the copying twin of ReadRegion, for callers that
// cannot use sendfile.
func (l *Log) Read(dst []byte, offset, maxBytes int64) ([]byte, int64, error) {
	r, err := l.ReadRegion(offset, maxBytes)
	if err != nil {
		return dst, offset, err
	}
	defer r.Release()
	if r.Empty() { // at the end of what is written
		return dst, offset, nil
	}
	n := len(dst)
	dst = grow(dst, int(r.Len))
	if _, err := r.File.ReadAt(dst[n:], r.Pos); err != nil {
		return dst[:n], offset, fmt.Errorf("cannot read %s at %d: %w", r.File.Name(), r.Pos, err)
	}
	return dst, r.NextOffset, nil
}

// grow extends b by n bytes, reallocating only when its capacity is short.
func grow(b []byte, n int) []byte {
	if cap(b)-len(b) < n {
		nb := make([]byte, len(b), 2*cap(b)+n)
		copy(nb, b)
		b = nb
	}
	return b[:len(b)+n]
}

// OffsetForTime returns the base offset of the first batch whose max timestamp is at
// least ts (Unix milliseconds), or Next() when there is none. When that batch is placed
// and not written yet, it returns Written(): the batches below it are all older, and the
// owner searches its write buffer from there. Segments are searched by their max
// timestamps, which assumes timestamps roughly follow offsets (producers stamp
// wall-clock time); with skewed clocks the answer is a batch at or after ts, not
// necessarily the first.
func (l *Log) OffsetForTime(ts int64) (int64, error) {
	l.mu.Lock()
	if l.mu.closed {
		l.mu.Unlock()
		return 0, ErrClosed
	}
	segs := l.mu.segs
	lo, hi := 0, len(segs) // first segment whose max timestamp >= ts
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if err := segs[mid].loadIndexLocked(l); err != nil {
			l.mu.Unlock()
			return 0, err
		}
		if len(segs[mid].idx.times) == 0 || segs[mid].idx.maxTs < ts {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	if lo == len(segs) {
		next := l.next.Load()
		l.mu.Unlock()
		return next, nil
	}
	seg := segs[lo]
	v := seg.viewLocked()
	size, offs := v.size, v.offs
	from := timeFloor(seg.idx.times, ts)
	written := l.written.Load()
	partial := !seg.sealed && v.next < seg.placedNext // batches placed past what is written
	l.mu.Unlock()
	if from >= written { // the batch sought is not written yet
		return written, nil
	}
	h, err := seg.use()
	if errors.Is(err, errSegmentGone) { // deleted by retention meanwhile: the answer is later
		return l.OffsetForTime(ts)
	}
	if err != nil {
		return 0, err
	}
	defer h.release()

	hb := l.hdrs.Get().(*[batch.HeaderSize]byte)
	defer l.hdrs.Put(hb)
	pos, rel := floor(offs, uint32(from-seg.base))
	var w walker
	w.start(h, hb, pos, seg.base+int64(rel), size, -1)
	for {
		ok, err := w.step()
		if err != nil {
			return 0, err
		}
		if !ok && partial { // the written batches are older: the answer is placed, not written
			return v.next, nil
		}
		if !ok {
			return 0, &CorruptionError{File: seg.path, Pos: w.pos, Offset: w.next,
				Reason: "the segment ends before the batch its time index names"}
		}
		if w.cur.MaxTimestamp >= ts {
			return w.cur.BaseOffset, nil
		}
	}
}

// WalkHeaders calls fn with the header of every written batch from the one holding
// offset to the written end of the log, in order, reading headers only (for example to rebuild producer state
// when a partition loads). It stops early when fn returns false.
//
// Bad data ends the walk with a *CorruptionError naming the first bad batch (in a damaged
// log, the walk ends with the damage). fn never sees a header before the one after it
// (or the segment's end) has confirmed where it ends, so a header whose record count is
// corrupt is reported, not delivered. Headers are checked for structure, not CRC: a
// corrupt field that leaves the offsets intact (a producer id, a timestamp) passes.
func (l *Log) WalkHeaders(offset int64, fn func(h batch.Header) bool) error {
	hb := l.hdrs.Get().(*[batch.HeaderSize]byte)
	defer l.hdrs.Put(hb)
	for {
		r, err := l.ReadRegion(offset, 1) // the batch holding offset, located through the index
		if err != nil || r.Empty() {
			return err
		}
		h := r.Ref().(*handle) // this package's regions hold their segment's handle
		l.mu.Lock()
		v, bad := h.seg.viewLocked(), h.seg.bad
		l.mu.Unlock()
		next, stopped, err := walkSegment(h, hb, r.Pos, r.Offset, v.size, v.next, fn)
		r.Release()
		if err != nil || stopped {
			return err
		}
		if bad != nil {
			return bad
		}
		offset = next
	}
}

// walkSegment calls fn for each header from pos to size, one header behind the walk, and
// returns the offset the segment ends at.
func walkSegment(h *handle, hb *[batch.HeaderSize]byte, pos, base, size, end int64, fn func(batch.Header) bool) (int64, bool, error) {
	var w walker
	w.start(h, hb, pos, base, size, end)
	var pending batch.Header
	have := false
	for {
		ok, err := w.step()
		if err != nil {
			return 0, false, err
		}
		if !ok {
			break
		}
		if have && !fn(pending) {
			return 0, true, nil
		}
		pending, have = w.cur, true
	}
	if have && !fn(pending) {
		return 0, true, nil
	}
	return w.next, false, nil
}
