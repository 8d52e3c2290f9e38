package client

import (
	"fmt"
	"testing"

	"sluice/wire"
)

// TestFetcherIndex: a lane's partitions are found by id whatever their order, and an id
// the lane does not read (another lane's, past the largest, the largest possible) is
// absent.
func TestFetcherIndex(t *testing.T) {
	ps := []*cpart{{id: 7}, {id: 1}, {id: 5}, {id: 0}}
	f := &fetcher{parts: ps}
	for i, p := range ps {
		if got := f.index(uint32(p.id)); got != i {
			t.Fatalf("partition %d at %d, want %d", p.id, got, i)
		}
	}
	for _, id := range []uint32{2, 3, 4, 6, 8, 1 << 16, 1<<32 - 1} {
		if got := f.index(id); got != -1 {
			t.Fatalf("partition %d found at %d: the lane does not read it", id, got)
		}
	}
}

// BenchmarkFetcherTakeWide is the client's cost per answer for a lane of many partitions
// (a topic of thousands on one broker): every part of the answer is looked up by
// readEarly and by take. Reported per answer; most parts are empty, as at the tail.
func BenchmarkFetcherTakeWide(b *testing.B) {
	for _, k := range []int{16, 256, 2048} {
		b.Run(fmt.Sprintf("parts=%d", k), func(b *testing.B) {
			ps := make([]*cpart, k)
			pos := make([]int64, k)
			parts := make([]wire.FetchPart, k)
			for i := range ps {
				ps[i] = &cpart{id: 2 * i} // every second partition: the other lane has the rest
				// The answer's order is the request's, rotated.
				j := (i + k/3) % k
				parts[j] = wire.FetchPart{Partition: uint32(2 * i), NextOffset: 0}
			}
			f := &fetcher{parts: ps, pos: pos, version: 2}
			a := &answer{f: f}
			b.ReportAllocs()
			for b.Loop() {
				a.parts = a.parts[:0]
				f.seen = append(f.seen[:0], make([]bool, k)...)
				for i := range parts {
					if f.index(parts[i].Partition) < 0 { // readEarly's check
						b.Fatal("absent")
					}
				}
				for i := range parts {
					if err := f.take(a, &parts[i]); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}
