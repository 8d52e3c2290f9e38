package memarena

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
	"unsafe"
)

var modelSeed = flag.Uint64("memarena.seed", 0, "seed of TestModel (0: from the clock)")

// TestModel runs random appends, reads, checkpoint advances, segment-roll
// padding (Skip), persister ranges (Range), block cache operations, holds and
// releases against a simple model, over thousands of owners in an arena far
// smaller than the data, and checks after every step that no pending batch
// was reclaimed, that accounting adds up exactly, that every read from
// memory returns the right bytes, and that a range is refused exactly when
// one of its bytes is not batch data in memory.
func TestModel(t *testing.T) {
	seed := *modelSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	owners, steps := 2000, 8000
	switch {
	case testing.Short():
		owners, steps = 300, 2000
	case raceEnabled: // single goroutine: the race detector adds nothing but time
		steps = 3000
	}
	for _, min := range []int64{0, 8 * KiB} {
		t.Run(fmt.Sprintf("partition_min=%s", FormatSize(min)), func(t *testing.T) {
			t.Logf("seed %d (rerun with -memarena.seed=%d)", seed, seed)
			m := newModel(t, seed, owners, min)
			for m.step = 0; m.step < steps; m.step++ {
				m.randomOp()
				m.check()
			}
			m.finish()
		})
	}
}

type modelBatch struct {
	base, last int64
	pos        int64 // stream position
	n          int
}

type modelWB struct {
	w       *WriteBuffer
	id      int // distinguishes the data of successive buffers in one slot
	batches []modelBatch
	next    int64
	tail    int64 // stream position of the next batch
	durable int64
	pending int64 // bytes of batches past durable
}

type modelHold struct {
	spans []Span
	want  []byte
}

type blockRef struct {
	cache int
	file  uint64
	block int64
}

type model struct {
	t       *testing.T
	rng     *rand.Rand
	a       *Arena
	step    int
	wbs     []*modelWB
	nextID  int
	caches  []*BlockCache
	blocks  map[blockRef]bool // put since the file was last invalidated
	holds   []modelHold
	pending int64
	counts  struct{ skips, ranges, rangeMisses, gapReads int }
}

func newModel(t *testing.T, seed uint64, owners int, partitionMin int64) *model {
	a := newTestArena(t, Config{Size: 2 * MiB, ChunkSize: 4 * KiB, SlabSize: 16 * KiB,
		PartitionMin: partitionMin, PartitionMax: 256 * KiB})
	m := &model{t: t, rng: rand.New(rand.NewPCG(seed, uint64(partitionMin))), a: a, blocks: map[blockRef]bool{}}
	for range owners {
		m.wbs = append(m.wbs, m.newWB())
	}
	for range 2 {
		c, err := a.NewBlockCache(512 * KiB)
		if err != nil {
			t.Fatal(err)
		}
		m.caches = append(m.caches, c)
	}
	return m
}

// newWB starts a buffer at a random offset and a random stream position:
// the active segment's file position, which is any number.
func (m *model) newWB() *modelWB {
	next, pos := m.rng.Int64N(1<<40), m.rng.Int64N(1<<30)
	if m.rng.IntN(4) == 0 {
		pos = 0
	}
	w, err := m.a.NewWriteBufferAt(next, pos)
	if err != nil {
		m.t.Fatal(err)
	}
	m.nextID++
	return &modelWB{w: w, id: m.nextID, next: next, tail: pos, durable: next - 1}
}

func (m *model) fatalf(format string, args ...any) {
	m.t.Helper()
	m.t.Fatalf("step %d: %s", m.step, fmt.Sprintf(format, args...))
}

func (m *model) batchData(o *modelWB, b modelBatch) []byte {
	return pattern(b.n, uint64(o.id)<<40^uint64(b.base))
}

func blockData(r blockRef) []byte {
	n := 1 + int(r.file*7919+uint64(r.block)*104729)%4096
	return pattern(n, r.file<<32^uint64(r.block)^uint64(r.cache)<<60)
}

func (m *model) randomOp() {
	if m.step%1500 == 1499 { // a group commit makes everything durable
		for _, o := range m.wbs {
			m.setDurable(o, o.next-1)
		}
		return
	}
	switch p := m.rng.IntN(100); {
	case p < 40:
		m.appendOp()
	case p < 60:
		m.readOp()
	case p < 63:
		m.skipOp()
	case p < 67:
		m.rangeOp()
	case p < 80:
		m.durableOp()
	case p < 85:
		m.releaseOp()
	case p < 90:
		m.putOp()
	case p < 95:
		m.getOp()
	case p < 96:
		m.invalidateOp()
	case p < 97:
		m.a.Reclaim()
	case p < 98:
		m.replaceOp()
	default:
		m.allocOp()
	}
}

// pickWB favours a few hot buffers, as real traffic does.
func (m *model) pickWB() *modelWB {
	if m.rng.IntN(5) > 0 {
		return m.wbs[m.rng.IntN(20)]
	}
	return m.wbs[m.rng.IntN(len(m.wbs))]
}

func (m *model) appendOp() {
	o := m.pickWB()
	b := modelBatch{base: o.next, pos: o.tail, n: 1 + m.rng.IntN(12*1024)}
	b.last = b.base + m.rng.Int64N(10)
	err := o.w.Append(m.batchData(o, b), b.base, b.last)
	switch {
	case err == nil:
		o.batches = append(o.batches, b)
		o.next = b.last + 1
		o.tail += int64(b.n)
		o.pending += int64(b.n)
		m.pending += int64(b.n)
	case errors.Is(err, ErrPartitionFull):
		if o.w.reclaimableLocked() {
			m.fatalf("ErrPartitionFull with a reclaimable chunk")
		}
	case errors.Is(err, ErrFull):
		m.checkNothingReclaimable(o)
	default:
		m.fatalf("Append: %v", err)
	}
}

// checkNothingReclaimable verifies that an ErrFull was deserved.
func (m *model) checkNothingReclaimable(failed *modelWB) {
	for _, o := range m.wbs {
		w := &o.w.mu
		if o != failed && o.w.reclaimableLocked() || o == failed && w.chain.len() >= 2 && o.w.reclaimableLocked() {
			inHeap := false
			for _, e := range m.a.rc.heap {
				inHeap = inHeap || e.o == owner(o.w)
			}
			m.fatalf("ErrFull while a write buffer (next %d, failed %v, queued %v, in heap %v, chain %d, head %d durable %d tail %d bytes %d) had a reclaimable chunk; heap %d",
				o.next, o == failed, o.w.st.queued.Load(), inHeap, w.chain.len(), w.headPos, w.durablePos, w.tailPos, w.bytes, len(m.a.rc.heap))
		}
	}
	for _, c := range m.caches {
		if c.mu.lru >= 0 {
			m.fatalf("ErrFull while a block cache held blocks")
		}
	}
}

func (m *model) readOp() {
	o := m.pickWB()
	if len(o.batches) == 0 {
		return
	}
	first := o.batches[0].base
	if m.rng.IntN(4) > 0 { // most consumers read near the tail
		first = o.batches[max(0, len(o.batches)-8)].base
	}
	off := first + m.rng.Int64N(o.next-first)
	maxBytes := m.rng.IntN(40 * 1024)
	spans, next, err := o.w.ReadNext(off, maxBytes, nil)
	if errors.Is(err, ErrMiss) {
		if off > o.durable {
			m.fatalf("Read(%d) missed a pending offset (durable %d)", off, o.durable)
		}
		return
	}
	if err != nil {
		m.fatalf("Read(%d): %v", off, err)
	}
	want := m.wantRead(o, off, maxBytes)
	if len(joinSpans(spans)) > 0 && len(spans) > 1 && m.readCrossesPadding(o, off, len(want)) {
		m.counts.gapReads++
	}
	if got := joinSpans(spans); !bytes.Equal(got, want) {
		m.fatalf("Read(%d, %d) = %d bytes; want %d", off, maxBytes, len(got), len(want))
	}
	if wantNext := m.nextAfterRead(o, off, len(want)); next != wantNext {
		m.fatalf("ReadNext(%d, %d): next offset %d, want %d", off, maxBytes, next, wantNext)
	}
	if m.rng.IntN(3) == 0 && len(m.holds) < 50 {
		m.holds = append(m.holds, modelHold{spans: spans, want: want})
		return
	}
	ReleaseAll(spans)
}

// nextAfterRead returns the offset after the batches of a read of n bytes from offset
// off: the last one's last offset + 1.
func (m *model) nextAfterRead(o *modelWB, off int64, n int) int64 {
	next := off
	for i := range o.batches {
		b := &o.batches[i]
		if b.last < off {
			continue
		}
		if n <= 0 {
			break
		}
		next, n = b.last+1, n-b.n
	}
	return next
}

// readCrossesPadding reports whether a read of n bytes of batches from offset
// off passes padding.
func (m *model) readCrossesPadding(o *modelWB, off int64, n int) bool {
	var prev *modelBatch
	for i := range o.batches {
		b := &o.batches[i]
		if b.last < off {
			continue
		}
		if n <= 0 {
			return false
		}
		if prev != nil && prev.pos+int64(prev.n) != b.pos {
			return true
		}
		prev, n = b, n-b.n
	}
	return false
}

func (m *model) wantRead(o *modelWB, off int64, maxBytes int) []byte {
	var out []byte
	for _, b := range o.batches {
		if b.last < off {
			continue
		}
		if len(out) > 0 && len(out)+b.n > maxBytes {
			break
		}
		out = append(out, m.batchData(o, b)...)
	}
	return out
}

// skipOp pads the stream as a segment roll does: up to the next multiple of
// 4096 mostly, by any amount up to a chunk sometimes, and now and then by a
// forbidden amount.
func (m *model) skipOp() {
	o := m.pickWB()
	cs := m.a.chunkSize
	to := (o.tail + 4095) &^ 4095
	switch p := m.rng.IntN(10); {
	case p < 3:
		to = o.tail + m.rng.Int64N(cs+1)
	case p == 3:
		to = o.tail + cs + 1 + m.rng.Int64N(cs)
	case p == 4 && o.tail > 0:
		to = o.tail - 1 - m.rng.Int64N(o.tail)
	}
	err := o.w.Skip(to)
	if to < o.tail || to > o.tail+cs {
		if !errors.Is(err, ErrInvalid) {
			m.fatalf("Skip(%d) with the tail at %d: %v; want ErrInvalid", to, o.tail, err)
		}
		return
	}
	if err != nil {
		m.fatalf("Skip(%d): %v", to, err)
	}
	m.counts.skips++
	o.tail = to
}

// rangeOp holds a range of the stream as the persister does: mostly within
// the batches past the checkpoint, sometimes anywhere near the data held.
// The model says which batches are in memory (those from FirstOffset on), so
// it knows whether the range must succeed and with which bytes.
func (m *model) rangeOp() {
	o := m.pickWB()
	if len(o.batches) == 0 {
		return
	}
	lo := o.batches[0].pos
	if m.rng.IntN(2) == 0 {
		lo = o.tail
		for i := len(o.batches) - 1; i >= 0 && o.batches[i].last > o.durable; i-- {
			lo = o.batches[i].pos
		}
	} else if first := o.w.Stats().FirstOffset; first >= 0 && m.rng.IntN(2) == 0 {
		lo = o.batches[m.firstHeld(o, first)].pos - m.rng.Int64N(3)
	}
	from := lo + m.rng.Int64N(o.tail-lo+1)
	to := from + m.rng.Int64N(o.tail+2-from)
	if m.rng.IntN(3) == 0 { // the persister's usual ask: whole batches
		from, to = m.snapToBatches(o, from, to)
	}
	spans, err := o.w.Range(from, to, nil)
	want, ok := m.wantRange(o, from, to)
	switch {
	case !ok && !errors.Is(err, ErrMiss):
		m.fatalf("Range(%d, %d) = %v; want ErrMiss (tail %d)", from, to, err, o.tail)
	case !ok:
		m.counts.rangeMisses++
		return
	case err != nil:
		m.fatalf("Range(%d, %d): %v", from, to, err)
	}
	m.counts.ranges++
	m.checkRangeSpans(from, to, spans)
	if got := joinSpans(spans); !bytes.Equal(got, want) {
		m.fatalf("Range(%d, %d) = %d bytes, not the batch bytes (%d)", from, to, len(got), len(want))
	}
	m.holdOrRelease(spans, want)
}

// firstHeld returns the index of the batch with base offset first.
func (m *model) firstHeld(o *modelWB, first int64) int {
	for i, b := range o.batches {
		if b.base == first {
			return i
		}
	}
	m.fatalf("FirstOffset %d is no batch's base", first)
	return 0
}

// snapToBatches moves from to the start of the batch holding it and to to
// the end of the batch holding it (when they hold one).
func (m *model) snapToBatches(o *modelWB, from, to int64) (int64, int64) {
	for _, b := range o.batches {
		end := b.pos + int64(b.n)
		if b.pos <= from && from < end {
			from = b.pos
		}
		if b.pos < to && to < end {
			to = end
		}
	}
	return from, max(from, to)
}

// wantRange returns the bytes [from, to) of the stream and whether the
// buffer holds them all as data: every byte in a batch still in memory.
func (m *model) wantRange(o *modelWB, from, to int64) ([]byte, bool) {
	if from == to {
		return nil, true
	}
	first := o.w.Stats().FirstOffset
	if first < 0 {
		return nil, false
	}
	var out []byte
	pos := from
	for _, b := range o.batches[m.firstHeld(o, first):] {
		end := b.pos + int64(b.n)
		if end <= pos {
			continue
		}
		if b.pos > pos {
			return nil, false // padding, or older than the first batch held
		}
		data := m.batchData(o, b)[pos-b.pos : min(end, to)-b.pos]
		out = append(out, data...)
		if pos = min(end, to); pos == to {
			return out, true
		}
	}
	return nil, false // past the last batch
}

// checkRangeSpans checks the pieces' layout: each starts at a chunk boundary
// (or at from), and one at a multiple of 4096 starts at an aligned address.
func (m *model) checkRangeSpans(from, to int64, spans []Span) {
	pos := from
	for i := range spans {
		s := &spans[i]
		if i > 0 && pos%m.a.chunkSize != 0 {
			m.fatalf("Range(%d, %d): piece %d starts at %d, inside a chunk", from, to, i, pos)
		}
		if addr := uintptr(unsafe.Pointer(unsafe.SliceData(s.Bytes()))); uintptr(pos)%4096 != addr%4096 {
			m.fatalf("Range(%d, %d): piece %d at position %d lies at address %#x", from, to, i, pos, addr)
		}
		pos += int64(s.Len())
	}
	if pos != to {
		m.fatalf("Range(%d, %d): pieces end at %d", from, to, pos)
	}
}

func (m *model) durableOp() {
	o := m.pickWB()
	if o.next-1 <= o.durable {
		return
	}
	m.setDurable(o, o.durable+1+m.rng.Int64N(o.next-1-o.durable))
}

func (m *model) setDurable(o *modelWB, d int64) {
	if d <= o.durable {
		return
	}
	o.w.SetDurable(d)
	for _, b := range o.batches {
		if b.last > o.durable && b.last <= d {
			o.pending -= int64(b.n)
			m.pending -= int64(b.n)
		}
	}
	o.durable = d
}

func (m *model) releaseOp() {
	if len(m.holds) == 0 {
		return
	}
	i := m.rng.IntN(len(m.holds))
	h := m.holds[i]
	if got := joinSpans(h.spans); !bytes.Equal(got, h.want) {
		m.fatalf("held spans changed before release")
	}
	ReleaseAll(h.spans)
	m.holds[i] = m.holds[len(m.holds)-1]
	m.holds = m.holds[:len(m.holds)-1]
}

func (m *model) randomBlock() blockRef {
	return blockRef{cache: m.rng.IntN(len(m.caches)), file: uint64(m.rng.IntN(8)), block: m.rng.Int64N(16)}
}

func (m *model) putOp() {
	r := m.randomBlock()
	if err := m.caches[r.cache].Put(r.file, r.block, blockData(r)); err != nil {
		if !errors.Is(err, ErrFull) {
			m.fatalf("Put: %v", err)
		}
		m.checkNothingReclaimable(nil)
		return
	}
	m.blocks[r] = true
}

func (m *model) getOp() {
	r := m.randomBlock()
	s, ok := m.caches[r.cache].Get(r.file, r.block)
	if !ok {
		return
	}
	if !m.blocks[r] {
		m.fatalf("Get(%v) hit a block never put or invalidated", r)
	}
	if !bytes.Equal(s.Bytes(), blockData(r)) {
		m.fatalf("Get(%v) returned other bytes", r)
	}
	m.holdOrRelease([]Span{s}, blockData(r))
}

func (m *model) holdOrRelease(spans []Span, want []byte) {
	if m.rng.IntN(3) == 0 && len(m.holds) < 50 {
		m.holds = append(m.holds, modelHold{spans: spans, want: want})
		return
	}
	ReleaseAll(spans)
}

func (m *model) invalidateOp() {
	r := m.randomBlock()
	m.caches[r.cache].Invalidate(r.file)
	for k := range m.blocks {
		if k.cache == r.cache && k.file == r.file {
			delete(m.blocks, k)
		}
	}
}

func (m *model) replaceOp() {
	i := m.rng.IntN(len(m.wbs))
	m.wbs[i].w.Close()
	m.pending -= m.wbs[i].pending
	m.wbs[i] = m.newWB()
}

func (m *model) allocOp() {
	s, err := m.a.Alloc()
	if err != nil {
		if !errors.Is(err, ErrFull) {
			m.fatalf("Alloc: %v", err)
		}
		m.checkNothingReclaimable(nil)
		return
	}
	fillPattern(s.Bytes(), uint64(m.step))
	m.holdOrRelease([]Span{s}, pattern(s.Len(), uint64(m.step)))
}

// check verifies, after every step, that each buffer still holds all its
// pending batches and that every chunk's reference count and every byte
// count add up.
func (m *model) check() {
	m.t.Helper()
	refs := make([]int32, m.a.nChunks)
	var wbBytes, bcBytes int64
	for _, o := range m.wbs {
		wbBytes += m.checkWB(o, refs)
	}
	for _, c := range m.caches {
		for i := c.mu.lru; i >= 0; i = c.mu.entries[i].next {
			refs[c.mu.entries[i].chunk]++
		}
		bcBytes += c.mu.bytes
	}
	for _, h := range m.holds {
		for i := range h.spans {
			refs[h.spans[i].Chunk()]++
		}
	}
	m.checkRefs(refs)
	st := m.a.Stats()
	if st.WriteBufferBytes != wbBytes || st.BlockCacheBytes != bcBytes || st.PendingBytes != m.pending {
		m.fatalf("stats %+v; want write buffers %d, caches %d, pending %d", st, wbBytes, bcBytes, m.pending)
	}
}

func (m *model) checkWB(o *modelWB, refs []int32) int64 {
	w := &o.w.mu
	if w.dataEnd-w.dataDur != o.pending || w.tailPos != o.tail {
		m.fatalf("buffer holds %d pending bytes, tail at %d; want %d, %d", w.dataEnd-w.dataDur, w.tailPos, o.pending, o.tail)
	}
	if o.durable < o.next-1 { // the first pending batch must still be in memory
		g, j := w.idx.first()
		if w.idx.empty() {
			m.fatalf("pending batches from %d reclaimed", o.durable+1)
		}
		if base, _, _, _ := w.idx.batch(g, j); base > o.durable+1 {
			m.fatalf("pending batches from %d reclaimed: memory starts at %d", o.durable+1, base)
		}
	}
	for i := range int64(w.chain.len()) {
		refs[w.chain.at(i)]++
	}
	return w.bytes
}

func (m *model) checkRefs(want []int32) {
	var used int64
	mapped := min(int64(len(want)), int64(m.a.mapped.Load())<<m.a.slabShift)
	for id := range uint32(mapped) {
		meta := m.a.meta(id)
		got, inUse := meta.refs.Load(), meta.gen&1 == 1
		if want[id] > 0 {
			used++
		}
		switch {
		case want[id] > 0 && (got != want[id] || !inUse):
			m.fatalf("chunk %d has %d references (in use %v); want %d", id, got, inUse, want[id])
		case want[id] == 0 && (inUse || got > 1):
			m.fatalf("unreferenced chunk %d is in use (%d references)", id, got)
		}
	}
	if u := m.a.usedChunks(); u != used {
		m.fatalf("arena counts %d chunks in use; want %d", u, used)
	}
}

func (m *model) finish() {
	for _, h := range m.holds {
		ReleaseAll(h.spans)
	}
	for _, o := range m.wbs {
		o.w.Close()
	}
	for _, c := range m.caches {
		c.Close()
	}
	st := m.a.Stats()
	m.t.Logf("reclaimed %s, read hit ratio %.3f, cache hit ratio %.3f, %d ErrFull, %d passes",
		FormatSize(st.ReclaimedBytes), st.ReadHitRatio(), st.CacheHitRatio(), st.FullErrors, st.ReclaimPasses)
	c := m.counts
	m.t.Logf("%d skips, %d reads across padding, %d ranges held, %d refused", c.skips, c.gapReads, c.ranges, c.rangeMisses)
	if !testing.Short() && (c.skips == 0 || c.gapReads == 0 || c.ranges == 0 || c.rangeMisses == 0) {
		m.fatalf("the run did not exercise padding and ranges: %+v", c)
	}
	if st.UsedBytes != 0 || st.PendingBytes != 0 {
		m.fatalf("after closing everything: %+v", st)
	}
}
