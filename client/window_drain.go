package client

import "sluice/batch"

// Draining a window after a topic expansion (docs/cluster.md, "Expansion"). The window's
// batches were routed by the old layout (version w.version). Once the window learns of a
// newer version (w.newer), it keeps sending them with the old version, one batch per
// request: a partition that has not switched yet appends them as before (they are of the
// old layout, below its switch offset); one that has switched answers each from its
// producers' sequences (the drain rule, docs/protocol.md §7): a batch it holds is
// acknowledged (and durable: the partition switched only once C covered everything
// before the switch), the first it does not hold is refused with version_mismatch, and
// so is every later one (sequences are consecutive). The window is resolved when it
// holds nothing, or when its first batch was refused: what it holds then was never
// appended, and the producer routes those records again by the new layout (takeUnheld).

// startDrain seals the open batch (its records were routed by the old layout) and marks
// the window draining toward version v.
func (w *window) startDrain(v uint32) {
	w.seal()
	if v > w.newer {
		w.newer = v
	}
}

// draining reports whether the window learned of a newer topic version and has not been
// re-routed since.
func (w *window) draining() bool { return w.newer != 0 }

// resolvedDrain reports whether the draining window is done: it holds nothing, or what
// it holds was refused from its first batch on.
func (w *window) resolvedDrain() bool {
	return w.draining() && (w.refusedFrom || (len(w.q) == 0 && !w.open) || w.err != nil)
}

// onNewerRefusal takes a version_mismatch to a request whose first batch has ord ord and
// n batches, from a partition of a newer version: if it was a single batch at the head
// of the queue, the window is resolved; otherwise it resends from its first unaccepted
// batch, one per request.
func (w *window) onNewerRefusal(ord uint64, n int, newer uint32) {
	w.startDrain(newer)
	if n == 1 && len(w.q) > 0 && w.q[0].ord == ord {
		w.refusedFrom = true
		w.restart(never) // nothing more goes out until the producer re-routes
		return
	}
	w.restart(0)
}

// takeUnheld ends the drain: it returns the batches the window still holds (none of them
// in the log), forgets them, and moves the window to version v with the sequences of the
// first one, which were never used (a partition that refused the batch holds nothing of
// it or of any later one).
func (w *window) takeUnheld(v uint32) []*pbatch {
	if w.err != nil {
		return nil // the producer failed: its batches stay for Close's report
	}
	w.seal()
	out := w.q
	for _, b := range out {
		w.sh.buffered -= int64(len(b.buf))
		w.sh.unpin(b)
		b.released = true // its buffer stays with it: the producer reads the records back
	}
	if len(out) > 0 {
		if seq, ok := firstSeq(out[0].buf); ok {
			w.pid, w.seq = out[0].pid, seq
		}
		// Their records are the windows' they are routed to now, where Flush and
		// WaitPersisted look for them: none is this window's to wait for any more.
		last := out[len(out)-1].ord
		w.acceptedOrd, w.durableOrd = max(w.acceptedOrd, last), max(w.durableOrd, last)
	}
	w.q, w.acked, w.sent = nil, 0, 0
	w.version, w.newer, w.refusedFrom = v, 0, false
	w.restart(0)
	return out
}

// firstSeq returns the base sequence of a batch the window built.
func firstSeq(buf []byte) (int32, bool) {
	h, err := batch.ParseHeader(buf)
	return h.BaseSequence, err == nil
}
