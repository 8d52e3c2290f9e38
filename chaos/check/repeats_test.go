package check

import (
	"math/rand/v2"
	"testing"
)

// TestRepeatsAreCountedNotKept: a sampler's thousand reads of one record at or below C
// keep one read and count the rest; a read above C, an invalid one and one of another
// record at the position are kept; a cut makes the next read of the same record count
// again.
func TestRepeatsAreCountedNotKept(t *testing.T) {
	h := newHist().send(1, 0, AckPersisted).send(1, 1, AckPersisted)
	for range 1000 {
		h.read(0, 0, 1, 0, true)
	}
	h.read(0, 0, 1, 0, false)                                            // above C: kept
	h.h.Read(Read{Partition: 0, Offset: 0, ID: ID{1, 0}, Durable: true}) // invalid: kept
	h.read(0, 0+repeatChunk, 1, 1, true)                                 // another chunk
	if got := h.h.mu.reads.len(); got != 4 {
		t.Fatalf("%d reads kept, want 4", got)
	}
	h.h.Cut(0, 0)
	h.read(0, 0, 1, 0, true).read(0, 0+repeatChunk, 1, 1, true) // both forgotten by the cut
	h.read(0, 0, 1, 0, true)
	if got := h.h.mu.reads.len(); got != 6 {
		t.Fatalf("%d reads kept after the cut, want 6", got)
	}
	if _, reads := h.h.Len(); reads != 1006 {
		t.Fatalf("Len says %d reads, want 1006", reads)
	}
	r := Check(h.h)
	if r.Reads != 1006 || r.Repeats != 1000 {
		t.Fatalf("report: %d reads, %d repeats; want 1006 and 1000", r.Reads, r.Repeats)
	}
	want(t, r, map[string]int{Unexpected: 1}) // the invalid read
}

// TestRepeatsDoNotChangeTheVerdict checks random small histories twice: once through
// History.Read, which drops repeats, and once with every read kept. Every anomaly counted
// per record or per position must match exactly, and those counted per read (unexpected,
// rewritten) must be found in both or in neither; so must the verdict. Offsets and cuts
// fall on both sides of a chunk's edge, and below 0.
func TestRepeatsDoNotChangeTheVerdict(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	exact := []string{Lost, Duplicated, Reordered, Inconsistent, LostAccepted, Damaged, Unacknowledged}
	offsets := []int64{-1, 0, 1, 2, 3, repeatChunk - 1, repeatChunk, repeatChunk + 1}
	offset := func() int64 { return offsets[rng.IntN(len(offsets))] }
	for n := range 20000 {
		dropped, kept := NewHistory(), NewHistory()
		for range 1 + rng.IntN(40) {
			switch op := rng.IntN(20); {
			case op < 4:
				id, a := ID{uint64(1 + rng.IntN(2)), uint64(rng.IntN(6))}, Ack(rng.IntN(4))
				dropped.Sent(id, a)
				kept.Sent(id, a)
			case op == 4:
				p, from := rng.IntN(3), offset()
				dropped.Cut(p, from)
				kept.Cut(p, from)
			case op == 5:
				id := ID{uint64(1 + rng.IntN(2)), uint64(rng.IntN(6))}
				dropped.Damaged(id)
				kept.Damaged(id)
			default:
				r := Read{Partition: rng.IntN(3), Offset: offset(), ID: ID{uint64(1 + rng.IntN(2)), uint64(rng.IntN(6))},
					Valid: rng.IntN(30) > 0, Durable: rng.IntN(4) > 0}
				if rng.IntN(2) == 0 { // a repeat of a read at or below C, often
					r.ID = ID{uint64(1 + r.Partition%2), uint64(r.Offset+1) % 6}
					r.Valid, r.Durable = true, true
				}
				dropped.Read(r)
				kept.mu.reads.add(r)
			}
		}
		a, b := Check(dropped), Check(kept)
		if a.OK != b.OK || a.Reads != b.Reads || a.Distinct != b.Distinct {
			t.Fatalf("history %d: with repeats dropped %+v, all kept %+v", n, a, b)
		}
		for _, c := range exact {
			if a.Counts[c] != b.Counts[c] {
				t.Fatalf("history %d: %s %d with repeats dropped, %d with all kept (%q, %q)", n, c, a.Counts[c], b.Counts[c], a.Examples[c], b.Examples[c])
			}
		}
		for _, c := range []string{Unexpected, Rewritten} {
			if (a.Counts[c] > 0) != (b.Counts[c] > 0) {
				t.Fatalf("history %d: %s %d with repeats dropped, %d with all kept", n, c, a.Counts[c], b.Counts[c])
			}
		}
	}
}
