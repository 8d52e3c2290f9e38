//go:build unix

package crc32c

import (
	"hash/crc32"
	"math/bits"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// ref is the checksum everything here is held to.
func ref(crc uint32, p []byte) uint32 {
	return crc32.Update(crc, crc32.MakeTable(crc32.Castagnoli), p)
}

func randBytes(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// TestGuardPages puts one readable page between two PROT_NONE pages and checksums every
// slice that ends at the page's end and every slice that starts at its start, of every
// length 0..page: a read past the end (or before the start) of p faults.
func TestGuardPages(t *testing.T) {
	ps := unix.Getpagesize()
	mem, err := unix.Mmap(-1, 0, 3*ps, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(mem)
	if err := unix.Mprotect(mem[:ps], unix.PROT_NONE); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mprotect(mem[2*ps:], unix.PROT_NONE); err != nil {
		t.Fatal(err)
	}
	page := mem[ps : 2*ps : 2*ps]
	rng := rand.New(rand.NewPCG(11, 12))
	for i := range page {
		page[i] = byte(rng.Uint32())
	}
	for n := 0; n <= ps; n++ {
		init := rng.Uint32()
		for _, p := range [][]byte{page[ps-n:], page[:n:n]} {
			if got, want := Update(init, p), ref(init, p); got != want {
				t.Fatalf("len %d at %p: got %08x, hash/crc32 %08x", n, p, got, want)
			}
		}
	}
}

// TestEveryLengthAndOffset: every length 256..2048 (every path through the assembly:
// with and without the 256-byte loop, 0-3 single blocks, every tail 0-63), at every
// offset within 64 bytes, with random, zero and all-ones initial values, on random data,
// all zeroes and all ones.
func TestEveryLengthAndOffset(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	zeros := make([]byte, 2048+64)
	ones := make([]byte, 2048+64)
	for i := range ones {
		ones[i] = 0xff
	}
	bufs := [][]byte{randBytes(rng, 2048+64), zeros, ones}
	for n := 256; n <= 2048; n++ {
		for off := range 64 {
			for bi, buf := range bufs {
				p := buf[off : off+n]
				for _, init := range []uint32{0, 0xffffffff, rng.Uint32()} {
					if got, want := Update(init, p), ref(init, p); got != want {
						t.Fatalf("buf %d len %d offset %d init %08x: got %08x, hash/crc32 %08x",
							bi, n, off, init, got, want)
					}
				}
			}
		}
	}
}

// TestLong: 64 MiB (the 256-byte loop run 262143 times), and the same at lengths just
// off a multiple of 256.
func TestLong(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 32))
	buf := randBytes(rng, 64<<20+300)
	for _, n := range []int{64 << 20, 64<<20 - 1, 64<<20 + 64, 64<<20 + 191, 64<<20 + 255, 64<<20 + 300} {
		init := rng.Uint32()
		if got, want := Update(init, buf[:n]), ref(init, buf[:n]); got != want {
			t.Fatalf("len %d: got %08x, hash/crc32 %08x", n, got, want)
		}
	}
}

// TestEveryCut: Update continues a checksum across a cut at every position.
func TestEveryCut(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 42))
	buf := randBytes(rng, 2100)
	want := ref(0, buf)
	for cut := 0; cut <= len(buf); cut++ {
		if got := Update(Checksum(buf[:cut]), buf[cut:]); got != want {
			t.Fatalf("cut at %d: got %08x, want %08x", cut, got, want)
		}
	}
}

// TestConcurrent: many goroutines (more than processors, so they are preempted and
// switched while the vector registers are live) checksum their own and a shared buffer
// while another goroutine keeps the garbage collector running.
func TestConcurrent(t *testing.T) {
	rng := rand.New(rand.NewPCG(51, 52))
	shared := randBytes(rng, 1<<20)
	sharedWant := ref(0, shared)
	stop := make(chan struct{})
	gcDone := make(chan struct{})
	go func() {
		defer close(gcDone)
		for {
			select {
			case <-stop:
				return
			default:
				runtime.GC()
			}
		}
	}()
	iters := 300
	if testing.Short() {
		iters = 50
	}
	var wg sync.WaitGroup
	workers := 8 * runtime.GOMAXPROCS(0)
	errs := make(chan string, workers)
	for g := range workers {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 53))
			own := randBytes(r, 70000)
			for range iters {
				n := 256 + r.IntN(len(own)-256)
				off := r.IntN(len(own) - n + 1)
				p := own[off : off+n]
				init := r.Uint32()
				if got, want := Update(init, p), ref(init, p); got != want {
					errs <- "own buffer mismatch"
					return
				}
				if Checksum(shared) != sharedWant {
					errs <- "shared buffer mismatch"
					return
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	<-gcDone
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
}

// TestXPowModIndependent recomputes every multiplier two other ways: x^e mod P by
// square-and-multiply in GF(2)[x], and from hash/crc32 itself (the raw register of
// x^j, j < 8, after e/8 zero bytes is x^(j+8·(e/8)) mod P, bit-reversed).
func TestXPowModIndependent(t *testing.T) {
	const full = 1<<32 | poly
	mulmod := func(a, b uint64) uint64 { // a, b of degree < 32
		var r uint64
		for i := range 32 {
			if b&(1<<i) != 0 {
				r ^= a << i
			}
		}
		for i := 63; i >= 32; i-- {
			if r&(1<<i) != 0 {
				r ^= full << (i - 32)
			}
		}
		return r
	}
	powmod := func(e int) uint32 {
		r, b := uint64(1), uint64(2)
		for ; e > 0; e >>= 1 {
			if e&1 != 0 {
				r = mulmod(r, b)
			}
			b = mulmod(b, b)
		}
		return uint32(r)
	}
	fromCRC := func(e int) uint32 {
		reg := uint32(1) << (31 - e%8) // x^(e%8), reflected
		raw := ^crc32.Update(^reg, table, make([]byte, e/8))
		return bits.Reverse32(raw)
	}
	for _, e := range []int{0, 1, 31, 32, 33, 63, 64, 95, 127, 191, 255, 319, 383, 447, 511, 575, 2047, 2111} {
		if a, b, c := xPowMod(e), powmod(e), fromCRC(e); a != b || a != c {
			t.Fatalf("x^%d mod P: xPowMod %08x, square-and-multiply %08x, from hash/crc32 %08x", e, a, b, c)
		}
	}
	want := [12]uint64{}
	for i, d := range []int{2048, 512, 384, 256, 128} {
		want[2*i] = uint64(bits.Reverse32(powmod(d+63))) << 32
		want[2*i+1] = uint64(bits.Reverse32(powmod(d-1))) << 32
	}
	if foldConsts != want {
		t.Fatalf("foldConsts %016x, recomputed %016x", foldConsts, want)
	}
	// The known check value of CRC-32C.
	if got := Checksum([]byte("123456789")); got != 0xe3069283 {
		t.Fatalf(`Checksum("123456789") = %08x, want e3069283`, got)
	}
}
