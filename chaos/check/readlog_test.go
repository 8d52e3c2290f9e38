package check

import "testing"

// TestReadLogOrder records reads across chunk boundaries: every one comes back, in the
// order recorded, with its index, and a stopped iteration stops.
func TestReadLogOrder(t *testing.T) {
	var l readLog
	n := 2*readChunk + 5
	for i := range n {
		l.add(Read{Partition: i % 3, Offset: int64(i)})
	}
	if l.len() != n || len(l.chunks) != 3 {
		t.Fatalf("%d reads in %d chunks, want %d in 3", l.len(), len(l.chunks), n)
	}
	want := 0
	for i, r := range l.all() {
		if i != want || r.Offset != int64(i) || r.Partition != i%3 {
			t.Fatalf("read %d: index %d, %+v", want, i, r)
		}
		want++
	}
	if want != n {
		t.Fatalf("iterated %d reads of %d", want, n)
	}
	seen := 0
	for range l.all() {
		if seen++; seen == readChunk+1 {
			break
		}
	}
	if seen != readChunk+1 {
		t.Fatalf("a stopped iteration went on to %d", seen)
	}
}

// TestCutAcrossChunks: a cut recorded after more reads than one chunk holds supersedes
// the reads before it in every chunk, and not the ones after it.
func TestCutAcrossChunks(t *testing.T) {
	h := NewHistory()
	a, b := ID{Producer: 1, Seq: 0}, ID{Producer: 2, Seq: 0}
	h.Sent(a, AckPersisted)
	h.Sent(b, AckPersisted)
	for range readChunk + 10 {
		h.Read(Read{Partition: 0, Offset: 0, ID: a, Valid: true, Durable: true})
	}
	h.Cut(0, 0)
	h.Read(Read{Partition: 0, Offset: 0, ID: b, Valid: true, Durable: true})
	r := Check(h)
	if r.Counts[Inconsistent] != 0 || r.Counts[Rewritten] == 0 {
		t.Fatalf("inconsistent %d, rewritten %d: the cut did not supersede the reads of the first chunks",
			r.Counts[Inconsistent], r.Counts[Rewritten])
	}
	if r.Reads != readChunk+11 {
		t.Fatalf("the check saw %d reads, want %d", r.Reads, readChunk+11)
	}
}
