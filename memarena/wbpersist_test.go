package memarena

import (
	"bytes"
	"errors"
	"testing"
	"unsafe"
)

// addrOf returns the address of a span's first byte.
func addrOf(s *Span) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(s.Bytes()))) }

// mustRange holds [from, to) and returns the bytes and the spans, which the
// caller releases.
func mustRange(t *testing.T, w *WriteBuffer, from, to int64) ([]byte, []Span) {
	t.Helper()
	spans, err := w.Range(from, to, nil)
	if err != nil {
		t.Fatalf("Range(%d, %d): %v", from, to, err)
	}
	return joinSpans(spans), spans
}

// TestWriteBufferAtFilePosition starts a buffer inside a chunk, as the
// engine does after Open: the first chunk starts at the multiple of the
// chunk size below the position, and stream positions keep their offset in
// a 4 KiB page, so a range from a block boundary starts on a page boundary.
func TestWriteBufferAtFilePosition(t *testing.T) {
	a := newTestArena(t, Config{Size: 256 * KiB, ChunkSize: 16 * KiB, SlabSize: 64 * KiB})
	w, err := a.NewWriteBufferAt(500, 20_000)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if st := w.Stats(); st.TailPos != 20_000 || st.NextOffset != 500 || st.Chunks != 0 {
		t.Fatalf("new buffer: %+v", st)
	}
	batches := appendBatches(t, w, 500, 3000, 9000, 20_000)
	if h := w.mu.headPos; h != 16*KiB {
		t.Fatalf("first chunk starts at %d; want %d", h, 16*KiB)
	}
	end := int64(20_000 + 32_000)
	if st := w.Stats(); st.TailPos != end || st.Chunks != 3 {
		t.Fatalf("after appends: %+v", st)
	}
	want := append(append(append([]byte{}, batches[0].data...), batches[1].data...), batches[2].data...)
	for _, r := range [][2]int64{{20_000, end}, {24_576, end}, {32 * 1024, 49_152}, {20_001, 20_002}, {end - 1, end}} {
		got, spans := mustRange(t, w, r[0], r[1])
		if !bytes.Equal(got, want[r[0]-20_000:r[1]-20_000]) {
			t.Errorf("Range(%d, %d) returned other bytes", r[0], r[1])
		}
		pos := r[0]
		for i := range spans {
			if addrOf(&spans[i])%4096 != uintptr(pos%4096) || (i > 0 && pos%(16*KiB) != 0) {
				t.Errorf("Range(%d, %d): piece %d at position %d, address %#x", r[0], r[1], i, pos, addrOf(&spans[i]))
			}
			pos += int64(spans[i].Len())
		}
		ReleaseAll(spans)
	}
	if _, err := a.NewWriteBufferAt(0, -1); !errors.Is(err, ErrInvalid) {
		t.Errorf("NewWriteBufferAt(0, -1) = %v", err)
	}
}

// TestRangeRefusesWhatIsNotData asks for ranges that reach below the first
// batch, past the tail, or into padding.
func TestRangeRefusesWhatIsNotData(t *testing.T) {
	a := newTestArena(t, smallConfig(32))
	w, err := a.NewWriteBufferAt(0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	b := appendBatches(t, w, 0, 3000) // [1000, 4000)
	if err := w.Skip(4096); err != nil {
		t.Fatal(err)
	}
	appendBatches(t, w, b[0].last+1, 2000) // [4096, 6096)
	f := func(from, to int64, want error) {
		t.Helper()
		spans, err := w.Range(from, to, nil)
		ReleaseAll(spans)
		if !errors.Is(err, want) || err == nil && from < to && len(spans) == 0 {
			t.Errorf("Range(%d, %d) = %d spans, %v; want %v", from, to, len(spans), err, want)
		}
	}
	f(1000, 4000, nil)
	f(4096, 6096, nil)
	f(5000, 5000, nil)
	f(999, 1500, ErrMiss)  // below the first batch: the chunk's bytes below it are not data
	f(0, 10, ErrMiss)      //
	f(3999, 4001, ErrMiss) // into the padding
	f(4000, 4096, ErrMiss) // the padding itself
	f(4095, 4097, ErrMiss)
	f(1000, 6096, ErrMiss) // across it
	f(6000, 6097, ErrMiss) // past the tail
	f(10, 5, ErrInvalid)
	f(-1, 5, ErrInvalid)
	_, err = w.Range(3000, 5000, nil)
	var re *RangeError
	if !errors.As(err, &re) || *re != (RangeError{From: 3000, To: 5000, First: 1000, End: 6096}) {
		t.Errorf("Range across padding: %#v", err)
	}
}

// TestSkipPadding pads the stream at a segment roll while batches are
// pending: the padding is not pending, reads leave it out, and the next
// batch starts after it, also when the padding ends in a chunk not yet
// allocated.
func TestSkipPadding(t *testing.T) {
	a := newTestArena(t, smallConfig(32))
	w := newWB(t, a, 0)
	b1 := appendBatches(t, w, 0, 4000)   // [0, 4000)
	if err := w.Skip(4096); err != nil { // ends at the chain's end
		t.Fatal(err)
	}
	b2 := appendBatches(t, w, b1[0].last+1, 5000) // [4096, 9096)
	if err := w.Skip(9096 + 4096); err != nil {   // a whole chunk of padding at most
		t.Fatal(err)
	}
	b3 := appendBatches(t, w, b2[0].last+1, 100) // [13192, 13292)
	if st := w.Stats(); st.PendingBytes != 9100 || st.TailPos != 13292 || st.Chunks != 4 {
		t.Fatalf("stats %+v", st)
	}
	if as := a.Stats(); as.PendingBytes != 9100 {
		t.Fatalf("arena pending %d", as.PendingBytes)
	}
	all := append(append(append([]testBatch{}, b1...), b2...), b3...)
	for _, off := range []int64{0, b2[0].base, b3[0].base} {
		spans, err := w.Read(off, 1<<20, nil)
		if err != nil || !bytes.Equal(joinSpans(spans), wantRead(all, off, 1<<20)) {
			t.Fatalf("Read(%d) across padding: %v", off, err)
		}
		ReleaseAll(spans)
	}
	// A read budget counts batch bytes, not padding.
	spans, err := w.Read(0, 9000, nil)
	if err != nil || !bytes.Equal(joinSpans(spans), wantRead(all, 0, 9000)) {
		t.Fatalf("Read(0, 9000): %d bytes, %v", len(joinSpans(spans)), err)
	}
	ReleaseAll(spans)
	w.SetDurable(b1[0].last)
	if st := w.Stats(); st.PendingBytes != 5100 || w.mu.durablePos != 4096 {
		t.Fatalf("after the first batch is durable: %+v, durable position %d", st, w.mu.durablePos)
	}
	w.SetDurable(b2[0].last)
	if st := w.Stats(); st.PendingBytes != 100 || w.mu.durablePos != 13192 {
		t.Fatalf("after the second: %+v, durable position %d", st, w.mu.durablePos)
	}
	w.SetDurable(b3[0].last)
	if err := w.Skip(13292 + 100); err != nil {
		t.Fatal(err)
	}
	if st := w.Stats(); st.PendingBytes != 0 || w.mu.durablePos != 13392 || a.Stats().PendingBytes != 0 {
		t.Fatalf("all durable and padded: %+v, durable position %d", st, w.mu.durablePos)
	}
	for _, to := range []int64{13391, 13392 + 4096 + 1} {
		if err := w.Skip(to); !errors.Is(err, ErrInvalid) {
			t.Errorf("Skip(%d) with the tail at 13392: %v; want ErrInvalid", to, err)
		}
	}
	w.Close()
	if err := w.Skip(20000); !errors.Is(err, ErrClosed) {
		t.Errorf("Skip after Close: %v", err)
	}
	if _, err := w.Range(0, 1, nil); !errors.Is(err, ErrClosed) {
		t.Errorf("Range after Close: %v", err)
	}
}

// TestIdleBufferRestartsAligned lets an idle buffer give every chunk back,
// pads and appends again: the new first chunk starts at a multiple of the
// chunk size, and its bytes below the new batch are not data.
func TestIdleBufferRestartsAligned(t *testing.T) {
	a := newTestArena(t, Config{Size: 64 * KiB, ChunkSize: 8 * KiB, SlabSize: 16 * KiB})
	w := newWB(t, a, 0)
	old := appendBatches(t, w, 0, 5000, 6000) // [0, 11000)
	w.SetDurable(1 << 40)
	var spans []Span
	for { // squeeze the buffer out
		s, err := a.Alloc()
		if err != nil {
			break
		}
		spans = append(spans, s)
	}
	if st := w.Stats(); st.Chunks != 0 || st.FirstOffset != -1 {
		t.Fatalf("idle buffer kept %+v", st)
	}
	ReleaseAll(spans)
	if err := w.Skip(12288); err != nil {
		t.Fatal(err)
	}
	if w.mu.headPos != 8*KiB {
		t.Fatalf("empty buffer's head at %d", w.mu.headPos)
	}
	b := appendBatches(t, w, old[1].last+1, 7000) // [12288, 19288)
	if w.mu.headPos != 8*KiB || w.mu.chain.len() != 2 {
		t.Fatalf("head %d, %d chunks; want 8192, 2", w.mu.headPos, w.mu.chain.len())
	}
	got, held := mustRange(t, w, 12288, 19288)
	if !bytes.Equal(got, b[0].data) || addrOf(&held[0])%4096 != 0 {
		t.Fatalf("Range of the new batch: %d bytes at %#x", len(got), addrOf(&held[0]))
	}
	ReleaseAll(held)
	if _, err := w.Range(11000, 12289, nil); !errors.Is(err, ErrMiss) {
		t.Fatalf("Range below the restarted tail: %v; want ErrMiss", err)
	}
}

// TestPartitionMaxAligned: a batch of PartitionMax bytes that starts inside
// a chunk needs one chunk more than PartitionMax; an empty buffer takes it.
func TestPartitionMaxAligned(t *testing.T) {
	a := newTestArena(t, Config{Size: 256 * KiB, ChunkSize: 4 * KiB, SlabSize: 64 * KiB, PartitionMax: 16 * KiB})
	w, err := a.NewWriteBufferAt(0, 100)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	mustAppend(t, w, make([]byte, 16*1024), 0, 0)
	if st := w.Stats(); st.Bytes != 20*KiB {
		t.Fatalf("holds %d", st.Bytes)
	}
	if err := w.Append(make([]byte, 5000), 1, 1); !errors.Is(err, ErrPartitionFull) {
		t.Fatalf("append past PartitionMax with the first pending: %v", err)
	}
	w.SetDurable(0)
	mustAppend(t, w, make([]byte, 16*1024), 1, 1)
	if st := w.Stats(); st.Bytes != 20*KiB || st.FirstOffset != 1 {
		t.Fatalf("after the second: %+v", st)
	}
}

func TestRangeNoHeapAllocs(t *testing.T) {
	if invariantsOn || raceEnabled {
		t.Skip("invariants and race builds allocate to check")
	}
	a := newTestArena(t, Config{Size: 4 * MiB, ChunkSize: 4 * KiB, SlabSize: 1 * MiB})
	w := newWB(t, a, 0)
	batch := pattern(1000, 1)
	spans := make([]Span, 0, 16)
	next, tail := int64(0), int64(0)
	step := func() {
		if next%50 == 49 {
			tail = (tail + 4095) &^ 4095
			if err := w.Skip(tail); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Append(batch, next, next); err != nil {
			t.Fatal(err)
		}
		var err error
		if spans, err = w.Range(tail, tail+1000, spans[:0]); err != nil {
			t.Fatal(err)
		}
		spans = ReleaseAll(spans)
		w.SetDurable(next)
		next, tail = next+1, tail+1000
	}
	for range 20_000 { // warm up: reach the steady state of reclaim
		step()
	}
	if n := testing.AllocsPerRun(5000, step); n != 0 {
		t.Fatalf("%v allocations per append+range", n)
	}
}
