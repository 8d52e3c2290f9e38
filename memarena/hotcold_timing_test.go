package memarena

import (
	"math/rand/v2"
	"testing"
)

// BenchmarkHotCold puts 10 000 cold write buffers (3 chunks of durable data
// each, never read) and 1 hot one in a 1 GiB arena. Each iteration appends a
// 16 KiB batch to the hot buffer (checkpoint 4 MiB behind) and reads 64 KiB
// from a random point of its last 768 MiB, which the arena can hold once the
// cold buffers gave way. It reports the hot reads' hit ratio (at least 99%
// wanted) and the most chunks any cold buffer still holds (at most 1).
func BenchmarkHotCold(b *testing.B) {
	a := newTestArena(b, Config{Size: GiB, ChunkSize: 16 * KiB})
	cold := make([]*WriteBuffer, 10_000)
	coldBatch := pattern(13*1024, 2)
	for i := range cold {
		cold[i] = newWB(b, a, 0)
		for off := range int64(3) {
			mustAppend(b, cold[i], coldBatch, off, off)
		}
		cold[i].SetDurable(2)
	}
	hot := newWB(b, a, 0)
	const batchSize, young = 16 * 1024, 768 * MiB / (16 * 1024)
	batch := pattern(batchSize, 1)
	spans := make([]Span, 0, 8)
	rng := rand.New(rand.NewPCG(1, 1))
	var next, reads, hits int64
	b.SetBytes(batchSize)
	b.ReportAllocs()
	for b.Loop() {
		if err := hot.Append(batch, next, next); err != nil {
			b.Fatal(err)
		}
		hot.SetDurable(next - 256)
		next++
		var err error
		spans, err = hot.Read(next-1-rng.Int64N(min(next, young)), 64*1024, spans[:0])
		if reads++; err == nil {
			hits++
		}
		spans = ReleaseAll(spans)
	}
	maxCold, coldChunks := 0, 0
	for _, w := range cold {
		n := w.Stats().Chunks
		maxCold, coldChunks = max(maxCold, n), coldChunks+n
	}
	ratio := float64(hits) / float64(reads)
	b.ReportMetric(100*ratio, "hot-hit-%")
	b.ReportMetric(float64(maxCold), "max-idle-chunks")
	b.ReportMetric(float64(coldChunks*16)/1024, "idle-MiB")
	b.ReportMetric(float64(next*batchSize)/float64(GiB), "hot-GiB-written")
	if ratio < 0.99 || maxCold > 1 {
		b.Errorf("hot hit ratio %.4f (want >= 0.99), idle buffers hold up to %d chunks (want <= 1)", ratio, maxCold)
	}
}
