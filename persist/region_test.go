package persist

import "testing"

// countRef counts the releases of a region's reference.
type countRef struct{ n int }

func (c *countRef) Release() { c.n++ }

// TestRegionReleaseOnce: a region's reference is dropped once however often it is
// released, and a released region holds no bytes (nothing can send it) but keeps its
// offsets.
func TestRegionReleaseOnce(t *testing.T) {
	ref := &countRef{}
	r := NewRegion(nil, 100, 50, 7, 9, ref)
	r.Release()
	r.Release()
	if ref.n != 1 {
		t.Fatalf("reference released %d times, want once", ref.n)
	}
	if !r.Empty() || r.Pos != 0 || r.File != nil || r.Ref() != nil {
		t.Fatalf("released region still locates bytes: %+v", r)
	}
	if r.Offset != 7 || r.NextOffset != 9 {
		t.Fatalf("released region lost its offsets: %+v", r)
	}
	var empty Region
	empty.Release() // an empty region: nothing to drop
}
