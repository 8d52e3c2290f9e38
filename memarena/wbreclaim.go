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
		return !w.mu.growing && !w.mu.reserved && w.mu.durablePos == w.mu.tailPos
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
		// The next append starts a fresh chunk where the one holding the tail
		// starts; its bytes below the tail are not data.
		w.mu.headPos = w.a.chunkFloor(w.mu.tailPos)
		w.mu.idx.dropBefore(w.mu.tailPos)
	} else {
		w.mu.headPos += w.a.chunkSize
		w.mu.idx.dropBefore(w.mu.headPos)
	}
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
	pending := w.mu.dataEnd - w.mu.dataDur
	switch {
	case w.mu.bytes != n*cs:
		bug("holds %d bytes in %d chunks", w.mu.bytes, n)
	case h%cs != 0 || n == 0 && h != w.a.chunkFloor(t):
		bug("head %d of %d chunks is not where the chunk of tail %d starts", h, n, t)
	case !(h <= d && d <= t):
		bug("positions head %d durable %d tail %d", h, d, t)
	case n > 0 && !w.mu.reserved && t <= h+(n-1)*cs: // Reserve's room may be past the tail
		bug("empty chunk at the tail: head %d tail %d over %d chunks", h, t, n)
	case pending < 0 || (pending == 0) != (d == t):
		bug("%d bytes pending with durable position %d, tail %d", pending, d, t)
	}
	for i := range n {
		id := w.mu.chain.at(i)
		if m := w.a.meta(id); m.owner != w.st.id || m.refs.Load() < 1 {
			bug("chunk %d has owner %d and %d references", id, m.owner, m.refs.Load())
		}
	}
	w.checkIndexLocked(bug)
}

// checkIndexLocked verifies that the batches lie in the chain in order, with
// padding only between groups, and that the data counts add up.
func (w *WriteBuffer) checkIndexLocked(bug func(string, ...any)) {
	x := &w.mu.idx
	if x.empty() {
		if w.mu.dataEnd != w.mu.dataDur {
			bug("no batch in memory, %d bytes pending", w.mu.dataEnd-w.mu.dataDur)
		}
		return
	}
	g, j := x.first()
	if _, _, start, _ := x.batch(g, j); start < w.mu.headPos {
		bug("first batch starts at %d before head %d", start, w.mu.headPos)
	}
	for k := x.g0 + 1; k < len(x.groups); k++ {
		p, q := x.groups[k-1], x.groups[k]
		if q.start < p.endPos() || q.data != p.data+p.endPos()-p.start || q.base != p.base+int64(p.last[len(p.last)-1])+1 {
			bug("group %d (offset %d, position %d, data %d) does not follow group %d (offset %d, positions %d..%d, data %d)",
				k, q.base, q.start, q.data, k-1, p.base, p.start, p.endPos(), p.data)
		}
	}
	gl := x.groups[len(x.groups)-1]
	end, last := gl.endPos(), gl.base+int64(gl.last[len(gl.last)-1])
	chainEnd := w.mu.headPos + int64(w.mu.chain.len())*w.a.chunkSize
	switch {
	case end > w.mu.tailPos || end > chainEnd || last != w.mu.next-1:
		bug("last batch ends at %d offset %d; tail %d, chain end %d, next %d", end, last, w.mu.tailPos, chainEnd, w.mu.next)
	case gl.data+end-gl.start != w.mu.dataEnd:
		bug("index counts %d bytes of data; buffer %d", gl.data+end-gl.start, w.mu.dataEnd)
	}
	if d := w.mu.durablePos; d < w.mu.tailPos {
		if pos, data, ok := x.startOf(w.mu.durable + 1); !ok || pos != d || data != w.mu.dataDur {
			bug("durable position %d (data %d) is not the start %d (data %d) of the batch after the checkpoint %d",
				d, w.mu.dataDur, pos, data, w.mu.durable)
		}
	}
}
