package memarena

import (
	"runtime"
	"testing"
)

// waitPrefault waits for the prefault goroutine to end.
func waitPrefault(t testing.TB, a *Arena) {
	t.Helper()
	if a.pf.done == nil {
		t.Fatal("the arena does not prefault")
	}
	<-a.pf.done
}

// residentAll counts the resident pages of every mapped slab.
func residentAll(t *testing.T, a *Arena) (pages, want int) {
	t.Helper()
	for i := range int(a.mapped.Load()) {
		pages += resident(t, a.slabs[i].mem)
		want += len(a.slabs[i].mem) / 4096
	}
	return pages, want
}

func TestPrefault(t *testing.T) {
	for _, fallback := range []bool{false, true} {
		name := map[bool]string{false: "populate", true: "touch"}[fallback]
		t.Run(name, func(t *testing.T) {
			if fallback {
				defer func(v int) { populateAdvice = v }(populateAdvice)
				populateAdvice = -1 // refused with EINVAL, as by a kernel before 5.14
			}
			a := newTestArena(t, Config{Size: 64 * MiB, SlabSize: 16 * MiB, Prefault: true})
			waitPrefault(t, a)
			if st := a.Stats(); st.MappedBytes != 64*MiB || st.PrefaultedBytes != 64*MiB || st.UsedBytes != 0 {
				t.Fatalf("after prefault: %+v", st)
			}
			if pages, want := residentAll(t, a); pages != want {
				t.Fatalf("%d of %d pages resident after prefault", pages, want)
			}
			for range 3 { // idle slabs stay: giving them back would undo the work
				a.Reclaim()
			}
			if pages, want := residentAll(t, a); pages != want || a.Stats().AdvisedBytes != 0 {
				t.Fatalf("%d of %d pages resident after sweeps; %+v", pages, want, a.Stats())
			}
		})
	}
}

// TestPrefaultWhileWriting writes chunks while the prefaulter (both ways)
// faults their pages in: not a byte may change.
func TestPrefaultWhileWriting(t *testing.T) {
	for _, fallback := range []bool{false, true} {
		if fallback {
			defer func(v int) { populateAdvice = v }(populateAdvice)
			populateAdvice = -1
		}
		a := newTestArena(t, Config{Size: 128 * MiB, ChunkSize: 64 * KiB, SlabSize: 16 * MiB, Prefault: true})
		var spans []Span
		for i := range 512 { // two slabs, while the prefaulter works on them
			s, err := a.Alloc()
			if err != nil {
				t.Fatal(err)
			}
			fillPattern(s.Bytes(), uint64(i))
			spans = append(spans, s)
		}
		waitPrefault(t, a)
		for i := range spans {
			if string(spans[i].Bytes()) != string(pattern(spans[i].Len(), uint64(i))) {
				t.Fatalf("fallback %v: chunk %d changed under the prefaulter", fallback, i)
			}
		}
		ReleaseAll(spans)
	}
}

// TestPrefaultStopsAtClose closes an arena while it prefaults.
func TestPrefaultStopsAtClose(t *testing.T) {
	a, err := New(Config{Size: 2 * GiB, SlabSize: 64 * MiB, Prefault: true})
	if err != nil {
		t.Fatal(err)
	}
	s, err := a.Alloc()
	if err != nil {
		t.Fatal(err)
	}
	s.Release()
	for a.Stats().PrefaultedBytes == 0 { // under way
		runtime.Gosched()
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-a.pf.done:
	default:
		t.Fatal("Close returned with the prefaulter running")
	}
	t.Logf("prefaulted %s of 2GiB before Close", FormatSize(a.Stats().PrefaultedBytes))
}

// TestAllocPrefersWarmChunks: a slab given back to the OS is the last
// choice, even when lower than a slab with free chunks; the most recently
// freed chunk of a slab is the first choice.
func TestAllocPrefersWarmChunks(t *testing.T) {
	a := newTestArena(t, Config{Size: 256 * KiB, ChunkSize: 4 * KiB, SlabSize: 64 * KiB}) // 4 slabs of 16
	var spans []Span
	for range 64 {
		s, err := a.Alloc()
		if err != nil {
			t.Fatal(err)
		}
		fillPattern(s.Bytes(), 1)
		spans = append(spans, s)
	}
	slabOf := func(s *Span) uint32 { return s.Chunk() >> a.slabShift }
	ReleaseAll(spans[:32]) // slabs 0 and 1 idle
	a.Reclaim()
	a.Reclaim() // ... and given back
	if st := a.Stats(); st.AdvisedBytes != 128*KiB {
		t.Fatalf("advised %d; want slabs 0 and 1", st.AdvisedBytes)
	}
	freed := []uint32{spans[40].Chunk(), spans[37].Chunk()}
	spans[37].Release() // slab 2: warm free chunks
	spans[40].Release()
	for i, want := range freed { // LIFO: the last freed first
		s, err := a.Alloc()
		if err != nil {
			t.Fatal(err)
		}
		if s.Chunk() != want {
			t.Errorf("allocation %d took chunk %d (slab %d); want warm chunk %d", i, s.Chunk(), slabOf(&s), want)
		}
		spans[37+3*i] = s
	}
	s, err := a.Alloc() // no warm chunk left: the lowest cold slab, now warm
	if err != nil {
		t.Fatal(err)
	}
	if slabOf(&s) != 0 || a.Stats().AdvisedBytes != 64*KiB {
		t.Errorf("took from slab %d with %d bytes advised; want slab 0, 64KiB", slabOf(&s), a.Stats().AdvisedBytes)
	}
	s.Release() // slab 0 is warm again (some pages resident): preferred to cold slab 1
	s, err = a.Alloc()
	if err != nil {
		t.Fatal(err)
	}
	if slabOf(&s) != 0 {
		t.Errorf("took from slab %d; want warm slab 0", slabOf(&s))
	}
	s.Release()
	ReleaseAll(spans[32:])
}
