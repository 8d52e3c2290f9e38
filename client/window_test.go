package client

import (
	"bytes"
	"fmt"
	"math"
	"testing"

	"sluice/batch"
	"sluice/wire"
)

const ms = int64(1e6)

func testWindow(batchBytes, inflight int) *window {
	sh := &winShared{batchBytes: batchBytes, requestBytes: batchBytes, maxInflight: inflight, linger: 5 * ms,
		newPID: func() int64 { return 43 }}
	return newWindow(sh, 0, 7, 42)
}

// addN adds n records of 100 bytes (9 fit a batch of 1024 bytes), each with its index+1
// as progress.
func addN(w *window, from, n int, now int64) {
	for i := from; i < from+n; i++ {
		w.add(&Record{Value: bytes.Repeat([]byte{byte(i)}, 100), Progress: int64(i + 1)}, 3, 1000, now)
	}
}

// addSealed adds n records and seals the open batch.
func addSealed(w *window, n int) {
	addN(w, 0, n, 0)
	w.seal()
}

func ok(s uint64, c, base, last int64) *wire.ProduceResponse {
	return &wire.ProduceResponse{Version: 7, Session: s, Checkpoint: c, BaseOffset: base, LastOffset: last}
}

func mustSend(t *testing.T, w *window, now int64) *sendReq {
	t.Helper()
	r := &sendReq{}
	if !w.nextRequest(now, r) {
		t.Fatalf("no request to send: sent %d of %d, %d in flight", w.sent, len(w.q), len(w.reqs))
	}
	w.writeDone(r)
	w.check()
	return r
}

func seqs(r *sendReq) string {
	var s []string
	for _, b := range r.batches {
		h, _ := batch.ParseHeader(b.buf)
		s = append(s, fmt.Sprintf("%d+%d", h.BaseSequence, h.Count))
	}
	return fmt.Sprint(s)
}

func TestWindowAcceptThenDurable(t *testing.T) {
	w := testWindow(1024, 4)
	addN(w, 0, 25, 0) // 9 records of ~110 bytes per batch: batches of 9, 9 and an open one of 7
	if len(w.q) != 2 || !w.open {
		t.Fatalf("%d sealed batches, open %v", len(w.q), w.open)
	}
	r := &sendReq{}
	if w.nextRequest(ms, r) { // a full batch is sent at once, but only after linger for the open one
		w.writeDone(r)
	}
	if r.session != 0 || len(r.batches) != 1 || r.ord != 1 {
		t.Fatalf("first request: session %d, %d batches, ord %d", r.session, len(r.batches), r.ord)
	}
	if w.nextRequest(ms, &sendReq{}) {
		t.Fatal("a second request before the first answer (session unknown)")
	}
	w.onAnswer(r, wire.CodeNone, ok(99, -1, 0, 8), ms, ms)
	r2 := mustSend(t, w, 2*ms)
	if w.nextRequest(2*ms, &sendReq{}) {
		t.Fatal("the open batch went out before its linger")
	}
	r3 := mustSend(t, w, 6*ms) // linger passed: the open batch is sealed and sent, pipelined
	if seqs(r2) != "[9+9]" || seqs(r3) != "[18+7]" || r3.session != 99 {
		t.Fatalf("requests %s %s, session %d", seqs(r2), seqs(r3), r3.session)
	}
	w.onAnswer(r2, wire.CodeNone, ok(99, 8, 9, 17), 7*ms, ms)
	if len(w.q) != 2 || w.durableOrd != 1 || w.acceptedOrd != 2 {
		t.Fatalf("after C=8: %d held, durable %d accepted %d", len(w.q), w.durableOrd, w.acceptedOrd)
	}
	w.onAnswer(r3, wire.CodeNone, ok(99, 24, 18, 24), 8*ms, ms)
	if len(w.q) != 0 || w.durableOrd != 3 || w.sh.buffered != 0 {
		t.Fatalf("after C=24: %d held, durable %d, %d bytes buffered", len(w.q), w.durableOrd, w.sh.buffered)
	}
}

// TestWindowLingerFromLastSend: a record into a producer that sent nothing for a linger
// goes out at once; one a moment after a request waits out the rest of that request's
// linger, not a whole one of its own, in the same window or another (keyless records
// moving on to the next partition must not find it idle), even when a full batch left
// after it began; and batches begun in the same idle spell all go at once.
func TestWindowLingerFromLastSend(t *testing.T) {
	w := testWindow(1024, 4) // linger 5 ms
	addN(w, 0, 1, 10*ms)
	r1 := mustSend(t, w, 10*ms)
	if seqs(r1) != "[0+1]" {
		t.Fatalf("a record into an idle window waited: sent %s", seqs(r1))
	}
	w.onAnswer(r1, wire.CodeNone, ok(99, -1, 0, 0), 10*ms+ms/10, ms/10)
	addN(w, 1, 1, 11*ms)
	if w.nextRequest(11*ms, &sendReq{}) || w.wakeAt(11*ms) != 15*ms {
		t.Fatalf("one ms after a request: sent, or wakes at %d, not at 15 ms", w.wakeAt(11*ms))
	}
	r2 := mustSend(t, w, 15*ms)
	w.onAnswer(r2, wire.CodeNone, ok(99, -1, 1, 1), 15*ms+ms/10, ms/10)
	addN(w, 2, 10, 16*ms) // a full batch of 9 and an open one of 1, begun at 16 ms
	r3 := mustSend(t, w, 17*ms)
	if seqs(r3) != "[2+9]" {
		t.Fatalf("the full batch went as %s", seqs(r3))
	}
	w.onAnswer(r3, wire.CodeNone, ok(99, -1, 2, 10), 17*ms+ms/10, ms/10)
	if w.nextRequest(19*ms, &sendReq{}) || w.wakeAt(19*ms) != 20*ms {
		t.Fatalf("a batch begun at 16 ms, after a request at 15: sent at 19, or wakes at %d, not at 20 ms",
			w.wakeAt(19*ms))
	}
	if r4 := mustSend(t, w, 20*ms); seqs(r4) != "[11+1]" {
		t.Fatalf("the open batch went as %s", seqs(r4))
	}
	other := newWindow(w.sh, 1, 7, 42) // the next partition, idle since the start
	addN(other, 0, 1, 22*ms)
	if other.nextRequest(22*ms, &sendReq{}) || other.wakeAt(22*ms) != 25*ms {
		t.Fatalf("a partition idle since the start sent 2 ms after another's request, or wakes at %d, not 25 ms",
			other.wakeAt(22*ms))
	}
	r5 := mustSend(t, other, 25*ms)
	other.onAnswer(r5, wire.CodeNone, ok(98, -1, 0, 0), 25*ms+ms/10, ms/10)
	// Idle again for more than a linger: records into both partitions at once both go at
	// once, not only the first one the sender looks at.
	addN(w, 12, 1, 40*ms)
	addN(other, 1, 1, 40*ms)
	mustSend(t, w, 40*ms)
	if !other.nextRequest(40*ms, &sendReq{}) {
		t.Fatalf("the second batch begun in an idle spell waits until %d", other.wakeAt(40*ms))
	}
}

// TestWindowLingerNeverWraps: a linger too long to add to a time (batches sealed by size
// alone) keeps an open batch until it fills or is flushed, rather than wrapping into the
// past and sending it at once.
func TestWindowLingerNeverWraps(t *testing.T) {
	w := testWindow(1024, 4)
	w.sh.linger = never
	addN(w, 0, 1, ms)
	if w.nextRequest(ms, &sendReq{}) || w.wakeAt(ms) != never {
		t.Fatalf("sent a batch that lingers for ever, or wakes at %d", w.wakeAt(ms))
	}
	w.seal() // as ProduceSync and Flush do
	r := mustSend(t, w, 2*ms)
	w.onAnswer(r, wire.CodeNone, ok(99, -1, 0, 0), 2*ms+ms/10, ms/10)
	addN(w, 1, 1, 3*ms) // begun after a request: timed from it
	if w.nextRequest(4*ms, &sendReq{}) || w.wakeAt(4*ms) != never {
		t.Fatalf("sent a batch that lingers for ever, or wakes at %d", w.wakeAt(4*ms))
	}
}

func TestWindowSessionMismatchResendsSameBatches(t *testing.T) {
	w := testWindow(1024, 4)
	addSealed(w, 27)
	r1 := mustSend(t, w, 0)
	w.onAnswer(r1, wire.CodeNone, ok(5, -1, 100, 108), 0, ms)
	r2, r3 := mustSend(t, w, 0), mustSend(t, w, 0)
	before := [][]byte{r1.batches[0].buf, r2.batches[0].buf, r3.batches[0].buf}
	// r2 is refused: the broker restarted and kept offsets up to 99 (not our batch 1).
	w.onAnswer(r2, wire.CodeSessionMismatch, ok(6, 99, -1, -1), ms, ms)
	w.onAnswer(r3, wire.CodeSessionMismatch, ok(6, 99, -1, -1), ms, ms) // stale: ignored
	if w.session != 6 || w.acked != 0 || w.sent != 0 || len(w.q) != 3 {
		t.Fatalf("after rewind: session %d acked %d sent %d held %d", w.session, w.acked, w.sent, len(w.q))
	}
	var got []string
	for i := 0; i < 3; i++ {
		r := mustSend(t, w, 2*ms)
		got = append(got, seqs(r))
		if r.session != 6 || !bytes.Equal(r.batches[0].buf, before[i]) {
			t.Fatalf("resend %d: session %d, bytes changed %v", i, r.session, !bytes.Equal(r.batches[0].buf, before[i]))
		}
		w.onAnswer(r, wire.CodeNone, ok(6, 99, int64(100+9*i), int64(108+9*i)), 2*ms, ms)
	}
	if fmt.Sprint(got) != "[[0+9] [9+9] [18+9]]" {
		t.Fatalf("resent %v", got)
	}
}

func TestWindowOldOffsetsNotTrustedAfterSessionChange(t *testing.T) {
	w := testWindow(1024, 4)
	addSealed(w, 9)
	r := mustSend(t, w, 0)
	w.onAnswer(r, wire.CodeNone, ok(5, -1, 100, 108), 0, ms)
	// A poll answer from a new session whose C covers the old offsets of our batch: those
	// offsets may now hold other records, so nothing is released.
	w.onPoll(wire.CodeNone, ok(6, 500, -1, -1), 0, 0)
	if len(w.q) != 1 || w.acked != 0 {
		t.Fatalf("batch released on an old-session offset: held %d acked %d", len(w.q), w.acked)
	}
}

func TestWindowBusyRetriesAfterDelay(t *testing.T) {
	w := testWindow(1024, 4)
	addSealed(w, 27)
	r1 := mustSend(t, w, 0)
	w.onAnswer(r1, wire.CodeNone, ok(5, -1, 0, 8), 0, ms)
	r2, r3 := mustSend(t, w, 0), mustSend(t, w, 0)
	busy := ok(5, 8, -1, -1)
	busy.RetryAfterMs = 10
	w.onAnswer(r2, wire.CodeBusy, busy, ms, ms)
	w.onAnswer(r3, wire.CodeSequenceGap, nil, ms, ms) // stale: r2 was not appended
	if w.err != nil || len(w.q) != 2 || w.durableOrd != 1 {
		t.Fatalf("after busy: err %v, held %d, durable %d", w.err, len(w.q), w.durableOrd)
	}
	if w.nextRequest(5*ms, &sendReq{}) || w.wakeAt(5*ms) != 11*ms {
		t.Fatalf("sent during the busy delay, or wakes at %d", w.wakeAt(5*ms))
	}
	r := mustSend(t, w, 11*ms)
	if seqs(r) != "[9+9]" || w.nextRequest(11*ms, &sendReq{}) {
		t.Fatalf("after busy: sent %s, and pipelined before an answer", seqs(r))
	}
}

// TestWindowNoSpaceRetries: a full disk (no_space) is retriable: nothing is dropped, the
// request goes again after the backoff, and the window remembers the refusal and how many
// came in a row (for the driver's backoff and the caller's error) until a success.
func TestWindowNoSpaceRetries(t *testing.T) {
	w := testWindow(1024, 4)
	addSealed(w, 9)
	for i := 1; i <= 3; i++ {
		r := mustSend(t, w, int64(i)*10*ms)
		if act := w.onAnswer(r, wire.CodeNoSpace, ok(5, -1, -1, -1), int64(i)*10*ms, 4*ms); act != actNone || w.err != nil {
			t.Fatalf("no_space %d: action %v, err %v", i, act, w.err)
		}
		if w.refused != wire.CodeNoSpace || w.refusals != i || len(w.q) != 1 || w.nextRequest(int64(i)*10*ms+3*ms, &sendReq{}) {
			t.Fatalf("no_space %d: refused %v x%d, held %d, or resent before the backoff", i, w.refused, w.refusals, len(w.q))
		}
	}
	r := mustSend(t, w, 40*ms)
	w.onAnswer(r, wire.CodeNone, ok(5, 8, 0, 8), 40*ms, ms)
	if w.refused != wire.CodeNone || w.refusals != 0 || w.durableOrd != 1 {
		t.Fatalf("after success: refused %v x%d, durable %d", w.refused, w.refusals, w.durableOrd)
	}
}

func TestWindowFatalFails(t *testing.T) {
	w := testWindow(1024, 4)
	addSealed(w, 12)
	r := mustSend(t, w, 0)
	if act := w.onAnswer(r, wire.CodeCorruptBatch, nil, 0, ms); act != actFailed || w.err == nil {
		t.Fatalf("action %v, err %v", act, w.err)
	}
	if w.open || len(w.q) != 2 || w.nextRequest(ms, &sendReq{}) {
		t.Fatalf("failed window: open %v, held %d", w.open, len(w.q))
	}
}

func TestWindowPoll(t *testing.T) {
	w := testWindow(1024, 4)
	addSealed(w, 9)
	if w.nextPoll(0, &sendReq{}) {
		t.Fatal("poll with nothing accepted")
	}
	r := mustSend(t, w, 0)
	if w.nextPoll(0, &sendReq{}) {
		t.Fatal("poll with a request in flight")
	}
	w.onAnswer(r, wire.CodeNone, ok(5, -1, 0, 8), 0, ms)
	p := &sendReq{}
	if !w.nextPoll(0, p) || !p.poll || p.session != 5 || w.nextPoll(0, &sendReq{}) {
		t.Fatalf("poll: %+v, second poll allowed %v", p, w.polling)
	}
	w.onPoll(wire.CodeNone, ok(5, 8, -1, -1), 0, 0)
	if len(w.q) != 0 || w.nextPoll(0, &sendReq{}) {
		t.Fatalf("after poll: held %d", len(w.q))
	}
}

func TestWindowAcceptOffsets(t *testing.T) {
	f := func(counts []int, base, last int64, want string) {
		t.Helper()
		w := testWindow(1<<20, 4)
		for _, n := range counts {
			addN(w, 0, n, 0)
			w.seal()
		}
		w.sent = len(w.q)
		w.accept(len(counts), base, last)
		var got []string
		for _, b := range w.q {
			got = append(got, fmt.Sprintf("%d-%d/%v", b.base, b.last, b.exact))
		}
		if fmt.Sprint(got) != want {
			t.Fatalf("accept %v at [%d, %d]: %v, want %s", counts, base, last, got, want)
		}
	}
	f([]int{3, 2}, 10, 14, "[10-12/true 13-14/true]")
	f([]int{3, 2}, 10, 20, "[16-18/false 19-20/false]") // not contiguous: upper bounds
	f([]int{3, 2}, -1, -1, "[-1--1/false -1--1/false]") // older than the broker's dedup window
}

func TestWindowConnLostResendsUnanswered(t *testing.T) {
	w := testWindow(1024, 4)
	addSealed(w, 27)
	r1 := mustSend(t, w, 0)
	w.onAnswer(r1, wire.CodeNone, ok(5, -1, 0, 8), 0, ms)
	mustSend(t, w, 0)
	mustSend(t, w, 0)
	w.connLost(3 * ms)
	if w.sent != 1 || w.nextRequest(2*ms, &sendReq{}) {
		t.Fatalf("after conn loss: sent %d", w.sent)
	}
	if r := mustSend(t, w, 3*ms); seqs(r) != "[9+9]" || r.session != 5 {
		t.Fatalf("resend %s with session %d", seqs(r), r.session)
	}
}

func TestWindowLargeRecordAlone(t *testing.T) {
	w := testWindow(1024, 4)
	addN(w, 0, 2, 0)
	w.add(&Record{Value: make([]byte, 5000)}, 1, 1000, 0)
	if len(w.q) != 2 || w.q[1].count != 1 || w.open {
		t.Fatalf("held %d, open %v", len(w.q), w.open)
	}
}

func TestWindowSequenceWrapStartsNewProducerID(t *testing.T) {
	w := testWindow(1024, 4)
	w.seq = math.MaxInt32 - 1000
	addSealed(w, 9)
	addSealed(w, 9)
	r := mustSend(t, w, 0)
	if r.pid != 43 || seqs(r) != "[0+9]" {
		t.Fatalf("after the wrap point: pid %d, %s", r.pid, seqs(r))
	}
}

func TestWindowRequestKeepsOneProducerID(t *testing.T) {
	w := testWindow(1024, 4)
	w.sh.requestBytes = 4096
	addSealed(w, 9)
	w.pid = 44
	addSealed(w, 9)
	r := mustSend(t, w, 0)
	w.onAnswer(r, wire.CodeNone, ok(5, -1, 0, 8), 0, ms)
	r2 := mustSend(t, w, 0)
	if len(r.batches) != 1 || r.pid != 42 || r2.pid != 44 {
		t.Fatalf("requests of %d batches with pids %d, %d", len(r.batches), r.pid, r2.pid)
	}
}

func TestWindowMinProgress(t *testing.T) {
	w := testWindow(1024, 4)
	addN(w, 0, 20, 0) // progress 1..20: batches 1-9, 10-18 and the open 19-20
	if got := w.minProgress(); got != 1 {
		t.Fatalf("min progress %d, want 1", got)
	}
	r := mustSend(t, w, 0)
	w.onAnswer(r, wire.CodeNone, ok(5, 8, 0, 8), 0, ms)
	if got := w.minProgress(); got != 10 {
		t.Fatalf("after the first batch is durable: min progress %d, want 10", got)
	}
	w.add(&Record{Value: []byte("no progress")}, 0, 0, 0)
	for _, b := range w.q {
		w.sh.putBuf(b.buf)
	}
	w.q = nil
	if got := w.minProgress(); got != 19 {
		t.Fatalf("open batch only: min progress %d, want 19", got)
	}
}

// TestWindowPollRefusedRefreshes: a window whose batches were accepted and wait for C
// sends only polls; a poll refused because the partition is not served there any more
// (not_owner, with or without a body) asks for a metadata refresh and backs off, instead
// of polling the old broker again at once (forever, until the caller's deadline).
func TestWindowPollRefusedRefreshes(t *testing.T) {
	for _, body := range []*wire.ProduceResponse{nil, ok(5, 50, -1, -1)} {
		w := testWindow(1024, 4)
		addSealed(w, 9)
		r := mustSend(t, w, 0)
		w.onAnswer(r, wire.CodeNone, ok(5, 50, 100, 108), 0, ms)
		var poll sendReq
		if !w.nextPoll(ms, &poll) {
			t.Fatal("no poll for an accepted batch waiting for C")
		}
		if act := w.onPoll(wire.CodeNotOwner, body, 2*ms, 10*ms); act != actRefresh {
			t.Fatalf("body %v: a poll refused not_owner gives action %v, want a refresh", body != nil, act)
		}
		if w.nextPoll(3*ms, &poll) {
			t.Fatalf("body %v: polled again at once after a refusal", body != nil)
		}
		if !w.nextPoll(12*ms, &poll) {
			t.Fatalf("body %v: no poll after the backoff", body != nil)
		}
	}
}
