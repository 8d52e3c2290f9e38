package client

import (
	"testing"

	"sluice/batch"
	"sluice/wire"
)

// TestWindowDrain: after an expansion, a window sends what it holds one batch per
// request with its old version; a batch the partition holds is acknowledged and
// released, the first it does not hold resolves the window, and takeUnheld hands the
// rest over with the window's sequences rewound to the first of them.
func TestWindowDrain(t *testing.T) {
	w := testWindow(1024, 4)
	addN(w, 0, 27, 0) // three full batches of 9
	w.seal()
	r := mustSend(t, w, ms)
	if len(r.batches) != 1 || r.version != 7 {
		t.Fatalf("first request: %d batches, version %d", len(r.batches), r.version)
	}
	w.onAnswer(r, wire.CodeNone, ok(99, -1, 0, 8), ms, ms)
	w.startDrain(8)
	if !w.draining() || w.resolvedDrain() {
		t.Fatal("not draining")
	}
	r2 := mustSend(t, w, 2*ms)
	r3 := mustSend(t, w, 2*ms)
	if len(r2.batches) != 1 || len(r3.batches) != 1 || r2.version != 7 {
		t.Fatalf("drain requests of %d and %d batches, version %d", len(r2.batches), len(r3.batches), r2.version)
	}
	// The partition switched at 18: it holds the second batch (acknowledged, durable).
	held := &wire.ProduceResponse{Version: 8, Session: 99, Checkpoint: 17, BaseOffset: 9, LastOffset: 17}
	if act := w.onAnswer(r2, wire.CodeNone, held, 2*ms, ms); act != actRefresh {
		t.Fatalf("acknowledged drain: action %d", act)
	}
	if len(w.q) != 1 || w.resolvedDrain() {
		t.Fatalf("after the acknowledgment: %d batches held, resolved %v", len(w.q), w.resolvedDrain())
	}
	refused := &wire.ProduceResponse{Version: 8, Session: 99, Checkpoint: 17, BaseOffset: -1, LastOffset: -1}
	w.onAnswer(r3, wire.CodeVersionMismatch, refused, 2*ms, ms)
	if !w.resolvedDrain() || w.nextRequest(never-1, &sendReq{}) {
		t.Fatalf("refused head: resolved %v", w.resolvedDrain())
	}
	addN(w, 100, 1, 3*ms) // a record added meanwhile (the producer does not know yet)
	left := w.takeUnheld(8)
	if len(left) != 2 || w.version != 8 || w.draining() || len(w.q) != 0 || w.open {
		t.Fatalf("takeUnheld: %d batches, version %d, draining %v", len(left), w.version, w.draining())
	}
	h, _ := batch.ParseHeader(left[0].buf)
	if h.BaseSequence != 18 || w.seq != 18 || h.Layout != 7 {
		t.Fatalf("first unheld batch at sequence %d (layout %d), window at %d", h.BaseSequence, h.Layout, w.seq)
	}
	addN(w, 0, 1, 4*ms)
	w.seal()
	r4 := mustSend(t, w, 10*ms)
	h, _ = batch.ParseHeader(r4.batches[0].buf)
	if r4.version != 8 || h.BaseSequence != 18 || h.Layout != 8 {
		t.Fatalf("after the drain: version %d, sequence %d, layout %d", r4.version, h.BaseSequence, h.Layout)
	}
}

// TestWindowDrainEmpty: a window that holds nothing is resolved at once; one whose
// batches all become durable is resolved then.
func TestWindowDrainEmpty(t *testing.T) {
	w := testWindow(1024, 4)
	w.startDrain(8)
	if !w.resolvedDrain() {
		t.Fatal("an empty window is not resolved")
	}
	w = testWindow(1024, 4)
	addSealed(w, 9)
	r := mustSend(t, w, ms)
	w.startDrain(8)
	w.onAnswer(r, wire.CodeNone, ok(99, 8, 0, 8), ms, ms)
	if !w.resolvedDrain() {
		t.Fatal("a window whose batches are durable is not resolved")
	}
}

// TestWindowNewerRefusalOfMany: a request of several batches refused by a newer
// partition does not resolve the window (the partition may hold the first ones): it is
// resent one batch per request.
func TestWindowNewerRefusalOfMany(t *testing.T) {
	sh := &winShared{batchBytes: 1024, requestBytes: 4096, maxInflight: 4, linger: 5 * ms, newPID: func() int64 { return 43 }}
	w := newWindow(sh, 0, 7, 42)
	addN(w, 0, 27, 0)
	w.seal()
	r := mustSend(t, w, ms)
	if len(r.batches) != 3 {
		t.Fatalf("%d batches in the request", len(r.batches))
	}
	w.onAnswer(r, wire.CodeVersionMismatch, &wire.ProduceResponse{Version: 8, Session: 99, Checkpoint: -1,
		BaseOffset: -1, LastOffset: -1}, ms, ms)
	if w.resolvedDrain() || !w.draining() {
		t.Fatal("resolved by a refusal of several batches")
	}
	if r2 := mustSend(t, w, 2*ms); len(r2.batches) != 1 || r2.ord != 1 {
		t.Fatalf("resend: %d batches from ord %d", len(r2.batches), r2.ord)
	}
}
