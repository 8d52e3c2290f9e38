package memarena

import (
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"testing"
)

// fillArena appends total bytes of batches of batchSize, round robin over
// 1024 write buffers, none durable, and returns the buffers.
func fillArena(b *testing.B, a *Arena, total, batchSize int64) []*WriteBuffer {
	ws := make([]*WriteBuffer, 1024)
	for i := range ws {
		ws[i] = newWB(b, a, 0)
	}
	batch := pattern(int(batchSize), 1)
	for i := range total / batchSize {
		w, off := ws[i%1024], i/1024
		if err := w.Append(batch, off, off); err != nil {
			b.Fatalf("append %d: %v", i, err)
		}
	}
	return ws
}

func readUint64Metrics(names ...string) []uint64 {
	s := make([]metrics.Sample, len(names))
	for i, n := range names {
		s[i].Name = n
	}
	metrics.Read(s)
	out := make([]uint64, len(names))
	for i := range s {
		out[i] = s[i].Value.Uint64()
	}
	return out
}

// residentBytes reads this process's RSS from /proc.
func residentBytes() uint64 {
	data, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(data))
	pages, _ := strconv.ParseUint(f[1], 10, 64)
	return pages * uint64(os.Getpagesize())
}

// BenchmarkGoHeapWith4GiBArena fills a 4 GiB arena with batches of 1 KiB
// (the worst case for the index: 4 M batches) or 16 KiB and reports the Go
// heap, which must stay under 64 MiB, next to the process's RSS. The loop
// reads one batch.
func BenchmarkGoHeapWith4GiBArena(b *testing.B) {
	for _, batch := range []int64{1 * KiB, 16 * KiB} {
		b.Run("batch="+FormatSize(batch), func(b *testing.B) { benchGoHeap(b, batch) })
	}
}

func benchGoHeap(b *testing.B, batch int64) {
	a := newTestArena(b, Config{Size: 4*GiB + 256*MiB})
	ws := fillArena(b, a, 4*GiB, batch)
	runtime.GC()
	m := readUint64Metrics("/gc/heap/live:bytes", "/memory/classes/heap/objects:bytes", "/memory/classes/total:bytes")
	arena, rss := a.Stats().WriteBufferBytes, residentBytes()
	if m[0] >= uint64(64*MiB) {
		b.Errorf("Go heap %s with 4 GiB in the arena; want under 64 MiB", FormatSize(int64(m[0])))
	}
	rng := rand.New(rand.NewPCG(1, 1))
	spans := make([]Span, 0, 4)
	perBuffer := 4 * GiB / batch / int64(len(ws))
	b.SetBytes(batch)
	b.ReportAllocs()
	for b.Loop() {
		w := ws[rng.IntN(len(ws))]
		var err error
		if spans, err = w.Read(rng.Int64N(perBuffer), 1, spans[:0]); err != nil {
			b.Fatal(err)
		}
		spans = ReleaseAll(spans)
	}
	// Reported after the loop: b.Loop's timer reset clears earlier metrics.
	b.ReportMetric(float64(arena)/float64(MiB), "arena-MiB")
	b.ReportMetric(float64(m[0])/float64(MiB), "heap-live-MiB")
	b.ReportMetric(float64(m[1])/float64(MiB), "heap-objects-MiB")
	b.ReportMetric(float64(m[2])/float64(MiB), "go-runtime-total-MiB")
	b.ReportMetric(float64(rss)/float64(MiB), "rss-MiB")
}

// gcPauses forces n collections and returns the median and the 99th
// percentile of the stop-the-world pauses they caused, in seconds (each the
// upper bound of its histogram bucket).
func gcPauses(n int) (p50, p99 float64) {
	const name = "/sched/pauses/total/gc:seconds"
	read := func() *metrics.Float64Histogram {
		s := []metrics.Sample{{Name: name}}
		metrics.Read(s)
		return s[0].Value.Float64Histogram()
	}
	before := read()
	for range n {
		runtime.GC()
	}
	after := read()
	var total uint64
	counts := make([]uint64, len(after.Counts))
	for i := range counts {
		counts[i] = after.Counts[i] - before.Counts[i]
		total += counts[i]
	}
	var seen uint64
	for i, c := range counts {
		seen += c
		if p50 == 0 && seen*2 >= total {
			p50 = after.Buckets[i+1]
		}
		if seen*100 >= total*99 {
			return p50, after.Buckets[i+1]
		}
	}
	return p50, 0
}

// BenchmarkGCPause256MiBvs4GiB measures, in one run, the p99 of GC pauses
// (500 forced collections each) with a full 256 MiB arena, then with a full
// 4 GiB arena added, then with the 256 MiB one alone again: off-heap memory
// must not lengthen them, and the two 256 MiB figures show the noise of the
// host. The loop is one forced GC.
func BenchmarkGCPause256MiBvs4GiB(b *testing.B) {
	const gcs = 500
	small := newTestArena(b, Config{Size: 512 * MiB})
	fillArena(b, small, 256*MiB, KiB)
	runtime.GC()
	var p50, p99 [3]float64
	p50[0], p99[0] = gcPauses(gcs)
	big, err := New(Config{Size: 4*GiB + 256*MiB})
	if err != nil {
		b.Fatal(err)
	}
	bigWS := fillArena(b, big, 4*GiB, KiB)
	runtime.GC()
	p50[1], p99[1] = gcPauses(gcs)
	for _, w := range bigWS {
		w.Close()
	}
	if err := big.Close(); err != nil {
		b.Fatal(err)
	}
	runtime.GC()
	p50[2], p99[2] = gcPauses(gcs)
	b.ReportAllocs()
	for b.Loop() {
		runtime.GC()
	}
	for i, name := range []string{"256MiB", "4GiB", "256MiB-again"} {
		b.ReportMetric(p50[i]*1e6, "p50-pause-"+name+"-µs")
		b.ReportMetric(p99[i]*1e6, "p99-pause-"+name+"-µs")
	}
}
