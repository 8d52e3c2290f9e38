package batch

import "testing"

// TestBuilderGrowDoubles: a batch that outgrows its buffer is moved to one exactly twice
// as large each time, so a 1 MiB batch begun in 64 KiB moves at most 5 times (4 doublings,
// and one for rounding); growing by a quarter, as append does for large slices, took 13.
func TestBuilderGrowDoubles(t *testing.T) {
	value := make([]byte, 1000)
	var b Builder
	b.Reset(make([]byte, 0, 64<<10), 1, 0)
	moves, last := 0, 64<<10
	for i := 0; b.Len() < 1<<20; i++ {
		b.Add(0, int64(i), nil, value)
		if c := cap(b.dst); c != last {
			if c != 2*last {
				t.Fatalf("buffer grew from %d to %d bytes, not twice (slices.Grow overshot to 2.5-3 times)", last, c)
			}
			moves, last = moves+1, c
		}
	}
	if moves > 5 {
		t.Fatalf("a 1 MiB batch begun in 64 KiB moved %d times", moves)
	}
	if _, err := Check(b.Finish()); err != nil {
		t.Fatal(err)
	}
}
