package memarena

import (
	"math/rand/v2"
	"testing"
)

// benchAppend appends batches of size n to one buffer whose checkpoint
// follows 1 MiB behind, in a 64 MiB arena: steady state with reclaim.
func benchAppend(b *testing.B, n int) {
	a := newTestArena(b, Config{Size: 64 * MiB})
	w := newWB(b, a, 0)
	batch := pattern(n, 1)
	lag := MiB / int64(n)
	b.SetBytes(int64(n))
	b.ReportAllocs()
	next := int64(0)
	for b.Loop() {
		if err := w.Append(batch, next, next); err != nil {
			b.Fatal(err)
		}
		w.SetDurable(next - lag)
		next++
	}
}

func BenchmarkAppend1KiB(b *testing.B)  { benchAppend(b, 1024) }
func BenchmarkAppend16KiB(b *testing.B) { benchAppend(b, 16*1024) }
func BenchmarkAppend1MiB(b *testing.B)  { benchAppend(b, 1024*1024) }

// BenchmarkRead reads up to 64 KiB of 4 KiB batches from a random recent
// offset and releases the spans: the consumer's hit path.
func BenchmarkRead(b *testing.B) {
	a := newTestArena(b, Config{Size: 64 * MiB})
	w := newWB(b, a, 0)
	const batches = 8192 // 32 MiB
	batch := pattern(4096, 1)
	for i := range int64(batches) {
		if err := w.Append(batch, i, i); err != nil {
			b.Fatal(err)
		}
	}
	spans := make([]Span, 0, 8)
	rng := rand.New(rand.NewPCG(1, 1))
	b.SetBytes(64 * 1024)
	b.ReportAllocs()
	for b.Loop() {
		var err error
		spans, err = w.Read(rng.Int64N(batches-16), 64*1024, spans[:0])
		if err != nil || len(spans) == 0 {
			b.Fatal(err)
		}
		spans = ReleaseAll(spans)
	}
}

// BenchmarkRange is the persister's side: batches of 16000 bytes appended, a
// segment roll's padding every 64 MiB, and every 1 MB of them held with
// Range (as for one pwritev), released, and made durable. It reports the bytes
// appended and held per second.
func BenchmarkRange(b *testing.B) {
	a := newTestArena(b, Config{Size: 64 * MiB})
	w := newWB(b, a, 0)
	const batchSize, per = 16000, 64 // so that a roll pads
	batch := pattern(int(batchSize), 1)
	spans := make([]Span, 0, 32)
	var next, tail, from int64
	b.SetBytes(batchSize)
	b.ReportAllocs()
	for b.Loop() {
		if err := w.Append(batch, next, next); err != nil {
			b.Fatal(err)
		}
		next, tail = next+1, tail+batchSize
		if next%per != 0 {
			continue
		}
		var err error
		if spans, err = w.Range(from, tail, spans[:0]); err != nil {
			b.Fatal(err)
		}
		spans = ReleaseAll(spans)
		w.SetDurable(next - 1)
		if next%(64*per) == 0 { // a segment roll
			tail = (tail + 4095) &^ 4095
			if err := w.Skip(tail); err != nil {
				b.Fatal(err)
			}
		}
		from = tail
	}
}

// BenchmarkBlockCacheGet is a cache hit and release.
func BenchmarkBlockCacheGet(b *testing.B) {
	a := newTestArena(b, Config{Size: 64 * MiB})
	c := newBC(b, a, 0)
	block := pattern(int(a.chunkSize), 1)
	for i := range int64(512) {
		if err := c.Put(1, i, block); err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(a.chunkSize)
	b.ReportAllocs()
	i := int64(0)
	for b.Loop() {
		s, ok := c.Get(1, i&511)
		if !ok {
			b.Fatal("miss")
		}
		s.Release()
		i++
	}
}
