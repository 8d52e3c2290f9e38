package client

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"sluice/batch"
	"sluice/codec"
	"sluice/wire"
)

// TestProducerExpandModel runs a producer through random expansions against model
// partitions with the engine's rules (docs/cluster.md, "Expansion"): appends of the
// partition's version, a drain (an older version) answered from the producers'
// sequences, a switch that freezes appends until C covers them, new partitions placed
// late, requests pipelined and answers lost. In the end every record must be persisted
// exactly once, and read in a consumer's order (per logical id: layout by layout, the
// segment of its partition in that layout) each logical id's records must come in the
// order they were produced, every one in a segment of the layout it was routed by.
func TestProducerExpandModel(t *testing.T) {
	for seed := uint64(1); seed <= modelSeeds; seed++ {
		runProducerExpandModel(t, seed)
	}
}

// modelSeeds is how many random histories TestProducerExpandModel runs.
const modelSeeds = 200

type mSeq struct {
	first, last int32
	base, end   int64 // offsets of its first and last record
}

type mRec struct {
	logical uint16
	idx     int
	off     int64
	stamp   uint16
	batch   int64 // base offset of its batch
}

type mPart struct {
	version  uint32
	session  uint64
	placed   bool
	frozen   bool
	freezeAt int64
	next     int64
	ckpt     int64
	recs     []mRec
	seqs     map[int64][]mSeq
	switches map[uint32]int64 // version -> offset its records of that layout start at
}

type mInflight struct {
	req  sendReq
	bufs [][]byte
}

type expandModel struct {
	t        *testing.T
	rng      *rand.Rand
	p        *Producer
	clk      int64
	layouts  []wire.Layout // versions and counts; Switches unused
	parts    []*mPart
	inflight map[int][]mInflight
	produced map[uint16][]int
	idx      int
}

func (m *expandModel) cur() wire.Layout { return m.layouts[len(m.layouts)-1] }

// answer applies a produce request of version v to partition i and returns the answer.
func (m *expandModel) answer(i int, v uint32, sess uint64, bufs [][]byte) (wire.Code, *wire.ProduceResponse) {
	mp := m.parts[i]
	if !mp.placed {
		return wire.CodeNotOwner, nil
	}
	resp := func(base, last int64) *wire.ProduceResponse {
		return &wire.ProduceResponse{Version: mp.version, Session: mp.session, Checkpoint: mp.ckpt, BaseOffset: base, LastOffset: last}
	}
	if len(bufs) > 0 && v < mp.version { // a drain
		base, last := int64(-1), int64(-1)
		for _, b := range bufs {
			h, _ := batch.ParseHeader(b)
			switch verdict, s := mp.check(&h); verdict {
			case mDup:
				if base < 0 {
					base = s.base
				}
				last = s.end
			case mOld:
			default:
				return wire.CodeVersionMismatch, resp(-1, -1)
			}
		}
		return wire.CodeNone, resp(base, last)
	}
	if v != mp.version {
		return wire.CodeVersionMismatch, resp(-1, -1)
	}
	if sess != 0 && sess != mp.session {
		return wire.CodeSessionMismatch, resp(-1, -1)
	}
	base, last := int64(-1), int64(-1)
	pending := map[int64]int32{} // as the engine's validate: sequences continue within a request
	for _, b := range bufs {
		h, _ := batch.ParseHeader(b)
		if prev, ok := pending[h.ProducerID]; ok {
			if h.BaseSequence != prev+1 {
				m.t.Fatalf("partition %d: a request's batches do not continue: %d after %d", i, h.BaseSequence, prev)
			}
		} else if verdict, _ := mp.check(&h); verdict == mGap {
			// (a request sent after one that was refused: its answer is stale)
			return wire.CodeSequenceGap, nil
		}
		pending[h.ProducerID] = h.BaseSequence + int32(h.Count) - 1
	}
	for _, b := range bufs {
		h, _ := batch.ParseHeader(b)
		verdict, s := mp.check(&h)
		if verdict == mOld {
			continue
		}
		if verdict == mNew {
			if mp.frozen {
				return wire.CodeBusy, &wire.ProduceResponse{Version: mp.version, Session: mp.session, Checkpoint: mp.ckpt,
					BaseOffset: -1, LastOffset: -1, RetryAfterMs: 1}
			}
			s = mSeq{first: h.BaseSequence, last: h.BaseSequence + int32(h.Count) - 1, base: mp.next, end: mp.next + int64(h.Count) - 1}
			mp.seqs[h.ProducerID] = append(mp.seqs[h.ProducerID], s)
			var d codec.Decompressor
			var it batch.Iter
			if err := d.Iter(&it, b); err != nil {
				m.t.Fatal(err)
			}
			for it.Next() {
				r := it.Record()
				mp.recs = append(mp.recs, mRec{logical: r.Logical, idx: int(binary.LittleEndian.Uint64(r.Value)),
					off: mp.next, stamp: h.Layout, batch: s.base})
				mp.next++
			}
		}
		if base < 0 {
			base = s.base
		}
		last = s.end
	}
	return wire.CodeNone, resp(base, last)
}

// batchEnd returns the last offset of the last batch that ends at or below x (C covers
// whole batches), at least the current checkpoint.
func (mp *mPart) batchEnd(x int64) int64 {
	end := mp.ckpt
	for i, r := range mp.recs {
		if r.off > x {
			break
		}
		if i+1 == len(mp.recs) || mp.recs[i+1].batch != r.batch {
			end = max(end, r.off)
		}
	}
	return end
}

// mVerdict is the engine's verdict on a batch's sequence (engine/dedup.go).
type mVerdict int

const (
	mNew mVerdict = iota
	mDup
	mOld
	mGap
)

// check is the engine's verdict on a batch's sequence (dedup.go): it remembers the last
// 8 batches of each producer.
func (mp *mPart) check(h *batch.Header) (mVerdict, mSeq) {
	recent := mp.seqs[h.ProducerID]
	recent = recent[max(0, len(recent)-8):]
	first, last := h.BaseSequence, h.BaseSequence+int32(h.Count)-1
	switch {
	case len(recent) == 0 || first == recent[len(recent)-1].last+1:
		return mNew, mSeq{}
	case last < recent[0].first:
		return mOld, mSeq{}
	}
	for _, s := range recent {
		if s.first == first && s.last == last {
			return mDup, s
		}
	}
	return mGap, mSeq{}
}

// send hands out window i's next request, keeping a copy of its batches.
func (m *expandModel) send(i int) {
	w := m.p.mu.wins[i]
	r := sendReq{}
	if !w.nextRequest(m.clk, &r) {
		return
	}
	var bufs [][]byte
	for _, b := range r.batches {
		bufs = append(bufs, append([]byte(nil), b.buf...))
	}
	w.writeDone(&r)
	r.batches = nil
	m.inflight[i] = append(m.inflight[i], mInflight{r, bufs})
}

// deliver has partition i take window i's oldest request in flight; its answer is lost
// (the connection broke) with lost.
func (m *expandModel) deliver(i int, lost bool) {
	q := m.inflight[i]
	if len(q) == 0 {
		return
	}
	in := q[0]
	m.inflight[i] = q[1:]
	code, resp := m.answer(i, in.req.version, in.req.session, in.bufs)
	w := m.p.mu.wins[i]
	if lost {
		w.connLost(m.clk + ms)
		m.inflight[i] = nil
		return
	}
	if act := w.onAnswer(&in.req, code, resp, m.clk, ms); act == actFailed {
		m.t.Fatalf("window %d failed: %v", i, w.err)
	}
}

// poll answers window i's empty produce, if it sends one.
func (m *expandModel) poll(i int) {
	w := m.p.mu.wins[i]
	r := sendReq{}
	if !w.nextPoll(m.clk, &r) {
		return
	}
	code, resp := m.answer(i, r.version, r.session, nil)
	if !m.parts[i].placed {
		code, resp = wire.CodeNotOwner, nil
	}
	w.onPoll(code, resp, m.clk, ms)
}

// step advances the old partitions' switches and the checkpoints.
func (m *expandModel) switchStep() {
	v := m.cur().Version
	for _, mp := range m.parts {
		if mp.placed && m.rng.IntN(3) == 0 {
			mp.ckpt = mp.batchEnd(min(mp.next-1, mp.ckpt+int64(1+m.rng.IntN(100))))
		}
		if mp.version == v {
			continue
		}
		switch {
		case !mp.frozen && m.rng.IntN(4) == 0:
			mp.frozen, mp.freezeAt = true, mp.next
		case mp.frozen && mp.ckpt >= mp.freezeAt-1 && m.rng.IntN(2) == 0:
			mp.switches[v] = mp.freezeAt
			mp.version, mp.frozen = v, false
		}
	}
}

// reload moves partition j to another broker: what C does not cover is lost, the
// producers' sequences are rebuilt from what is left, and a partition that had not
// switched to the current layout records its load point as its switch (broker
// recordLoadSwitches).
func (m *expandModel) reload(j int) {
	mp := m.parts[j]
	if !mp.placed {
		return
	}
	keep := mp.recs[:0]
	for _, r := range mp.recs {
		if r.off <= mp.ckpt {
			keep = append(keep, r)
		}
	}
	mp.recs, mp.next = keep, mp.ckpt+1
	for pid, ss := range mp.seqs {
		var kept []mSeq
		for _, s := range ss {
			if s.end <= mp.ckpt {
				kept = append(kept, s)
			}
		}
		mp.seqs[pid] = kept
	}
	mp.session++
	mp.frozen = false
	if v := m.cur().Version; mp.version < v {
		mp.switches[v], mp.version = mp.next, v
	}
}

func (m *expandModel) allSwitched() bool {
	for _, mp := range m.parts {
		if mp.version != m.cur().Version {
			return false
		}
	}
	return true
}

func (m *expandModel) expand() {
	last := m.cur()
	n := last.Partitions + uint32(1+m.rng.IntN(4))
	m.layouts = append(m.layouts, wire.Layout{Version: last.Version + 1, Partitions: n})
	for range n - last.Partitions {
		m.parts = append(m.parts, &mPart{version: last.Version + 1, session: 1, ckpt: -1, seqs: map[int64][]mSeq{},
			switches: map[uint32]int64{}})
	}
}

func (m *expandModel) produce() {
	ids := []uint16{100, 20000, 33000, 40000, 50000, 65000, 12345, 30000}
	l := ids[m.rng.IntN(len(ids))]
	v := make([]byte, 8)
	binary.LittleEndian.PutUint64(v, uint64(m.idx))
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := m.p.Produce(ctx, &Record{UseLogical: true, Logical: l, Value: v}); err != nil {
		m.t.Fatalf("produce: %v", err)
	}
	m.produced[l] = append(m.produced[l], m.idx)
	m.idx++
}

func (m *expandModel) idle() bool {
	if m.p.mu.next != nil {
		return false
	}
	for i, w := range m.p.mu.wins {
		if len(w.q) > 0 || w.open || len(m.inflight[i]) > 0 {
			return false
		}
	}
	return true
}

func runProducerExpandModel(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 7))
	p := testProducer(t, 2)
	p.mu.refreshes = true // the model refreshes the metadata itself
	p.mu.sh.batchBytes = 200 + rng.IntN(400)
	p.mu.sh.requestBytes = (1 + rng.IntN(3)) * p.mu.sh.batchBytes
	p.mu.sh.maxInflight = 1 + rng.IntN(4)
	m := &expandModel{t: t, rng: rng, p: p, clk: int64(time.Hour), layouts: []wire.Layout{{Version: 7, Partitions: 2}},
		inflight: map[int][]mInflight{}, produced: map[uint16][]int{}}
	for range 2 {
		m.parts = append(m.parts, &mPart{version: 7, session: 1, placed: true, ckpt: -1, seqs: map[int64][]mSeq{}, switches: map[uint32]int64{}})
	}
	step := func(producing bool) {
		m.clk += ms
		op := rng.IntN(100)
		if producing && op < 30 {
			p.mu.Lock()
			ready := p.mu.next == nil
			p.mu.Unlock()
			if ready {
				m.produce()
			}
			return
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		i := rng.IntN(len(p.mu.wins))
		switch {
		case op < 50:
			m.send(i)
		case op < 75:
			m.deliver(i, rng.IntN(20) == 0)
		case op < 80:
			m.poll(i)
		case op < 88:
			m.switchStep()
		case op < 90:
			if rng.IntN(3) == 0 {
				m.reload(rng.IntN(len(m.parts)))
			}
		case op < 92:
			for _, mp := range m.parts {
				if !mp.placed && rng.IntN(2) == 0 {
					mp.placed = true
				}
			}
		case op < 96:
			l := m.cur()
			p.applyTopicLocked(testTopic(l.Version, int(l.Partitions)))
		default:
			if producing && m.allSwitched() && len(m.layouts) < 5 && rng.IntN(3) == 0 {
				m.expand()
			}
		}
		p.finishExpansionLocked()
		p.notifyLocked()
	}
	for range 3000 {
		step(true)
	}
	for n := 0; ; n++ {
		for _, mp := range m.parts {
			mp.placed = true
		}
		p.mu.Lock()
		done := m.idle() && m.allSwitched()
		p.mu.Unlock()
		if done {
			break
		}
		if n > 200000 {
			p.mu.Lock()
			var st []string
			for i, w := range p.mu.wins {
				st = append(st, fmt.Sprintf("w%d v%d newer %d refused %v q %d acked %d sent %d open %v err %v inflight %d",
					i, w.version, w.newer, w.refusedFrom, len(w.q), w.acked, w.sent, w.open, w.err, len(m.inflight[i])))
			}
			p.mu.Unlock()
			t.Fatalf("seed %d: the producer does not settle: next %v, windows %v", seed, p.mu.next, st)
		}
		step(false)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := p.WaitPersisted(ctx); err != nil {
		t.Fatalf("seed %d: WaitPersisted with nothing held: %v", seed, err)
	}
	m.check(seed)
}

// check reads every logical id as a consumer does and compares with the produce order.
func (m *expandModel) check(seed uint64) {
	t := m.t
	// segment returns the layout index of partition j's segment holding offset x.
	first := func(j int) int {
		for k, l := range m.layouts {
			if j < int(l.Partitions) {
				return k
			}
		}
		return len(m.layouts)
	}
	segment := func(j int, x int64) int {
		k := first(j)
		for k+1 < len(m.layouts) {
			s, ok := m.parts[j].switches[m.layouts[k+1].Version]
			if !ok || x < s {
				break
			}
			k++
		}
		return k
	}
	read := map[uint16][][2]int{} // per logical id: (layout, idx) in consumer order within a partition segment
	for j, mp := range m.parts {
		for _, r := range mp.recs {
			k := segment(j, r.off)
			l := m.layouts[k]
			if r.stamp != uint16(l.Version) {
				t.Fatalf("seed %d: partition %d offset %d (record %d of logical %d) is stamped %d in a segment of version %d",
					seed, j, r.off, r.idx, r.logical, r.stamp, l.Version)
			}
			if want := wire.PartitionOf(r.logical, int(l.Partitions)); want != j {
				t.Fatalf("seed %d: record %d of logical %d in partition %d, its layout %d routes it to %d",
					seed, r.idx, r.logical, j, l.Version, want)
			}
			read[r.logical] = append(read[r.logical], [2]int{k, r.idx})
		}
	}
	for l, want := range m.produced {
		got := read[l]
		// Within one layout a logical id lives in one partition, in offset order; layouts come in order.
		sorted := append([][2]int(nil), got...)
		for i := 1; i < len(sorted); i++ {
			for j := i; j > 0 && sorted[j][0] < sorted[j-1][0]; j-- {
				sorted[j], sorted[j-1] = sorted[j-1], sorted[j]
			}
		}
		var idx []int
		for _, g := range sorted {
			idx = append(idx, g[1])
		}
		if fmt.Sprint(idx) != fmt.Sprint(want) {
			t.Fatalf("seed %d: logical %d read as %v, produced %v", seed, l, idx, want)
		}
	}
}
