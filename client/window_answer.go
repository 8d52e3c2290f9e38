package client

import (
	"fmt"

	"sluice/internal/invariants"
	"sluice/wire"
)

// action tells the driver what an answer requires of it beyond the window's own changes.
type action uint8

const (
	actNone    action = iota
	actRefresh        // refresh the topic's metadata (the partition moved or the topic changed)
	actFailed         // the window gave up: w.err is set
)

// onAnswer applies the answer to the data request r: its code and its produce body (nil
// when the answer had none). now is the current time and backoff the delay before a retry
// after an error that carries no delay of its own (the driver grows it with
// w.refusals). A retriable refusal is remembered in w.refused until a success.
func (w *window) onAnswer(r *sendReq, code wire.Code, resp *wire.ProduceResponse, now, backoff int64) action {
	defer w.check()
	if r.epoch != w.epoch || w.err != nil {
		// The window rewound past r (every later request was dropped with it); its
		// answer can still tell the current (S, C).
		if resp != nil && w.err == nil {
			w.learn(resp)
		}
		return actNone
	}
	if len(w.reqs) == 0 || w.reqs[0].ord != r.ord || w.q[w.acked].ord != r.ord {
		panic(fmt.Sprintf("BUG: answer for batch %d, window has %d requests in flight", r.ord, len(w.reqs)))
	}
	head := w.reqs[0]
	w.reqs = append(w.reqs[:0], w.reqs[1:]...)
	if code != wire.CodeNone && code != wire.CodeSessionMismatch && (code.Retriable() || staleRoute(code)) {
		w.refused, w.refusals = code, w.refusals+1
	}
	switch {
	case code == wire.CodeNone && resp != nil:
		w.refused, w.refusals = wire.CodeNone, 0
		act := actNone
		if resp.Version > w.version { // a drain answered (or the first news of an expansion)
			w.startDrain(resp.Version)
			act = actRefresh
		}
		if w.session != 0 && resp.Session != w.session {
			w.rewind(resp.Session, resp.Checkpoint) // accepted in a new session: resend all
			return act
		}
		w.session, w.synced = resp.Session, true
		w.accept(head.n, resp.BaseOffset, resp.LastOffset)
		w.durable(resp.Checkpoint)
		return act
	case code == wire.CodeBusy:
		if resp != nil {
			w.learn(resp)
		}
		w.restart(now + int64(retryAfter(resp)))
	case code == wire.CodeSessionMismatch && resp != nil:
		w.rewind(resp.Session, resp.Checkpoint)
	case code == wire.CodeVersionMismatch && resp != nil && resp.Version > w.version:
		// The partition switched to a newer layout: it does not hold r's first batch.
		w.learn(resp)
		w.onNewerRefusal(r.ord, head.n, resp.Version)
		return actRefresh
	case code == wire.CodeVersionMismatch, code == wire.CodeNotServing, code == wire.CodeNotOwner, staleRoute(code):
		w.restart(now + backoff)
		return actRefresh
	case code.Retriable(): // no_space among them: the disk may get room again
		w.restart(now + backoff)
	default:
		w.fail(wire.NewError(code, ""))
		return actFailed
	}
	return actNone
}

// retryAfter returns the delay of a busy answer in nanoseconds (1ms when missing).
func retryAfter(resp *wire.ProduceResponse) uint64 {
	if resp == nil || resp.RetryAfterMs == 0 {
		return 1e6
	}
	return uint64(resp.RetryAfterMs) * 1e6
}

// onPoll applies the answer to an empty produce. A poll is all a window sends while its
// batches wait for C, so a poll refused because the partition is not served there any
// more (it moved, or its broker restarted without it) must refresh the route, as a data
// request's refusal does: else the window would poll the old broker until its caller's
// deadline and never learn the new owner's session (whose C may be below its batches,
// which must then be resent). Refusals back off like a data request's.
func (w *window) onPoll(code wire.Code, resp *wire.ProduceResponse, now, backoff int64) action {
	defer w.check()
	w.polling = false
	if w.err != nil {
		return actNone
	}
	if resp != nil {
		w.learn(resp)
	}
	switch {
	case code == wire.CodeVersionMismatch:
		if resp != nil && resp.Version > w.version {
			w.startDrain(resp.Version)
		}
		return actRefresh
	case code == wire.CodeNotServing, code == wire.CodeNotOwner, staleRoute(code):
		w.notBefore = max(w.notBefore, now+backoff)
		return actRefresh
	case code != wire.CodeNone:
		w.notBefore = max(w.notBefore, now+backoff)
	}
	return actNone
}

// learn takes the (S, C) of an answer: a new session rewinds, the same one advances C.
func (w *window) learn(resp *wire.ProduceResponse) {
	switch {
	case resp.Session == 0:
	case w.session == 0:
		w.session = resp.Session
	case resp.Session != w.session:
		w.rewind(resp.Session, resp.Checkpoint)
	default:
		w.durable(resp.Checkpoint)
	}
}

// accept marks the next n batches accepted with the request's offsets [base, last]. Their
// own offsets are assigned from last backwards: exact when the range holds exactly their
// records and none of them was sent before (a first send's batches are appended
// together), else an upper bound, which delays their release but never releases one
// early. A resend is never exact: the broker gives no offsets for batches older than its
// dedup window and base is then the first remembered one's, and the span from it to
// last may hold as many of other producers' records as the forgotten batches had, which
// looked exact (a review found ProduceSync reporting offsets that held other records).
func (w *window) accept(n int, base, last int64) {
	bs := w.q[w.acked : w.acked+n]
	total, resent := int64(0), false
	for _, b := range bs {
		total += int64(b.count)
		resent = resent || b.resent
	}
	exact := last >= 0 && last-base+1 == total && !resent
	end := last
	for i := n - 1; i >= 0; i-- {
		b := bs[i]
		b.accepted, b.exact = true, exact
		if end >= 0 {
			b.last, b.base = end, end-int64(b.count)+1
			end = b.base - 1
		}
	}
	w.acked += n
	w.acceptedOrd = max(w.acceptedOrd, bs[n-1].ord)
}

// durable takes a checkpoint c of the current session and releases every accepted batch
// it covers: batch offsets grow along q, so a batch whose (upper bound of its) last
// offset is at most c is durable, and so is every batch before it.
func (w *window) durable(c int64) {
	w.ckpt = max(w.ckpt, c)
	k := 0
	for i, b := range w.q[:w.acked] {
		if b.last > c {
			break
		}
		if b.last >= 0 {
			k = i + 1
		}
	}
	if k == 0 {
		return
	}
	for _, b := range w.q[:k] {
		b.durable = true
		w.release(b)
	}
	w.durableOrd = w.q[k-1].ord
	n := copy(w.q, w.q[k:])
	clear(w.q[n:])
	w.q = w.q[:n]
	w.acked -= k
	w.sent -= k
}

// release takes b out of the window's memory count; its buffer is recycled once no
// request being written points at it.
func (w *window) release(b *pbatch) {
	w.sh.buffered -= int64(len(b.buf))
	w.sh.unpin(b)
	b.released = true
	if b.writing == 0 {
		w.sh.putBuf(b.buf)
		b.buf = nil
	}
}

// rewind starts over in session s with checkpoint c (DESIGN.md §2 step 4). The offsets
// learned in the old session mean nothing in the new one (the broker may have lost them
// and given them to other records), so every batch still held is resent, in order, with
// the same boundaries and sequences: those the broker already has are acknowledged with
// their offsets, not appended again.
func (w *window) rewind(s uint64, c int64) {
	w.session, w.ckpt = s, c
	for _, b := range w.q {
		b.base, b.last, b.exact = -1, -1, false
	}
	w.acked = 0
	w.restart(0)
}

// restart drops the requests in flight (their answers become stale) and moves the send
// cursor back to the first batch not accepted; nothing goes out before notBefore, and
// then one request at a time until an answer succeeds.
func (w *window) restart(notBefore int64) {
	for _, b := range w.q[w.acked:w.sent] {
		b.resent = true
	}
	w.sent = w.acked
	w.reqs = w.reqs[:0]
	w.epoch++
	w.synced = false
	w.notBefore = notBefore
}

// connLost is called when the connection carrying the window's data requests broke:
// their answers will never come.
func (w *window) connLost(notBefore int64) {
	if w.err == nil && len(w.reqs) > 0 {
		w.restart(notBefore)
	}
	w.synced = false
}

// pollLost is called when the connection carrying the window's poll broke.
func (w *window) pollLost() { w.polling = false }

// fail gives up on the window: its batches, the open one included, stay in q for the
// report and nothing more is sent.
func (w *window) fail(err error) {
	w.seal()
	w.err = err
	w.restart(never)
}

// check verifies the window's invariants in invariants builds.
func (w *window) check() {
	if !invariants.Enabled {
		return
	}
	if w.acked < 0 || w.acked > w.sent || w.sent > len(w.q) {
		panic(fmt.Sprintf("BUG: window cursors acked %d sent %d of %d", w.acked, w.sent, len(w.q)))
	}
	n := 0
	for _, r := range w.reqs {
		n += r.n
	}
	if n != w.sent-w.acked {
		panic(fmt.Sprintf("BUG: %d batches in requests, %d between acked and sent", n, w.sent-w.acked))
	}
	for i := 1; i < len(w.q); i++ {
		if w.q[i].ord != w.q[i-1].ord+1 {
			panic("BUG: window batches out of order")
		}
	}
}

// staleRoute reports whether a code says the request went to the wrong place rather
// than that it is wrong: a topic or partition unknown to a broker that served it before
// (the partition moved, or the address now belongs to another broker or another
// process). The client refreshes the metadata and retries, as Kafka's clients do with
// unknown_topic_or_partition; a topic unknown from the start fails when the producer or
// consumer resolves it.
func staleRoute(c wire.Code) bool {
	return c == wire.CodeUnknownPartition || c == wire.CodeUnknownTopic
}
