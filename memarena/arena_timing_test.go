package memarena

import "testing"

// BenchmarkAllocRelease measures one chunk allocation and release on one
// goroutine (the issue asks for at least 20 M/s and no Go-heap allocation).
func BenchmarkAllocRelease(b *testing.B) {
	a := newTestArena(b, Config{Size: 64 * MiB})
	b.SetBytes(a.chunkSize)
	b.ReportAllocs()
	for b.Loop() {
		s, err := a.Alloc()
		if err != nil {
			b.Fatal(err)
		}
		s.Release()
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds()/1e6, "M-allocs/s")
}

// BenchmarkAllocReleaseParallel is the same from every core at once.
func BenchmarkAllocReleaseParallel(b *testing.B) {
	a := newTestArena(b, Config{Size: 64 * MiB})
	b.SetBytes(a.chunkSize)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			s, err := a.Alloc()
			if err != nil {
				b.Error(err)
				return
			}
			s.Release()
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds()/1e6, "M-allocs/s")
}
