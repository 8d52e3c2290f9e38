package client

import "testing"

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
	if p.bytes != 2<<20 || len(p.free[2]) != 32 {
		t.Fatalf("free bytes %d in %d buffers, want 2 MiB in 32", p.bytes, len(p.free[2]))
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
	if cap(b.buf) > 5*len(b.buf)/2 {
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
