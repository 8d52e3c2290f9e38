package memarena

import (
	"errors"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

func TestAllocUntilFull(t *testing.T) {
	a := newTestArena(t, smallConfig(16))
	if s := a.Stats(); s.MappedBytes != 0 || s.UsedBytes != 0 {
		t.Fatalf("new arena: %+v", s)
	}
	spans := make([]Span, 0, 16)
	seen := map[uint32]bool{}
	for i := range 16 {
		s, err := a.Alloc()
		if err != nil {
			t.Fatalf("Alloc %d: %v", i, err)
		}
		if seen[s.Chunk()] || s.Len() != 4096 {
			t.Fatalf("Alloc %d: chunk %d (seen %v), len %d", i, s.Chunk(), seen[s.Chunk()], s.Len())
		}
		seen[s.Chunk()] = true
		fillPattern(s.Bytes(), uint64(i))
		spans = append(spans, s)
	}
	_, err := a.Alloc()
	var fe *FullError
	if !errors.Is(err, ErrFull) || !errors.As(err, &fe) {
		t.Fatalf("Alloc on a full arena: %v; want ErrFull", err)
	}
	st := a.Stats()
	if st.MappedBytes != 64*KiB || st.UsedBytes != 64*KiB || st.OtherBytes != 64*KiB || st.FullErrors != 1 {
		t.Fatalf("full arena: %+v", st)
	}
	for i := range spans {
		if string(spans[i].Bytes()) != string(pattern(4096, uint64(i))) {
			t.Fatalf("span %d changed", i)
		}
	}
	ReleaseAll(spans)
	if st := a.Stats(); st.UsedBytes != 0 || st.FreeBytes != st.Size {
		t.Fatalf("after release: %+v", st)
	}
}

func TestLazyMapping(t *testing.T) {
	a := newTestArena(t, Config{Size: 8 * GiB, PartitionMax: 8 * GiB})
	if m := a.Stats().MappedBytes; m != 0 {
		t.Fatalf("mapped %d before use", m)
	}
	s, err := a.Alloc()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Release()
	if m := a.Stats().MappedBytes; m != DefaultSlabSize {
		t.Fatalf("mapped %s after one Alloc; want one slab", FormatSize(m))
	}
}

func TestAllocPrefersLowSlabs(t *testing.T) {
	a := newTestArena(t, smallConfig(16)) // 4 slabs of 4 chunks
	var spans []Span
	for range 16 {
		s, err := a.Alloc()
		if err != nil {
			t.Fatal(err)
		}
		spans = append(spans, s)
	}
	spans = ReleaseAll(spans)
	for i := range 4 {
		s, err := a.Alloc()
		if err != nil {
			t.Fatal(err)
		}
		if slab := s.Chunk() >> a.slabShift; slab != 0 {
			t.Errorf("allocation %d came from slab %d; want 0", i, slab)
		}
		spans = append(spans, s)
	}
	ReleaseAll(spans)
}

// resident reports how many pages of b are in memory.
func resident(t *testing.T, b []byte) int {
	t.Helper()
	vec := make([]byte, (len(b)+4095)/4096)
	_, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), uintptr(unsafe.Pointer(&vec[0])))
	if errno != 0 {
		t.Fatal(errno)
	}
	n := 0
	for _, v := range vec {
		n += int(v & 1)
	}
	return n
}

func TestIdleSlabsGivenBack(t *testing.T) {
	a := newTestArena(t, Config{Size: 256 * KiB, ChunkSize: 4 * KiB, SlabSize: 64 * KiB})
	var spans []Span
	for range 64 {
		s, err := a.Alloc()
		if err != nil {
			t.Fatal(err)
		}
		fillPattern(s.Bytes(), 7)
		spans = append(spans, s)
	}
	keep := spans[0] // slab 0 stays in use
	ReleaseAll(spans[1:])
	if pages := resident(t, a.slabs[3].mem); pages != 16 {
		t.Fatalf("slab 3 has %d resident pages before the sweep; want 16", pages)
	}
	a.Reclaim() // first sweep: idle once
	if st := a.Stats(); st.AdvisedBytes != 0 {
		t.Fatalf("advised %d after one sweep", st.AdvisedBytes)
	}
	a.Reclaim() // second sweep: given back
	st := a.Stats()
	if st.AdvisedBytes != 192*KiB || st.SlabsAdvised != 3 || st.MappedBytes != 256*KiB {
		t.Fatalf("after two sweeps: %+v", st)
	}
	for i := 1; i < 4; i++ {
		if pages := resident(t, a.slabs[i].mem); pages != 0 {
			t.Errorf("slab %d has %d resident pages after MADV_DONTNEED", i, pages)
		}
	}
	if string(keep.Bytes()) != string(pattern(4096, 7)) {
		t.Fatal("held chunk changed by the sweep")
	}
	keep.Release()
}

func TestAdvisedSlabReused(t *testing.T) {
	a := newTestArena(t, Config{Size: 128 * KiB, ChunkSize: 4 * KiB, SlabSize: 64 * KiB})
	s, err := a.Alloc()
	if err != nil {
		t.Fatal(err)
	}
	s.Release()
	a.Reclaim()
	a.Reclaim()
	if st := a.Stats(); st.AdvisedBytes != 64*KiB {
		t.Fatalf("advised %d; want one slab", st.AdvisedBytes)
	}
	s, err = a.Alloc()
	if err != nil {
		t.Fatal(err)
	}
	if b := s.Bytes(); b[0] != 0 || b[4095] != 0 {
		t.Fatal("a chunk from a given-back slab is not zero")
	}
	a.Reclaim()
	if st := a.Stats(); st.AdvisedBytes != 0 {
		t.Fatalf("advised %d with the slab in use again", st.AdvisedBytes)
	}
	s.Release()
}

// expectBug runs f and checks that it panics with "BUG: ..." under the
// invariants tag, and that it counts a bad release otherwise.
func expectBug(t *testing.T, a *Arena, f func()) {
	t.Helper()
	before := a.Stats().BadReleases
	defer func() {
		t.Helper()
		r := recover()
		if !invariantsOn {
			if r != nil {
				t.Fatalf("panic without invariants: %v", r)
			}
			if got := a.Stats().BadReleases; got != before+1 {
				t.Fatalf("BadReleases %d; want %d", got, before+1)
			}
			return
		}
		if msg, _ := r.(string); !strings.HasPrefix(msg, "BUG: ") {
			t.Fatalf("recovered %v; want a BUG panic", r)
		}
	}()
	f()
}

func TestDoubleReleaseCaught(t *testing.T) {
	a := newTestArena(t, smallConfig(4))
	s, err := a.Alloc()
	if err != nil {
		t.Fatal(err)
	}
	s.Release()
	expectBug(t, a, s.Release)
	if a.Stats().UsedBytes != 0 {
		t.Fatal("double release changed the accounting")
	}
}

func TestReleaseOfCopyCaught(t *testing.T) {
	a := newTestArena(t, smallConfig(4))
	w := newWB(t, a, 0)
	mustAppend(t, w, pattern(100, 1), 0, 0)
	spans, err := w.Read(0, 1<<20, nil)
	if err != nil || len(spans) != 1 {
		t.Fatalf("Read: %v, %d spans", err, len(spans))
	}
	dup := spans[0]
	spans[0].Release()
	if invariantsOn {
		expectBug(t, a, dup.Release) // the hold registry knows it is gone
		return
	}
	// Without invariants a released copy still looks live while the owner
	// holds the chunk; it is caught once the chunk is reused.
	w.Close()
	s, err := a.Alloc()
	if err != nil {
		t.Fatal(err)
	}
	expectBug(t, a, dup.Release)
	if refs := a.meta(s.Chunk()).refs.Load(); refs != 1 {
		t.Fatalf("stale release changed a live chunk's references to %d", refs)
	}
	s.Release()
}

func TestCloseWithHeldSpan(t *testing.T) {
	a, err := New(smallConfig(4))
	if err != nil {
		t.Fatal(err)
	}
	s, err := a.Alloc()
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); !errors.Is(err, ErrBusy) {
		t.Fatalf("Close with a held span: %v; want ErrBusy", err)
	}
	w, _ := a.NewWriteBuffer(0)
	s.Release()
	if err := a.Close(); !errors.Is(err, ErrBusy) {
		t.Fatalf("Close with an open write buffer: %v; want ErrBusy", err)
	}
	w.Close()
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Alloc(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Alloc after Close: %v", err)
	}
	if _, err := a.NewWriteBuffer(0); !errors.Is(err, ErrClosed) {
		t.Fatalf("NewWriteBuffer after Close: %v", err)
	}
}

func TestAllocReleaseNoHeapAllocs(t *testing.T) {
	if invariantsOn || raceEnabled {
		t.Skip("invariants and race builds allocate to check")
	}
	a := newTestArena(t, smallConfig(64))
	n := testing.AllocsPerRun(1000, func() {
		s, err := a.Alloc()
		if err != nil {
			t.Fatal(err)
		}
		s.Release()
	})
	if n != 0 {
		t.Fatalf("%v allocations per Alloc+Release", n)
	}
}
