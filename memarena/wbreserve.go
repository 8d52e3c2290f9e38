package memarena

import "fmt"

// Reserve makes room at the tail for a batch of size bytes after pad bytes of padding,
// allocating chunks now, and keeps it until the next Append or Unreserve: the reclaimer
// leaves the tail chunk alone meanwhile, so the Append of that batch (after a Skip of at
// most pad bytes) finds its room and cannot fail for want of memory, nor for its size
// (checked here as Append checks it). The engine reserves before it
// places a batch in the store, so that a full arena refuses the batch before anything
// is placed rather than after (an undone placement is briefly visible to readers). It
// fails with ErrFull, ErrPartitionFull or ErrTooLarge as Append does, leaving nothing
// reserved.
func (w *WriteBuffer) Reserve(size, pad int64) error { return w.reserve(size, pad, false) }

// reserve is Reserve, and Hold when hold is set.
func (w *WriteBuffer) reserve(size, pad int64, hold bool) error {
	if err := w.checkSize(size); err != nil {
		return err
	}
	if hold && size+pad > w.max {
		// More than PartitionMax at once, padding counted: the partition's cap would not
		// hold (an empty buffer may take one batch past it, not a request of them).
		return fmt.Errorf("cannot hold %d bytes and %d of padding in a partition of at most %d: %w", size, pad, w.max, ErrTooLarge)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.mu.closed {
		return ErrClosed
	}
	if err := w.reserveLocked(size + pad); err != nil {
		return err
	}
	w.mu.reserved = true
	w.mu.held = w.mu.held || hold
	return nil
}

// Unreserve gives up a reservation no Append used (the store refused the placement):
// the tail chunk is reclaimable again when all it holds is durable. Under a Hold it
// leaves the room held, for Release to give up.
func (w *WriteBuffer) Unreserve() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.mu.held {
		w.endReserveLocked()
	}
}

// Hold makes room at the tail for a whole request's batches, size bytes in all after
// pad bytes of padding at most, and keeps it across their Reserves and Appends until
// Release: so that a request of several batches is refused whole by a full arena
// (ErrFull, ErrPartitionFull) or is appended whole, never a prefix of it that the
// producer, told "busy: nothing was appended", would send again. Hold is Reserve for
// more than one batch, with its errors (ErrTooLarge when no buffer could take the
// request at once); each batch's Reserve and Append then finds its room held.
func (w *WriteBuffer) Hold(size, pad int64) error { return w.reserve(size, pad, true) }

// Release ends a Hold: the room no Append reached goes back to the arena.
func (w *WriteBuffer) Release() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.mu.held = false
	w.endReserveLocked()
}

// endReserveLocked ends a reservation, if any: the chunks it added that no byte reached
// go back to the arena, and the reclaimer hears when the tail chunk has become
// reclaimable.
func (w *WriteBuffer) endReserveLocked() {
	if !w.mu.reserved {
		return
	}
	w.mu.reserved = false
	cs := w.a.chunkSize
	for n := int64(w.mu.chain.len()); n > 0 && w.mu.tailPos <= w.mu.headPos+(n-1)*cs; n-- {
		id := w.mu.chain.popBack()
		w.mu.bytes -= cs
		w.a.c.writeBufferBytes.Add(-cs)
		w.a.unref(id)
	}
	if w.reclaimableLocked() {
		w.a.enqueueLocked(w)
	}
	if invariantsOn {
		w.checkLocked()
	}
}
