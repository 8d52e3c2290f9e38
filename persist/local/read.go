package local

import (
	"fmt"

	"sluice/batch"
	"sluice/persist"
)

// Region is the storage seam's region (package persist): whole batches of one segment
// file, holding a reference to the segment so that its file stays open until Release.
type Region = persist.Region

// ReadRegion returns the whole batches starting with the one that holds offset, up to
// maxBytes in all but always at least one batch, all from one segment. An offset equal
// to Next returns an empty region; one outside [Start, Next] returns an
// *OffsetOutOfRangeError. The caller must Release the region.
//
// Cost: a binary search of the segment list and the sparse index under the lock, then
// positional reads of batch headers, at most about IndexInterval bytes' worth, without it.
func (l *Log) ReadRegion(offset, maxBytes int64) (Region, error) {
	l.mu.Lock()
	if l.mu.closed {
		l.mu.Unlock()
		return Region{}, ErrClosed
	}
	start, next := l.start.Load(), l.next.Load()
	if offset < start || offset > next {
		l.mu.Unlock()
		return Region{}, &OffsetOutOfRangeError{Offset: offset, Start: start, End: next}
	}
	if offset == next {
		l.mu.Unlock()
		return persist.EmptyRegion(offset), nil
	}
	seg := l.mu.segs[l.segmentForLocked(offset)]
	if err := seg.loadIndexLocked(l); err != nil {
		l.mu.Unlock()
		return Region{}, err
	}
	seg.acquire()
	size, segNext, offs := seg.size, seg.next, seg.idx.offs
	l.mu.Unlock()

	r, err := l.regionIn(seg, size, segNext, offs, offset, maxBytes)
	if err != nil {
		seg.release()
		return Region{}, err
	}
	return r, nil
}

// regionIn builds the region of a segment snapshot (size, next and index as of the lock).
func (l *Log) regionIn(seg *segment, size, segNext int64, offs []offsetEntry, offset, maxBytes int64) (Region, error) {
	hb := l.hdrs.Get().(*[batch.HeaderSize]byte)
	defer l.hdrs.Put(hb)
	pos, rel := floor(offs, uint32(offset-seg.base))
	h, pos, err := seekBatch(seg, hb, pos, seg.base+int64(rel), size, func(h batch.Header) bool {
		return offset <= h.LastOffset()
	})
	if err != nil {
		return Region{}, err
	}
	end, endOff := pos+int64(h.Size()), h.LastOffset()+1
	limit := pos + max(maxBytes, 0)
	switch {
	case size <= limit:
		end, endOff = size, segNext
	default:
		// Index entries mark batch starts, so the last one within the budget ends a run of
		// whole batches without reading their headers.
		if e, ok := lastStartWithin(offs, end, limit); ok {
			end, endOff = e.pos, seg.base+int64(e.rel)
		}
		// Fill the rest of the budget header by header: less than an index interval.
		for end < size {
			nh, err := readHeader(seg, hb, end, endOff)
			if err != nil {
				return Region{}, err
			}
			if end+int64(nh.Size()) > limit {
				break
			}
			end, endOff = end+int64(nh.Size()), nh.LastOffset()+1
		}
	}
	return persist.NewRegion(seg.file, pos, end-pos, h.BaseOffset, endOff, seg), nil
}

// seekBatch reads batch headers from pos (a batch start whose base offset is base) until
// stop accepts one, and returns it with its position; not finding one before size is
// corruption, since callers seek offsets or timestamps the segment is known to hold.
func seekBatch(seg *segment, hb *[batch.HeaderSize]byte, pos, base, size int64, stop func(batch.Header) bool) (batch.Header, int64, error) {
	h, pos, found, err := walkHeaders(seg, hb, pos, base, size, stop)
	if err == nil && !found {
		err = &CorruptionError{File: seg.path, Pos: pos, Offset: -1, Reason: "the segment ends before the batch sought"}
	}
	return h, pos, err
}

// walkHeaders reads batch headers from pos (a batch start whose base offset is base) up to
// size, until stop accepts one. Every header is checked, including that its base offset
// continues the previous batch. found is false when stop accepted none.
func walkHeaders(seg *segment, hb *[batch.HeaderSize]byte, pos, base, size int64, stop func(batch.Header) bool) (h batch.Header, at int64, found bool, err error) {
	for pos < size {
		if h, err = readHeader(seg, hb, pos, base); err != nil {
			return h, pos, false, err
		}
		if stop(h) { // by value: a pointer would move h to the heap on every lookup
			return h, pos, true, nil
		}
		pos, base = pos+int64(h.Size()), h.LastOffset()+1
	}
	return batch.Header{}, pos, false, nil
}

// readHeader reads and checks the batch header at pos, which must have base offset base.
func readHeader(seg *segment, hb *[batch.HeaderSize]byte, pos, base int64) (batch.Header, error) {
	if _, err := seg.file.ReadAt(hb[:], pos); err != nil {
		return batch.Header{}, fmt.Errorf("cannot read batch header in %s at %d: %w", seg.path, pos, err)
	}
	h, err := batch.ParseHeader(hb[:])
	if err != nil {
		return h, &CorruptionError{File: seg.path, Pos: pos, Offset: base, Reason: err.Error()}
	}
	if h.BaseOffset != base {
		return h, &CorruptionError{File: seg.path, Pos: pos, Offset: base,
			Reason: fmt.Sprintf("batch base offset %d, want %d", h.BaseOffset, base)}
	}
	return h, nil
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
// least ts (Unix milliseconds), or Next() when there is none. Segments are searched by
// their max timestamps, which assumes timestamps roughly follow offsets (producers stamp
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
		if segs[mid].size == 0 || segs[mid].idx.maxTs < ts {
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
	seg.acquire()
	defer seg.release()
	size, offs := seg.size, seg.idx.offs
	from := timeFloor(seg.idx.times, ts)
	l.mu.Unlock()

	hb := l.hdrs.Get().(*[batch.HeaderSize]byte)
	defer l.hdrs.Put(hb)
	pos, rel := floor(offs, uint32(from-seg.base))
	h, _, err := seekBatch(seg, hb, pos, seg.base+int64(rel), size, func(h batch.Header) bool {
		return h.MaxTimestamp >= ts
	})
	if err != nil {
		return 0, err
	}
	return h.BaseOffset, nil
}

// WalkHeaders calls fn with the header of every batch from the one holding offset to the
// end of the log, in order, reading headers only (for example to rebuild producer state
// when a partition loads). It stops early when fn returns false.
func (l *Log) WalkHeaders(offset int64, fn func(h batch.Header) bool) error {
	hb := l.hdrs.Get().(*[batch.HeaderSize]byte)
	defer l.hdrs.Put(hb)
	for {
		r, err := l.ReadRegion(offset, 1) // the batch holding offset, located through the index
		if err != nil || r.Empty() {
			return err
		}
		seg := r.Ref().(*segment) // this package's regions hold their segment
		l.mu.Lock()
		size := seg.size
		l.mu.Unlock()
		stopped := false
		_, end, _, err := walkHeaders(seg, hb, r.Pos, r.Offset, size, func(h batch.Header) bool {
			offset = h.LastOffset() + 1
			stopped = !fn(h)
			return stopped
		})
		r.Release()
		if err != nil || stopped || end < size {
			return err
		}
	}
}
