package memarena

import (
	"bytes"
	"testing"
)

// newTestArena returns an arena that the test's cleanup closes, which fails
// the test if an owner is left open or a span unreleased.
func newTestArena(t testing.TB, c Config) *Arena {
	t.Helper()
	a, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := a.Close(); err != nil {
			t.Errorf("arena.Close: %v", err)
		}
	})
	return a
}

// smallConfig is a 4 KiB-chunk arena of n chunks in 16 KiB slabs.
func smallConfig(n int64) Config {
	return Config{Size: n * 4 * KiB, ChunkSize: 4 * KiB, SlabSize: 16 * KiB}
}

// fillPattern fills b with bytes derived from seed, so that any batch can be
// regenerated from (seed, len) and compared.
func fillPattern(b []byte, seed uint64) {
	x := seed*0x9e3779b97f4a7c15 + 1
	for i := range b {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		b[i] = byte(x)
	}
}

func pattern(n int, seed uint64) []byte {
	b := make([]byte, n)
	fillPattern(b, seed)
	return b
}

// joinSpans concatenates the spans' bytes.
func joinSpans(spans []Span) []byte {
	var b bytes.Buffer
	for i := range spans {
		b.Write(spans[i].Bytes())
	}
	return b.Bytes()
}

func newWB(t testing.TB, a *Arena, next int64) *WriteBuffer {
	t.Helper()
	w, err := a.NewWriteBuffer(next)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Close)
	return w
}

func mustAppend(t testing.TB, w *WriteBuffer, b []byte, base, last int64) {
	t.Helper()
	if err := w.Append(b, base, last); err != nil {
		t.Fatalf("Append(%d bytes, %d, %d): %v", len(b), base, last, err)
	}
}
