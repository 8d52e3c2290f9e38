package client

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
	"unsafe"

	"sluice/batch"
)

func TestBatchBufsSizesFromHint(t *testing.T) {
	var p batchBufs
	p.init(1<<20+1<<17, 0)
	for _, c := range []struct{ hint, want int }{
		{0, minBatchBuf}, {minBatchBuf, minBatchBuf}, {minBatchBuf + 1, 2 * minBatchBuf},
		{71 << 10, 128 << 10}, {1 << 20, 1 << 20}, {1<<20 + 1, 1<<20 + 1<<17}, {8 << 20, 1<<20 + 1<<17},
	} {
		if b := p.get(c.hint); cap(b) != c.want || len(b) != 0 {
			t.Errorf("get(%d): len %d cap %d, want 0 and %d", c.hint, len(b), cap(b), c.want)
		}
	}
}

func TestBatchBufsRecycles(t *testing.T) {
	var p batchBufs
	p.init(1<<20, 0) // limit: two of the largest, 2 MiB
	b := p.get(60 << 10)
	b = append(b, 1, 2, 3)
	p.put(b)
	if p.bytes != 64<<10 {
		t.Fatalf("free bytes %d, want %d", p.bytes, 64<<10)
	}
	if c := p.get(50 << 10); &c[:1][0] != &b[0] {
		t.Fatal("a buffer of the class asked for was not reused")
	}
	if p.bytes != 0 {
		t.Fatalf("free bytes %d after taking the only buffer back", p.bytes)
	}
	// A buffer grown to an odd size goes to the largest class it covers.
	odd := make([]byte, 0, 100<<10)
	p.put(odd)
	if c := p.get(64 << 10); cap(c) != 100<<10 {
		t.Fatalf("cap %d: the odd buffer was not kept in the 64 KiB class", cap(c))
	}
	// The bound is on bytes: 2 MiB holds 32 buffers of 64 KiB, not 33.
	for range 40 {
		p.put(make([]byte, 0, 64<<10))
	}
	c64 := slices.Index(p.sizes, 64<<10)
	if p.bytes != 2<<20 || c64 < 0 || len(p.free[c64]) != 32 {
		t.Fatalf("free bytes %d in %d buffers, want 2 MiB in 32", p.bytes, len(p.free[max(c64, 0)]))
	}
	// Too small, or grown far past the largest batch: not kept.
	p.bytes = 0
	clear(p.free)
	p.put(make([]byte, 0, minBatchBuf-1))
	p.put(make([]byte, 0, 2<<20+1))
	if p.bytes != 0 {
		t.Fatalf("kept %d bytes of buffers it should have dropped", p.bytes)
	}
}

// TestWindowBuffersFollowBatches seals small batches: each buffer is sized from the last
// batch, so a held batch no longer pins a buffer of the largest batch (before: 1.1 MiB
// for each 57 KiB batch), and recycling them allocates nothing.
func TestWindowBuffersFollowBatches(t *testing.T) {
	sh := &winShared{batchBytes: 1 << 20, requestBytes: 1 << 20, maxInflight: 4, linger: 5 * ms,
		newPID: func() int64 { return 7 }}
	w := newWindow(sh, 0, 1, 7)
	val := make([]byte, 1024)
	round := func() *pbatch {
		for range 56 {
			w.add(&Record{Value: val}, 0, 1, 0)
		}
		w.seal()
		return w.q[len(w.q)-1]
	}
	for range 3 { // the first batch grows from the smallest class; later ones are sized
		b := round()
		w.q = w.q[:0]
		sh.putBuf(b.buf)
	}
	b := round()
	if cap(b.buf) > 2*len(b.buf) {
		t.Fatalf("a batch of %d bytes holds a buffer of %d", len(b.buf), cap(b.buf))
	}
	w.q = w.q[:0]
	sh.putBuf(b.buf)
	allocs := testing.AllocsPerRun(20, func() {
		b := round()
		w.q = w.q[:0]
		sh.putBuf(b.buf)
	})
	// The pbatch itself is allocated per batch; its buffer is not.
	if allocs > 1 {
		t.Fatalf("%.1f allocations per batch, want at most 1 (the pbatch)", allocs)
	}
}

// mibWindow is a window of a producer with 1 MiB batches and codec.
func mibWindow(codec batch.Codec) (*winShared, *window) {
	sh := &winShared{codec: codec, batchBytes: 1 << 20, requestBytes: 1 << 20, maxInflight: 4,
		linger: 5 * ms, freeBytes: 16 << 20, newPID: func() int64 { return 7 }}
	return sh, newWindow(sh, 0, 1, 7)
}

// sealValues adds a record per value and seals the batch, taking it out of the queue as
// if a checkpoint were about to release it.
func sealValues(w *window, vals ...[]byte) *pbatch {
	for _, v := range vals {
		w.add(&Record{Value: v}, 0, 1, 0)
	}
	w.seal()
	b := w.q[len(w.q)-1]
	w.q = w.q[:0]
	return b
}

// repeat returns v n times.
func repeat(v []byte, n int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		out[i] = v
	}
	return out
}

// TestHeldBatchKeepsItsSize: once compacted (mibWindow has no room: every seal
// compacts), a batch keeps a buffer of at most twice its bytes (or the smallest class)
// when it shrank in compression, or came after a bigger one. Found by review: the buffer
// was sized from the last batch before compression and kept.
func TestHeldBatchKeepsItsSize(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	var json [][]byte // 1 KiB records that zstd shrinks about 4 times
	for range 56 {
		var v []byte
		for len(v) < 1024 {
			v = fmt.Appendf(v, `{"id":%d,"user":"u%d","amount":%d.%02d,"ok":true},`,
				rnd.IntN(1e9), rnd.IntN(1e4), rnd.IntN(1e5), rnd.IntN(100))
		}
		json = append(json, v[:1024])
	}
	sh, w := mibWindow(batch.CodecZstd)
	for range 3 {
		sh.putBuf(sealValues(w, json...).buf)
	}
	if b := sealValues(w, json...); cap(b.buf) > max(2*len(b.buf), minBatchBuf) {
		t.Errorf("a zstd batch of %d bytes holds a buffer of %d", len(b.buf), cap(b.buf))
	}

	sh, w = mibWindow(batch.CodecNone)
	kib := make([]byte, 1024)
	sh.putBuf(sealValues(w, repeat(kib, 1000)...).buf)
	if b := sealValues(w, kib); cap(b.buf) > max(2*len(b.buf), minBatchBuf) {
		t.Errorf("a batch of %d bytes after a big one holds a buffer of %d", len(b.buf), cap(b.buf))
	}
}

// TestSmallBatchesKeepSmallBuffers: a compacted batch of one record, 1 KiB or 10 bytes,
// keeps a buffer of at most twice its bytes (or the smallest class), so that
// MaxBufferedBytes, which counts batch bytes, bounds the memory held within twice; and
// releasing the batches gives back exactly what they counted. With a smallest class of
// 16 KiB, each 1 KiB batch pinned 16 KiB.
func TestSmallBatchesKeepSmallBuffers(t *testing.T) {
	sh, w := mibWindow(batch.CodecNone)
	kib := make([]byte, 1024)
	for range 100 {
		w.add(&Record{Value: kib}, 0, 1, 0)
		w.seal()
	}
	for range 100 {
		w.add(&Record{Value: kib[:10]}, 0, 1, 0)
		w.seal()
	}
	var held int64
	for _, b := range w.q {
		if cap(b.buf) > max(2*len(b.buf), minBatchBuf) {
			t.Fatalf("a batch of %d bytes holds a buffer of %d", len(b.buf), cap(b.buf))
		}
		held += int64(len(b.buf))
	}
	if sh.buffered != held {
		t.Fatalf("%d bytes counted for batches of %d", sh.buffered, held)
	}
	for _, b := range w.q {
		w.release(b)
	}
	if sh.buffered != 0 {
		t.Fatalf("%d bytes still counted after every batch was released", sh.buffered)
	}
}

// TestAlternatingBatchesRecycle: big and small batches in turn are built in recycled
// buffers; none grows a buffer again (found by review: each big batch started from a
// small buffer, 5.6 MB allocated per pair).
func TestAlternatingBatchesRecycle(t *testing.T) {
	sh, w := mibWindow(batch.CodecNone)
	kib := make([]byte, 1024)
	big, small := repeat(kib, 1000), repeat(kib, 20)
	pair := func() {
		sh.putBuf(sealValues(w, big...).buf)
		sh.putBuf(sealValues(w, small...).buf)
	}
	for range 4 {
		pair()
	}
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	const n = 20
	for range n {
		pair()
	}
	runtime.ReadMemStats(&m1)
	if per := (m1.TotalAlloc - m0.TotalAlloc) / n; per > 64<<10 {
		t.Fatalf("%d bytes allocated per pair of batches: the buffers are not recycled", per)
	}
}

// TestHeldBatchesCompactUnderPressure: a sealed batch stays in the buffer it was built
// in, uncopied, while the held buffers are within twice MaxBufferedBytes (pinLimit);
// past it, every held batch over twice its size is copied into one of its size, except
// one a request being written points at, and pinned counts exactly the buffers held,
// down to 0 once every batch is released.
func TestHeldBatchesCompactUnderPressure(t *testing.T) {
	sh, w := mibWindow(batch.CodecNone)
	sh.pinLimit, sh.compactAt = 8<<20, 8<<20
	kib := make([]byte, 1024)
	w.release(sealValues(w, repeat(kib, 1000)...)) // the next batches are built in 1 MiB buffers
	pinned := func() (n int64) {
		for _, b := range w.q {
			n += int64(cap(b.buf))
		}
		return n
	}
	w.add(&Record{Value: kib}, 0, 1, 0)
	w.seal()
	first := w.q[0]
	if cap(first.buf) < 1<<20 {
		t.Fatalf("a 1 KiB batch after a 1 MiB one was copied at seal into %d bytes, with room to spare", cap(first.buf))
	}
	first.writing++ // a request being written points at it: compaction must leave it
	orig := &first.buf[0]
	for compacted := false; !compacted; {
		before := sh.pinned
		w.add(&Record{Value: kib}, 0, 1, 0)
		w.seal()
		if got := pinned(); got != sh.pinned {
			t.Fatalf("pinned %d, the held buffers %d", sh.pinned, got)
		}
		if len(w.q) > 30 {
			t.Fatalf("%d batches of 1 KiB held, pinned %d: no compaction past the limit %d", len(w.q), sh.pinned, sh.pinLimit)
		}
		compacted = sh.pinned < before
		if !compacted && sh.pinned > sh.pinLimit {
			t.Fatalf("pinned %d past the limit %d without a compaction", sh.pinned, sh.pinLimit)
		}
	}
	if got := pinned(); got != sh.pinned || sh.pinned > sh.pinLimit {
		t.Fatalf("after the compaction pinned %d, the held buffers %d, limit %d", sh.pinned, got, sh.pinLimit)
	}
	for _, b := range w.q[1:] {
		if cap(b.buf) > max(2*len(b.buf), minBatchBuf) {
			t.Fatalf("a batch of %d bytes holds a buffer of %d after the compaction", len(b.buf), cap(b.buf))
		}
	}
	if &first.buf[0] != orig {
		t.Fatal("compaction moved a batch a request was writing")
	}
	first.writing--
	for _, b := range w.q {
		w.release(b)
	}
	if sh.pinned != 0 || sh.buffered != 0 {
		t.Fatalf("pinned %d, buffered %d after every batch was released", sh.pinned, sh.buffered)
	}
}

// TestBuildBufferRoomToGrow: after a batch of 100 KiB the next one is built in a buffer
// with room for twice that (buildHint), so a batch of 180 KiB is not moved as it grows;
// built in a buffer of the recent maximum's class (128 KiB), it was.
func TestBuildBufferRoomToGrow(t *testing.T) {
	_, w := mibWindow(batch.CodecNone)
	kib := make([]byte, 1024)
	w.release(sealValues(w, repeat(kib, 100)...))
	w.add(&Record{Value: kib}, 0, 1, 0)
	first := unsafe.SliceData(w.bld.Records())
	for range 179 {
		w.add(&Record{Value: kib}, 0, 1, 0)
	}
	if unsafe.SliceData(w.bld.Records()) != first {
		t.Fatalf("a 180 KiB batch after a 100 KiB one was moved while built")
	}
	w.seal()
	if b := w.q[len(w.q)-1]; cap(b.buf) > 4*len(b.buf) {
		t.Fatalf("a batch of %d bytes built in %d", len(b.buf), cap(b.buf))
	}
}
