package memarena

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"testing"
)

// testBatch is one appended batch of a test's model.
type testBatch struct {
	base, last int64
	data       []byte
}

// appendBatches appends batches of the given sizes, one offset per 100
// bytes, and returns them.
func appendBatches(t *testing.T, w *WriteBuffer, next int64, sizes ...int) []testBatch {
	t.Helper()
	var out []testBatch
	for _, n := range sizes {
		b := testBatch{base: next, last: next + int64(n/100), data: pattern(n, uint64(next))}
		mustAppend(t, w, b.data, b.base, b.last)
		out = append(out, b)
		next = b.last + 1
	}
	return out
}

// wantRead is what Read(offset, maxBytes) must return: whole batches from
// the one holding offset, within maxBytes but at least one.
func wantRead(batches []testBatch, offset int64, maxBytes int) []byte {
	var out []byte
	for _, b := range batches {
		if b.last < offset {
			continue
		}
		if len(out) > 0 && len(out)+len(b.data) > maxBytes {
			break
		}
		out = append(out, b.data...)
	}
	return out
}

func TestWriteBufferAppendRead(t *testing.T) {
	a := newTestArena(t, smallConfig(64))
	w := newWB(t, a, 1000)
	batches := appendBatches(t, w, 1000, 100, 4096, 5000, 300, 9000, 1, 4095, 4097, 12000, 50)
	next := batches[len(batches)-1].last + 1
	for off := int64(1000); off < next; off += 7 {
		for _, maxBytes := range []int{0, 1000, 8192, 1 << 20} {
			spans, err := w.Read(off, maxBytes, nil)
			if err != nil {
				t.Fatalf("Read(%d, %d): %v", off, maxBytes, err)
			}
			for i := range spans {
				if spans[i].Len() == 0 || spans[i].Len() > 4096 {
					t.Fatalf("span of %d bytes", spans[i].Len())
				}
			}
			if got, want := joinSpans(spans), wantRead(batches, off, maxBytes); !bytes.Equal(got, want) {
				t.Fatalf("Read(%d, %d) = %d bytes; want %d", off, maxBytes, len(got), len(want))
			}
			ReleaseAll(spans)
		}
	}
	spans, err := w.Read(next, 1<<20, nil)
	if err != nil || len(spans) != 0 {
		t.Fatalf("Read at the end: %d spans, %v", len(spans), err)
	}
	if _, err := w.Read(999, 1<<20, nil); !errors.Is(err, ErrMiss) {
		t.Fatalf("Read before the start: %v; want ErrMiss", err)
	}
	st := w.Stats()
	if st.FirstOffset != 1000 || st.NextOffset != next || st.PendingBytes != 38_739 || st.Misses != 1 {
		t.Fatalf("stats %+v", st)
	}
	if as := a.Stats(); as.PendingBytes != st.PendingBytes || as.WriteBufferBytes != st.Bytes || st.Bytes != 10*4096 {
		t.Fatalf("arena stats %+v; buffer %+v", as, st)
	}
}

func TestWriteBufferAppendErrors(t *testing.T) {
	a := newTestArena(t, Config{Size: 64 * KiB, ChunkSize: 4 * KiB, SlabSize: 16 * KiB, PartitionMax: 32 * KiB})
	w := newWB(t, a, 10)
	f := func(n int, base, last int64, want error) {
		t.Helper()
		if err := w.Append(make([]byte, n), base, last); !errors.Is(err, want) {
			t.Errorf("Append(%d bytes, %d, %d) = %v; want %v", n, base, last, err, want)
		}
	}
	f(0, 10, 10, ErrInvalid)
	f(10, 10, 9, ErrInvalid)
	f(10, -1, 5, ErrInvalid)
	f(10, 11, 11, ErrOffsetOrder)
	f(10, 9, 10, ErrOffsetOrder)
	f(33*1024, 10, 10, ErrTooLarge)
	f(10, 10, 10, nil)
	f(10, 10, 10, ErrOffsetOrder)
	f(10, 11, 20, nil)
	if _, err := a.NewWriteBuffer(-1); !errors.Is(err, ErrInvalid) {
		t.Errorf("NewWriteBuffer(-1) = %v", err)
	}
}

func TestWriteBufferReclaimsOnlyDurable(t *testing.T) {
	a := newTestArena(t, smallConfig(16))
	w := newWB(t, a, 0)
	batches := appendBatches(t, w, 0, 3000, 3000, 3000, 3000, 3000, 3000) // 18000 bytes, 5 chunks
	w.SetDurable(batches[2].last)                                         // 9000 bytes durable: chunks 0 and 1
	if st := w.Stats(); st.PendingBytes != 9000 {
		t.Fatalf("pending %d after SetDurable", st.PendingBytes)
	}
	// Take every other chunk, so the reclaimer must run.
	var spans []Span
	for {
		s, err := a.Alloc()
		if err != nil {
			if !errors.Is(err, ErrFull) {
				t.Fatal(err)
			}
			break
		}
		spans = append(spans, s)
	}
	defer ReleaseAll(spans)
	st := w.Stats()
	if st.Chunks != 3 || st.FirstOffset != batches[3].base {
		t.Fatalf("after reclaim: %+v; want 3 chunks from batch 3", st)
	}
	for _, b := range batches[:3] {
		if _, err := w.Read(b.base, 1, nil); !errors.Is(err, ErrMiss) {
			t.Fatalf("Read of reclaimed batch at %d: %v", b.base, err)
		}
	}
	for _, b := range batches[3:] {
		got, err := w.Read(b.base, 1, nil)
		if err != nil || !bytes.Equal(joinSpans(got), b.data) {
			t.Fatalf("Read of pending batch at %d: %v", b.base, err)
		}
		ReleaseAll(got)
	}
	if as := a.Stats(); as.ReclaimedBytes != 2*4096 || as.PendingBytes != 9000 {
		t.Fatalf("arena stats %+v", as)
	}
}

func TestArenaFullOfPendingThrottles(t *testing.T) {
	a := newTestArena(t, smallConfig(16))
	ws := []*WriteBuffer{newWB(t, a, 0), newWB(t, a, 0)}
	next := []int64{0, 0}
	var err error
	for i := 0; err == nil; i++ {
		k := i % 2
		if err = ws[k].Append(pattern(1500, uint64(i)), next[k], next[k]); err == nil {
			next[k]++
		}
	}
	var fe *FullError
	if !errors.Is(err, ErrFull) || !errors.As(err, &fe) || errors.Is(err, ErrPartitionFull) {
		t.Fatalf("append to a full arena: %v; want ErrFull", err)
	}
	if st := a.Stats(); st.FreeBytes != 0 || st.FullErrors == 0 {
		t.Fatalf("stats %+v", st)
	}
	// A failed append leaves nothing behind.
	before := ws[0].Stats()
	if err := ws[0].Append(make([]byte, 9000), next[0], next[0]); !errors.Is(err, ErrFull) {
		t.Fatalf("second append: %v", err)
	}
	if after := ws[0].Stats(); after != before {
		t.Fatalf("failed append changed the buffer: %+v -> %+v", before, after)
	}
	ws[1].SetDurable(next[1] - 1)
	if err := ws[0].Append(make([]byte, 9000), next[0], next[0]); err != nil {
		t.Fatalf("append after the checkpoint advanced: %v", err)
	}
}

func TestPartitionMax(t *testing.T) {
	a := newTestArena(t, Config{Size: 256 * KiB, ChunkSize: 4 * KiB, SlabSize: 64 * KiB, PartitionMax: 16 * KiB})
	w := newWB(t, a, 0)
	var err error
	next := int64(0)
	for ; err == nil; next++ {
		err = w.Append(make([]byte, 1000), next, next)
	}
	next--
	if !errors.Is(err, ErrPartitionFull) || !errors.Is(err, ErrFull) {
		t.Fatalf("append past PartitionMax: %v", err)
	}
	if st := w.Stats(); st.Bytes != 16*KiB {
		t.Fatalf("buffer holds %d", st.Bytes)
	}
	w.SetDurable(next - 1)
	// A batch of the whole maximum fits once all is durable, even with a
	// partly filled tail chunk.
	if err := w.Append(make([]byte, 16*1024), next, next); err != nil {
		t.Fatalf("append of PartitionMax bytes: %v", err)
	}
	w.SetDurable(next)
	next++
	for i := range 100 {
		if err := w.Append(make([]byte, 1000), next, next); err != nil {
			t.Fatalf("append %d after SetDurable: %v", i, err)
		}
		w.SetDurable(next)
		next++
		if st := w.Stats(); st.Bytes > 16*KiB {
			t.Fatalf("buffer holds %d over its maximum", st.Bytes)
		}
	}
}

func TestPartitionMinHonouredUntilForced(t *testing.T) {
	a := newTestArena(t, Config{Size: 64 * KiB, ChunkSize: 4 * KiB, SlabSize: 16 * KiB, PartitionMin: 8 * KiB})
	ws := []*WriteBuffer{newWB(t, a, 0), newWB(t, a, 0)}
	for _, w := range ws {
		mustAppend(t, w, make([]byte, 16*1024), 0, 0) // 4 chunks each
		w.SetDurable(0)
	}
	// 8 chunks are free; take them, then 4 more (2 per buffer, down to the
	// minimum), then the rest only by force.
	var spans []Span
	defer func() { ReleaseAll(spans) }()
	take := func(n int) {
		for range n {
			s, err := a.Alloc()
			if err != nil {
				t.Fatalf("Alloc: %v", err)
			}
			spans = append(spans, s)
		}
	}
	take(12)
	for i, w := range ws {
		if st := w.Stats(); st.Bytes != 8*KiB {
			t.Fatalf("buffer %d holds %d; want its minimum", i, st.Bytes)
		}
	}
	take(4)
	if a.Stats().WriteBufferBytes != 0 {
		t.Fatal("a forced reclaim left write buffer chunks behind")
	}
}

func TestIdleBuffersEndEmpty(t *testing.T) {
	a := newTestArena(t, smallConfig(256))
	var ws []*WriteBuffer
	for i := range 50 {
		w := newWB(t, a, 0)
		appendBatches(t, w, 0, 1000+i*100, 2000, 3000)
		w.SetDurable(1 << 40)
		ws = append(ws, w)
	}
	hot := newWB(t, a, 0)
	next := int64(0)
	for range 2000 {
		mustAppend(t, hot, make([]byte, 1500), next, next)
		hot.SetDurable(next)
		next++
	}
	for i, w := range ws {
		if st := w.Stats(); st.Chunks > 1 {
			t.Fatalf("idle buffer %d holds %d chunks", i, st.Chunks)
		}
	}
}

func TestReclaimLeastRecentlyReadFirst(t *testing.T) {
	a := newTestArena(t, Config{Size: 64 * KiB, ChunkSize: 4 * KiB, SlabSize: 16 * KiB, LowWatermark: 0.2, HighWatermark: 0.5})
	ws := []*WriteBuffer{newWB(t, a, 0), newWB(t, a, 0), newWB(t, a, 0)}
	for _, w := range ws {
		mustAppend(t, w, make([]byte, 12*1024), 0, 0) // 3 chunks each
		w.SetDurable(0)
	}
	var spans []Span
	for _, k := range []int{2, 0} { // 1 was never read; 2 was read before 0
		s, _ := a.Alloc() // move the clock
		spans = append(spans, s)
		got, err := ws[k].Read(0, 1<<20, nil)
		if err != nil {
			t.Fatal(err)
		}
		ReleaseAll(got)
	}
	ReleaseAll(spans)
	// 9 of 16 chunks used; reclaim to 50% free takes 1 chunk... make it 4.
	spans = spans[:0]
	for range 7 {
		s, err := a.Alloc()
		if err != nil {
			t.Fatal(err)
		}
		spans = append(spans, s)
	}
	defer ReleaseAll(spans)
	got := []int{ws[0].Stats().Chunks, ws[1].Stats().Chunks, ws[2].Stats().Chunks}
	if got[1] != 0 || got[0] < got[2] {
		t.Fatalf("chunks left %v: want buffer 1 (never read) emptied first, then 2 before 0", got)
	}
}

func TestHeldChunkNotReused(t *testing.T) {
	a := newTestArena(t, smallConfig(8))
	w := newWB(t, a, 0)
	data := pattern(4096, 42)
	mustAppend(t, w, data, 0, 0)
	held, err := w.Read(0, 1<<20, nil)
	if err != nil || len(held) != 1 {
		t.Fatalf("Read: %v", err)
	}
	w.SetDurable(0)
	w.Close() // the owner lets go; the span still holds the chunk
	var spans []Span
	for {
		s, err := a.Alloc()
		if err != nil {
			break
		}
		if s.Chunk() == held[0].Chunk() {
			t.Fatal("a held chunk was handed out again")
		}
		fillPattern(s.Bytes(), 1)
		spans = append(spans, s)
	}
	if len(spans) != 7 || !bytes.Equal(held[0].Bytes(), data) {
		t.Fatalf("allocated %d chunks; held bytes intact: %v", len(spans), bytes.Equal(held[0].Bytes(), data))
	}
	if st := a.Stats(); st.OtherBytes != 8*4096 {
		t.Fatalf("stats %+v", st)
	}
	ReleaseAll(held)
	s, err := a.Alloc()
	if err != nil {
		t.Fatalf("Alloc after the release: %v", err)
	}
	ReleaseAll(append(spans, s))
}

func TestWriteBufferClose(t *testing.T) {
	a := newTestArena(t, smallConfig(16))
	w := newWB(t, a, 0)
	appendBatches(t, w, 0, 5000, 5000)
	w.Close()
	if err := w.Append([]byte{1}, 100, 100); !errors.Is(err, ErrClosed) {
		t.Fatalf("Append after Close: %v", err)
	}
	if _, err := w.Read(0, 1, nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("Read after Close: %v", err)
	}
	if st := a.Stats(); st.UsedBytes != 0 || st.PendingBytes != 0 || st.WriteBuffers != 0 {
		t.Fatalf("stats after Close: %+v", st)
	}
}

func TestAppendReadNoHeapAllocs(t *testing.T) {
	if invariantsOn || raceEnabled {
		t.Skip("invariants and race builds allocate to check")
	}
	a := newTestArena(t, Config{Size: 4 * MiB, ChunkSize: 4 * KiB, SlabSize: 1 * MiB})
	w := newWB(t, a, 0)
	batch := pattern(1000, 1)
	spans := make([]Span, 0, 16)
	next := int64(0)
	step := func() {
		if err := w.Append(batch, next, next+9); err != nil {
			t.Fatal(err)
		}
		w.SetDurable(next - 5000)
		var err error
		if spans, err = w.Read(next-rand.Int64N(min(next+1, 3000)), 8192, spans[:0]); err != nil {
			t.Fatal(err)
		}
		spans = ReleaseAll(spans)
		next += 10
	}
	for range 20_000 { // warm up: reach the steady state of reclaim
		step()
	}
	if n := testing.AllocsPerRun(5000, step); n != 0 {
		t.Fatalf("%v allocations per append+read", n)
	}
}

// TestWriteBufferManyGroups covers an index of many groups, groups cut
// early by offsets that overflow 32 bits, and reclaim across group ends.
func TestWriteBufferManyGroups(t *testing.T) {
	a := newTestArena(t, Config{Size: 4 * MiB, ChunkSize: 4 * KiB, SlabSize: 64 * KiB})
	w := newWB(t, a, 0)
	rng := rand.New(rand.NewPCG(1, 2))
	var batches []testBatch
	next := int64(0)
	for i := range 3000 {
		n := 1 + rng.IntN(900)
		count := 1 + rng.Int64N(5)
		if i%700 < 3 {
			count = 1 << 31 // the third in a row overflows a group's 32-bit deltas
		}
		b := testBatch{base: next, last: next + count - 1, data: pattern(n, uint64(i))}
		mustAppend(t, w, b.data, b.base, b.last)
		batches = append(batches, b)
		next = b.last + 1
	}
	short := 0
	for _, g := range w.mu.idx.groups[:len(w.mu.idx.groups)-1] {
		if len(g.last) < groupCap {
			short++
		}
	}
	if g := len(w.mu.idx.groups); g < 12 || short < 4 {
		t.Fatalf("%d index groups, %d cut short; want many, some cut short", g, short)
	}
	w.SetDurable(batches[1800].last)
	for w.Stats().FirstOffset <= batches[1500].base {
		s, err := a.Alloc() // squeeze the buffer
		if err != nil {
			t.Fatal(err)
		}
		defer s.Release()
	}
	first := w.Stats().FirstOffset
	for i, b := range batches {
		for _, off := range []int64{b.base, b.last, (b.base + b.last) / 2} {
			spans, err := w.Read(off, 2000, nil)
			if b.base < first {
				if !errors.Is(err, ErrMiss) {
					t.Fatalf("batch %d at %d before the first in memory %d: %v", i, off, first, err)
				}
				continue
			}
			if err != nil || !bytes.Equal(joinSpans(spans), wantRead(batches, off, 2000)) {
				t.Fatalf("Read(%d) of batch %d: %v", off, i, err)
			}
			ReleaseAll(spans)
		}
	}
}
