package memarena

import "fmt"

// The reclaimer's side of WriteBuffer: chunks leave from the oldest end only,
// so the chain stays contiguous, and only once every batch with a byte in
// them is durable. The tail chunk goes too when the whole buffer is durable
// and no Append is under way, so an idle buffer ends up holding nothing.

func (w *WriteBuffer) state() *ownerState { return &w.st }
func (w *WriteBuffer) tryLock() bool      { return w.mu.TryLock() }
func (w *WriteBuffer) unlock()            { w.mu.Unlock() }

// reclaimableLocked reports whether the oldest chunk may be given up.
func (w *WriteBuffer) reclaimableLocked() bool {
	switch n := w.mu.chain.len(); {
	case n == 0 || w.mu.closed:
		return false
	case n == 1:
		return !w.mu.growing && w.mu.durablePos == w.mu.tailPos
	default:
		return w.mu.headPos+w.a.chunkSize <= w.mu.durablePos
	}
}

func (w *WriteBuffer) candidateLocked(force bool) (uint64, candidate) {
	switch {
	case !w.reclaimableLocked():
		return 0, candNone
	}
	stamp := w.a.meta(w.mu.chain.front()).stamp
	if !force && w.mu.bytes-w.a.chunkSize < w.min {
		return stamp, candHeld
	}
	return stamp, candReady
}

// reclaimOneLocked gives up the oldest chunk, which must be reclaimable,
// and drops the batches that started in it.
func (w *WriteBuffer) reclaimOneLocked() bool {
	if invariantsOn && !w.reclaimableLocked() {
		panic(fmt.Sprintf("BUG: memarena: reclaiming chunk at %d of write buffer %d, durable to %d",
			w.mu.headPos, w.st.id, w.mu.durablePos))
	}
	id := w.mu.chain.popFront()
	if w.mu.chain.len() == 0 {
		w.mu.headPos = w.mu.tailPos // the next append starts a fresh chunk
	} else {
		w.mu.headPos += w.a.chunkSize
	}
	w.mu.idx.dropBefore(w.mu.headPos)
	w.mu.bytes -= w.a.chunkSize
	w.a.c.writeBufferBytes.Add(-w.a.chunkSize)
	freed := w.a.unref(id)
	if invariantsOn {
		w.checkLocked()
	}
	return freed
}

// checkLocked verifies the buffer's bookkeeping (invariants only): bbolt's
// strict mode, after every change.
func (w *WriteBuffer) checkLocked() {
	cs, n := w.a.chunkSize, int64(w.mu.chain.len())
	bug := func(format string, args ...any) {
		panic(fmt.Sprintf("BUG: memarena: write buffer %d: ", w.st.id) + fmt.Sprintf(format, args...))
	}
	h, d, t := w.mu.headPos, w.mu.durablePos, w.mu.tailPos
	switch {
	case w.mu.bytes != n*cs:
		bug("holds %d bytes in %d chunks", w.mu.bytes, n)
	case !(h <= d && d <= t && t <= h+n*cs):
		bug("positions head %d durable %d tail %d over %d chunks", h, d, t, n)
	case n > 0 && t <= h+(n-1)*cs:
		bug("empty chunk at the tail: head %d tail %d over %d chunks", h, t, n)
	}
	for i := range n {
		id := w.mu.chain.at(i)
		if m := w.a.meta(id); m.owner != w.st.id || m.refs.Load() < 1 {
			bug("chunk %d has owner %d and %d references", id, m.owner, m.refs.Load())
		}
	}
	w.checkIndexLocked(bug)
}

func (w *WriteBuffer) checkIndexLocked(bug func(string, ...any)) {
	x := &w.mu.idx
	if x.empty() {
		return
	}
	g, j := x.first()
	if _, _, start, _ := x.batch(g, j); start < w.mu.headPos {
		bug("first batch starts at %d before head %d", start, w.mu.headPos)
	}
	gl := len(x.groups) - 1
	_, last, _, end := x.batch(gl, len(x.groups[gl].last)-1)
	if end != w.mu.tailPos || last != w.mu.next-1 {
		bug("last batch ends at %d offset %d; tail %d next %d", end, last, w.mu.tailPos, w.mu.next)
	}
}
