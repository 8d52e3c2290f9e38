package crc32c

import (
	"hash/crc32"
	"math/rand/v2"
	"testing"
)

// TestMatchesHashCRC32 compares Update with hash/crc32 on every length up to a few
// folds and some long ones, at every alignment of the first byte within 64, with
// nonzero initial values: the folding path (from foldMin up) and the tail path both.
func TestMatchesHashCRC32(t *testing.T) {
	if !canFold {
		t.Log("this processor cannot fold: Update is hash/crc32 here, compared all the same")
	}
	rng := rand.New(rand.NewPCG(1, 2))
	buf := make([]byte, 70000)
	for i := range buf {
		buf[i] = byte(rng.Uint32())
	}
	lengths := []int{0, 1, 15, 16, 63, 64, 255, 256, 65535, 65536, 65537, 69000}
	for n := foldMin - 70; n <= foldMin+700; n++ {
		lengths = append(lengths, n)
	}
	for _, n := range lengths {
		for _, off := range []int{0, 1, 7, 31, 63} {
			p := buf[off : off+n]
			for _, init := range []uint32{0, 0xffffffff, rng.Uint32()} {
				want := crc32.Update(init, table, p)
				if got := Update(init, p); got != want {
					t.Fatalf("len %d offset %d init %08x: got %08x, hash/crc32 %08x", n, off, init, got, want)
				}
			}
		}
	}
}

// TestChained checks that Update continues a checksum as hash/crc32 does, across splits
// that put the fold on either side.
func TestChained(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	buf := make([]byte, 9000)
	for i := range buf {
		buf[i] = byte(rng.Uint32())
	}
	want := crc32.Checksum(buf, table)
	for _, cut := range []int{0, 1, 511, 512, 4096, 8487, 8999, 9000} {
		if got := Update(Update(0, buf[:cut]), buf[cut:]); got != want {
			t.Fatalf("cut at %d: got %08x, want %08x", cut, got, want)
		}
	}
}

// TestZeroes and a single bit: patterns where a wrong multiplier would still pass on
// random data by chance are not possible for a CRC, but a single set bit at each
// position of a folded block tests every coefficient of every multiplier.
func TestSingleBits(t *testing.T) {
	const n = 1024
	buf := make([]byte, n)
	for bit := 0; bit < n*8; bit++ {
		buf[bit/8] = 1 << (bit % 8)
		if got, want := Update(0, buf), crc32.Update(0, table, buf); got != want {
			t.Fatalf("bit %d set: got %08x, hash/crc32 %08x", bit, got, want)
		}
		buf[bit/8] = 0
	}
}

// FuzzUpdate compares Update with hash/crc32 on any input and initial value.
func FuzzUpdate(f *testing.F) {
	f.Add(uint32(0), make([]byte, 1000))
	f.Add(uint32(0x12345678), []byte("sluice"))
	f.Fuzz(func(t *testing.T, init uint32, p []byte) {
		if got, want := Update(init, p), crc32.Update(init, table, p); got != want {
			t.Fatalf("len %d init %08x: got %08x, hash/crc32 %08x", len(p), init, got, want)
		}
	})
}

func benchUpdate(b *testing.B, n int, f func([]byte) uint32) {
	buf := make([]byte, n)
	b.SetBytes(int64(n))
	for b.Loop() {
		f(buf)
	}
}

// BenchmarkUpdate: this package against hash/crc32, at a record's size, a small batch
// and a large one (in the cache: the checks run on data just read or written).
func BenchmarkUpdate(b *testing.B) {
	for _, n := range []int{256, 384, 512, 1024, 1536, 2048, 3072, 4096, 65536, 1 << 20} {
		b.Run("crc32c/"+size(n), func(b *testing.B) { benchUpdate(b, n, Checksum) })
		b.Run("hash-crc32/"+size(n), func(b *testing.B) {
			benchUpdate(b, n, func(p []byte) uint32 { return crc32.Checksum(p, table) })
		})
	}
}

func size(n int) string {
	switch {
	case n >= 1<<20:
		return itoa(n>>20) + "MiB"
	case n >= 1<<10:
		if n%1024 != 0 {
			return itoa(n) + "B"
		}
		return itoa(n>>10) + "KiB"
	}
	return itoa(n) + "B"
}

func itoa(n int) string {
	if n < 10 {
		return string(rune('0' + n))
	}
	return itoa(n/10) + string(rune('0'+n%10))
}
