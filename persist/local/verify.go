package local

import (
	"errors"
	"fmt"
	"sync/atomic"

	"sluice/batch"
)

// Checking what is served. ReadRegion locates a region through the sparse index and
// reads only the headers it must (the first batch's, and those after the last index
// entry within the budget), so the headers in between are not read on the way. For the
// active segment and every segment this process wrote, scanned or rebuilt, that is
// sound: each header was checked when it was written or scanned. A sealed segment loaded
// from disk is trusted by Open without a read, so its headers are checked the first
// time a region covers them: per index interval (the batches between two index entries,
// about IndexInterval bytes), one header read per batch, once per open (sealed segments
// are immutable). A bitmap of checked intervals, set without a lock, makes every later
// read of the interval free.
//
// A check follows the walk rules of walk.go and also requires each interval to end
// exactly at the next index entry (position and offset), the last one at the segment's
// end with the offset the next segment starts at. A region that reaches bad data is cut
// before it; a read that starts at bad data gets the *CorruptionError.

// bitmap marks the index intervals of a segment, as its index stood when loaded, whose
// headers have been checked. Any goroutine may test and set bits without a lock. Entries
// added later (a truncated segment that became active again) are batches this process
// wrote: has reports them checked.
type bitmap struct {
	n     int
	words []atomic.Uint64
}

func newBitmap(n int) *bitmap { return &bitmap{n: n, words: make([]atomic.Uint64, (n+63)/64)} }

func (b *bitmap) has(i int) bool { return i >= b.n || b.words[i/64].Load()&(1<<(i%64)) != 0 }

func (b *bitmap) set(i int) {
	if i < b.n {
		b.words[i/64].Or(1 << (i % 64))
	}
}

// prefix returns a new bitmap of the first n intervals with b's marks: those of a
// segment truncated to them (an interval cut short keeps its mark, since what is left of
// it was checked).
func (b *bitmap) prefix(n int) *bitmap {
	p := newBitmap(min(n, b.n))
	for i := range p.n {
		if b.has(i) {
			p.set(i)
		}
	}
	return p
}

// segView is what a reader copies of a segment under Log.mu.
type segView struct {
	seg      *segment
	size     int64 // bytes of whole batches
	next     int64 // the offset after the last batch
	offs     []offsetEntry
	verified *bitmap
}

// viewLocked returns s's fields as of now: its written batches, ending at its bad data
// if it has some. Index entries of batches placed and not written are left out.
// Requires Log.mu and a loaded index.
func (s *segment) viewLocked() segView {
	v := segView{seg: s, size: s.size, next: s.next, offs: s.idx.offs, verified: s.verified}
	if s.bad != nil {
		v.size, v.next = s.bad.Pos, s.bad.Offset
	}
	if n := len(v.offs); n > 0 && v.offs[n-1].pos >= v.size {
		v.offs = v.offs[:firstPosAtLeast(v.offs, v.size)]
	}
	return v
}

// firstPosAtLeast returns the index of the first entry whose position is at least pos.
func firstPosAtLeast(offs []offsetEntry, pos int64) int {
	lo, hi := 0, len(offs)
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if offs[mid].pos < pos {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo
}

// checkRegion checks the unchecked intervals that the region [pos, end) of v overlaps,
// and returns the end to serve and the offset there: end and endOff unchanged, or the
// bad batch's position and offset when it lies inside the region. An error means the
// region cannot be served at all: bad data at pos, or an I/O error.
func checkRegion(h *handle, hb *[batch.HeaderSize]byte, v *segView, pos, end, endOff int64) (int64, int64, error) {
	if v.verified == nil {
		return end, endOff, nil
	}
	for k := floorPos(v.offs, pos); k < len(v.offs) && v.offs[k].pos < end; k++ {
		if v.verified.has(k) {
			continue
		}
		err := checkInterval(h, hb, v, k)
		if err == nil {
			v.verified.set(k)
			continue
		}
		var ce *CorruptionError
		if !errors.As(err, &ce) || ce.Pos <= pos {
			return 0, 0, err
		}
		if ce.Pos <= end { // at end too: the region ends there, but its batches end at ce.Offset
			end, endOff = ce.Pos, ce.Offset
		}
		break
	}
	return end, endOff, nil
}

// checkInterval walks the headers of index interval k of v.
func checkInterval(h *handle, hb *[batch.HeaderSize]byte, v *segView, k int) error {
	base := v.seg.base
	stopPos, stopOff := v.size, v.next
	if k+1 < len(v.offs) {
		stopPos, stopOff = v.offs[k+1].pos, base+int64(v.offs[k+1].rel)
	}
	var w walker
	w.start(h, hb, v.offs[k].pos, base+int64(v.offs[k].rel), v.size, v.next)
	for w.pos < stopPos {
		if _, err := w.step(); err != nil {
			return err
		}
	}
	if k+1 == len(v.offs) {
		_, err := w.step() // at the segment's end: checks the offset it ends at
		return err
	}
	switch {
	case w.pos != stopPos: // a batch runs across the entry: its length, or the index, is wrong
		return &CorruptionError{File: v.seg.path, Pos: w.curPos, Offset: w.cur.BaseOffset,
			Reason: fmt.Sprintf("batch %d..%d at %d runs across the index entry at %d", w.cur.BaseOffset, w.cur.LastOffset(), w.curPos, stopPos)}
	case w.next != stopOff:
		return w.blame(&CorruptionError{File: v.seg.path, Pos: stopPos, Offset: w.next,
			Reason: fmt.Sprintf("the batch at %d has offset %d by the data, %d by the index", stopPos, w.next, stopOff)})
	}
	return nil
}

// floorPos returns the index of the last entry whose position is at most pos (0 if none).
func floorPos(offs []offsetEntry, pos int64) int {
	lo, hi := 0, len(offs) // first entry with position > pos
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if offs[mid].pos <= pos {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return max(lo-1, 0)
}
