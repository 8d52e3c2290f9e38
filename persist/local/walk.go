package local

import (
	"errors"
	"fmt"

	"sluice/batch"
)

// Header walks: the serving path reads batch headers only (a header read is one small
// pread; a batch may be 64 MiB), so it checks what headers can show: each header parses,
// lies with its batch inside the segment, and continues the offsets of the one before;
// the segment ends at the offset the next one starts at. Every failure is a
// *CorruptionError whose Pos and Offset name a batch start and the offset expected
// there, so that a caller can serve what lies before it and an operator can cut there.

// readHeader reads and checks the batch header at pos of a segment whose whole batches
// end at size. The header must parse, its batch must end within size, and its base
// offset must be base. Bad data is a *CorruptionError at (pos, base).
func readHeader(h *handle, hb *[batch.HeaderSize]byte, pos, base, size int64) (batch.Header, error) {
	path := h.seg.path
	if pos+batch.HeaderSize > size {
		return batch.Header{}, &CorruptionError{File: path, Pos: pos, Offset: base,
			Reason: fmt.Sprintf("batch header cut short by the end of the segment at %d", size)}
	}
	if _, err := h.f.ReadAt(hb[:], pos); err != nil {
		return batch.Header{}, fmt.Errorf("cannot read batch header in %s at %d: %w", path, pos, err)
	}
	hd, err := batch.ParseHeader(hb[:])
	if err != nil {
		return hd, &CorruptionError{File: path, Pos: pos, Offset: base, Reason: err.Error()}
	}
	if hd.BaseOffset != base {
		return hd, &CorruptionError{File: path, Pos: pos, Offset: base,
			Reason: fmt.Sprintf("batch base offset %d, want %d", hd.BaseOffset, base)}
	}
	if end := pos + int64(hd.Size()); end > size {
		return hd, &CorruptionError{File: path, Pos: pos, Offset: base,
			Reason: fmt.Sprintf("batch of %d bytes runs past the end of the segment at %d", hd.Size(), size)}
	}
	return hd, nil
}

// walker reads the headers of consecutive batches of one segment with readHeader.
//
// A header-only walk sees some damage one batch late: a corrupt record count or length
// still parses, and shows only as a next header that does not follow. So when a header
// fails, the walker reads the batch before it whole and, if that one fails its CRC,
// blames it instead: the error names the first bad batch, which is where a repair must
// cut. This costs a batch read on the error path only.
type walker struct {
	h      *handle
	hb     *[batch.HeaderSize]byte
	size   int64 // bytes of whole batches in the segment
	end    int64 // the offset the segment must end at; -1 when not checked
	pos    int64 // position of the next header
	next   int64 // offset the next header must have
	cur    batch.Header
	curPos int64 // position of cur; -1 before the first header
}

// start positions the walker at pos, a batch start whose base offset is base.
func (w *walker) start(h *handle, hb *[batch.HeaderSize]byte, pos, base, size, end int64) {
	*w = walker{h: h, hb: hb, size: size, end: end, pos: pos, next: base, curPos: -1}
}

// step reads the next header into w.cur. It returns false at the end of the segment
// (after checking that it ends at w.end) or on an error.
func (w *walker) step() (bool, error) {
	if w.pos >= w.size {
		if w.end >= 0 && w.next != w.end {
			return false, w.blame(&CorruptionError{File: w.h.seg.path, Pos: w.pos, Offset: w.next,
				Reason: fmt.Sprintf("segment ends at offset %d but the next segment starts at %d", w.next, w.end)})
		}
		return false, nil
	}
	hd, err := readHeader(w.h, w.hb, w.pos, w.next, w.size)
	if err != nil {
		return false, w.blame(err)
	}
	w.cur, w.curPos = hd, w.pos
	w.pos, w.next = w.pos+int64(hd.Size()), hd.LastOffset()+1
	return true, nil
}

// blame returns err, or a corruption of the batch before it when that batch fails its
// CRC.
func (w *walker) blame(err error) error {
	var ce *CorruptionError
	if w.curPos < 0 || !errors.As(err, &ce) {
		return err
	}
	b := make([]byte, w.cur.Size())
	if _, rerr := w.h.f.ReadAt(b, w.curPos); rerr != nil {
		return err // the walk's own error says more than a failed re-read
	}
	if _, cerr := batch.Check(b); cerr != nil {
		return &CorruptionError{File: ce.File, Pos: w.curPos, Offset: w.cur.BaseOffset,
			Reason: fmt.Sprintf("%v (the next header does not follow it: %s)", cerr, ce.Reason)}
	}
	return err
}

// seekBatch reads batch headers from pos (a batch start whose base offset is base) until
// stop accepts one, and returns it with its position; not finding one before size is
// corruption, since callers seek offsets or timestamps the segment is known to hold.
func seekBatch(h *handle, hb *[batch.HeaderSize]byte, pos, base, size int64, stop func(batch.Header) bool) (batch.Header, int64, error) {
	var w walker
	w.start(h, hb, pos, base, size, -1)
	for {
		ok, err := w.step()
		if err != nil {
			return batch.Header{}, w.pos, err
		}
		if !ok {
			return batch.Header{}, w.pos, &CorruptionError{File: h.seg.path, Pos: w.pos, Offset: w.next,
				Reason: "the segment ends before the batch sought"}
		}
		if stop(w.cur) { // by value: a pointer would move the header to the heap on every lookup
			return w.cur, w.curPos, nil
		}
	}
}
