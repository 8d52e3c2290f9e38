package memarena

import "fmt"

// The persister's side of WriteBuffer (docs/writepath.md §1 and §2): the
// engine places batches at the positions they get in the segment files, pads
// the stream at a segment roll (Skip), and the persister holds ranges of the
// stream (Range) to write them to the file straight from arena memory. A
// stream position that is a multiple of 4096 lies at a 4096-aligned address:
// chunks start at multiples of ChunkSize, and each chunk's memory is aligned
// to it within an mmap'd slab.

// Skip advances the tail to stream position to without data: the padding
// the engine puts between two segments at a roll, so that the next segment
// starts at a multiple of 4096. to must be at least the tail and at most one
// chunk past it. Padding is not data: Read leaves it out, Range refuses it,
// it is never pending, and it takes memory only if the next batch's chunk
// holds some of it.
func (w *WriteBuffer) Skip(to int64) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	t := w.mu.tailPos
	switch {
	case w.mu.closed:
		return ErrClosed
	case to < t || to-t > w.a.chunkSize:
		return fmt.Errorf("cannot skip the write buffer's tail from %d to %d (at most %d ahead): %w",
			t, to, w.a.chunkSize, ErrInvalid)
	}
	if w.mu.durablePos == t { // nothing pending: the padding is behind the checkpoint too
		w.mu.durablePos = to
	}
	w.mu.tailPos = to
	if w.mu.chain.len() == 0 {
		w.mu.headPos = w.a.chunkFloor(to)
	}
	if invariantsOn {
		w.checkLocked()
	}
	return nil
}

// Range appends to dst held spans covering the stream bytes [from, to), in
// order, one per chunk piece: a piece starts at a chunk boundary or at from,
// so a piece that starts at a stream position that is a multiple of 4096
// starts at a 4096-aligned address. Every byte of the range must be held as
// batch data: it fails with a *RangeError (errors.Is(err, ErrMiss)) if any
// byte is older than the first batch in memory, past the last, or padding
// (Skip). The caller releases the spans once it has written them; until
// then their chunks are not reused. It allocates nothing if dst has room.
func (w *WriteBuffer) Range(from, to int64, dst []Span) ([]Span, error) {
	if from < 0 || to < from {
		return dst, fmt.Errorf("cannot hold stream bytes [%d, %d): %w", from, to, ErrInvalid)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case w.mu.closed:
		return dst, ErrClosed
	case from == to:
		return dst, nil
	case !w.mu.idx.holds(from, to):
		return dst, w.rangeErrorLocked(from, to)
	}
	for pos := from; pos < to; { // no stamps: writing to a file is not a read
		id, off := w.locateLocked(pos)
		n := min(w.a.chunkSize-off, to-pos)
		dst = append(dst, w.a.holdSpan(id, off, n))
		pos += n
	}
	return dst, nil
}

func (w *WriteBuffer) rangeErrorLocked(from, to int64) error {
	e := &RangeError{From: from, To: to, First: w.mu.tailPos, End: w.mu.tailPos}
	if x := &w.mu.idx; !x.empty() {
		_, _, e.First, _ = x.batch(x.g0, x.lo)
		e.End = x.dataEnd()
	}
	return e
}
