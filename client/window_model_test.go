package client

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"sluice/batch"
	"sluice/wire"
)

// modelBroker is a simple model of one partition on a broker: an append-only log of
// batches with the session, the checkpoint and the producer dedup rules of the engine
// (the last 8 batches per producer are remembered with their offsets).
type modelBroker struct {
	rnd     *rand.Rand
	session uint64
	log     []modelBatch
	recent  []modelBatch // the producer's last 8 batches (the model has one producer)
	next    int64
	ckpt    int64
}

type modelBatch struct {
	pid         int64
	first, last int32 // sequences
	base        int64
	data        []byte
}

// produce applies a request and returns the answer.
func (m *modelBroker) produce(s uint64, batches []byte) (wire.Code, *wire.ProduceResponse) {
	resp := &wire.ProduceResponse{Version: 7, Session: m.session, Checkpoint: m.ckpt, BaseOffset: -1, LastOffset: -1}
	if s != 0 && s != m.session {
		return wire.CodeSessionMismatch, resp
	}
	if m.rnd.IntN(10) == 0 { // a foreign producer appended records in between
		m.log = append(m.log, modelBatch{base: m.next})
		m.next += int64(1 + m.rnd.IntN(5))
	}
	for rest := batches; len(rest) > 0; {
		h, _ := batch.ParseHeader(rest)
		b := rest[:h.Size()]
		rest = rest[h.Size():]
		if m.rnd.IntN(15) == 0 { // busy: the batches before this one were appended
			resp.RetryAfterMs = uint32(1 + m.rnd.IntN(3))
			return wire.CodeBusy, resp
		}
		base, last, code := m.appendOne(&h, b)
		if code != wire.CodeNone {
			return code, &wire.ProduceResponse{Version: 7, Session: m.session, Checkpoint: m.ckpt, BaseOffset: -1, LastOffset: -1}
		}
		if base >= 0 && resp.BaseOffset < 0 {
			resp.BaseOffset = base
		}
		if last >= 0 {
			resp.LastOffset = last
		}
	}
	return wire.CodeNone, resp
}

// appendOne appends a batch unless the producer's sequences say it is a duplicate.
func (m *modelBroker) appendOne(h *batch.Header, b []byte) (base, last int64, code wire.Code) {
	first, lastSeq := h.BaseSequence, h.BaseSequence+int32(h.Count)-1
	recent := m.recent
	if n := len(recent); n > 0 && first != recent[n-1].last+1 {
		for _, r := range recent {
			if r.first == first && r.last == lastSeq {
				return r.base, r.base + int64(lastSeq-first), wire.CodeNone
			}
		}
		if lastSeq < recent[0].first {
			return -1, -1, wire.CodeNone
		}
		return -1, -1, wire.CodeSequenceGap
	}
	mb := modelBatch{pid: h.ProducerID, first: first, last: lastSeq, base: m.next, data: append([]byte(nil), b...)}
	m.log = append(m.log, mb)
	m.remember(mb)
	m.next += int64(h.Count)
	return m.next - int64(h.Count), m.next - 1, wire.CodeNone
}

// restart keeps what is durable and a random part of the rest (a crash that kept some of
// the page cache), and starts a new session whose checkpoint covers what was kept.
func (m *modelBroker) restart() {
	keep := 0
	for i, b := range m.log {
		if b.base <= m.ckpt {
			keep = i + 1
		}
	}
	keep += m.rnd.IntN(len(m.log) - keep + 1)
	m.log = m.log[:keep]
	m.next = m.ckpt + 1
	if keep > 0 {
		lb := m.log[keep-1]
		m.next = max(m.next, lb.base+int64(lb.last-lb.first)+1)
		if lb.pid == 0 {
			m.next = lb.base + 5 // a foreign batch's size is not kept; allow a gap of offsets
		}
	}
	m.ckpt = m.next - 1
	m.session++
	m.recent = nil
	for _, b := range m.log {
		m.remember(b)
	}
}

func (m *modelBroker) remember(b modelBatch) {
	if b.pid == 0 {
		return
	}
	if len(m.recent) == 8 {
		m.recent = append(m.recent[:0], m.recent[1:]...)
	}
	m.recent = append(m.recent, b)
}

// ids returns the record ids of producer pid in log order.
func (m *modelBroker) ids(t *testing.T, pid int64) []uint64 {
	var out []uint64
	var it batch.Iter
	for _, b := range m.log {
		if b.pid != pid {
			continue
		}
		if err := it.Reset(b.data); err != nil {
			t.Fatal(err)
		}
		for it.Next() {
			out = append(out, binary.LittleEndian.Uint64(it.Record().Value))
		}
	}
	return out
}

// queued is a request on its way to the model broker, or its answer on the way back.
type queued struct {
	req  sendReq
	data []byte
	code wire.Code
	resp *wire.ProduceResponse
}

// modelRun is one random run: a window, the model broker, and the two directions of a
// connection between them.
type modelRun struct {
	t                  *testing.T
	seed               uint64
	rnd                *rand.Rand
	w                  *window
	m                  *modelBroker
	toBroker, toClient []queued
	now                int64
	produced           uint64
	seqOf              map[uint64]int32 // base sequence of each batch, by ord
	reported           map[uint64]bool  // batches checked after their release
}

// TestWindowModel drives a window against the model broker with random records,
// pipelining, busy answers, lost connections and broker restarts, then checks that every
// record is in the log exactly once, in order, and that nothing was reported durable
// that the log does not hold.
func TestWindowModel(t *testing.T) {
	seeds := uint64(400)
	if raceEnabled || testing.Short() {
		seeds = 60 // the race detector makes each run ten times slower
	}
	for seed := uint64(1); seed <= seeds; seed++ {
		runWindowModel(t, seed)
	}
}

func runWindowModel(t *testing.T, seed uint64) {
	rnd := rand.New(rand.NewPCG(seed, 7))
	r := &modelRun{t: t, seed: seed, rnd: rnd, m: &modelBroker{rnd: rnd, session: 100, ckpt: -1},
		w: testWindow(600+rnd.IntN(800), 1+rnd.IntN(6)), seqOf: map[uint64]int32{}, reported: map[uint64]bool{}}
	r.w.sh.requestBytes = r.w.sh.batchBytes * (1 + rnd.IntN(3))
	steps := 2000 + rnd.IntN(2000)
	for step := 0; step < steps*10; step++ {
		faults := step < steps // then only drain
		if !faults && !r.w.open && len(r.w.q) == 0 {
			break
		}
		r.now += int64(rnd.IntN(2)) * ms
		r.step(rnd.IntN(100), faults)
		r.checkDurable()
	}
	r.checkLog()
}

// step does one random thing: op picks it, faults allows new records and failures.
func (r *modelRun) step(op int, faults bool) {
	w, m := r.w, r.m
	switch {
	case op < 25 && faults:
		for n := r.rnd.IntN(10); n > 0; n-- {
			r.produced++
			v := binary.LittleEndian.AppendUint64(make([]byte, 0, 8+r.rnd.IntN(200)), r.produced)
			w.add(&Record{Value: v[:cap(v)]}, 0, r.now/ms, r.now)
		}
	case op < 45:
		r.send()
	case op < 65 && len(r.toBroker) > 0:
		q := r.toBroker[0]
		r.toBroker = r.toBroker[1:]
		q.code, q.resp = m.produce(q.req.session, q.data)
		r.toClient = append(r.toClient, q)
	case op < 85 && len(r.toClient) > 0:
		q := r.toClient[0]
		r.toClient = r.toClient[1:]
		if w.onAnswer(&q.req, q.code, q.resp, r.now, ms) == actFailed {
			r.t.Fatalf("seed %d: window failed: %v", r.seed, w.err)
		}
	case op < 90:
		m.ckpt = m.next - 1 // an fsync, and a poll
		var p sendReq
		if w.nextPoll(r.now, &p) {
			w.onPoll(wire.CodeNone, &wire.ProduceResponse{Version: 7, Session: m.session, Checkpoint: m.ckpt}, 0, 0)
		}
	case op < 95 && faults:
		r.toBroker, r.toClient = nil, nil
		if op >= 93 {
			m.restart()
		}
		w.connLost(r.now + ms)
		w.pollLost()
	}
}

// send queues every request the window hands out, with a copy of its bytes.
func (r *modelRun) send() {
	var req sendReq
	for r.w.nextRequest(r.now, &req) {
		q := queued{req: req}
		q.req.batches = append([]*pbatch(nil), req.batches...)
		for _, b := range req.batches {
			q.data = append(q.data, b.buf...)
			h, _ := batch.ParseHeader(b.buf)
			r.seqOf[b.ord] = h.BaseSequence
		}
		r.w.writeDone(&req)
		r.toBroker = append(r.toBroker, q)
	}
}

// checkLog checks, once drained, that the log holds every record once, in order.
func (r *modelRun) checkLog() {
	if r.w.open || len(r.w.q) > 0 {
		r.t.Fatalf("seed %d: not drained: open %v, %d batches held", r.seed, r.w.open, len(r.w.q))
	}
	ids := r.m.ids(r.t, r.w.pid)
	if uint64(len(ids)) != r.produced {
		r.t.Fatalf("seed %d: %d records in the log, %d produced", r.seed, len(ids), r.produced)
	}
	for i, id := range ids {
		if id != uint64(i+1) {
			r.t.Fatalf("seed %d: record %d of the log is %d", r.seed, i, id)
		}
	}
}

// checkDurable checks that every batch the window released as durable is in the log
// below the checkpoint.
func (r *modelRun) checkDurable() {
	for ord := r.w.durableOrd; ord > 0 && !r.reported[ord]; ord-- {
		r.reported[ord] = true
		found := false
		for i := len(r.m.log) - 1; i >= 0 && !found; i-- {
			b := r.m.log[i]
			found = b.pid == r.w.pid && b.first == r.seqOf[ord] && b.base <= r.m.ckpt
		}
		if !found {
			r.t.Fatalf("seed %d: batch %d reported durable, not in the log", r.seed, ord)
		}
	}
}
