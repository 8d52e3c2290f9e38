package crc32c

import (
	"encoding/binary"
	"hash/crc32"
	"math/rand/v2"
	"testing"
)

// clmul is a carry-less multiplication of two 64-bit operands in Go, as VPCLMULQDQ
// computes it for one pair of quadwords.
func clmul(a, b uint64) (lo, hi uint64) {
	for i := range 64 {
		if b&(1<<i) != 0 {
			lo ^= a << i
			if i > 0 {
				hi ^= a >> (64 - i)
			}
		}
	}
	return lo, hi
}

// TestFoldConsts checks every multiplier the assembly uses, on any processor: 16 bytes V
// followed by d/8 zero bytes must have the CRC of d/8 zero bytes followed by V moved d
// bits on with the multipliers (the two products added, as the assembly adds them).
// Both messages have the same length, and the CRC register starts at zero for both (an
// initial 0xffffffff is hash/crc32's inverted zero), so they agree exactly when the
// moved V is congruent to V·x^d modulo P.
func TestFoldConsts(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for i, d := range []int{2048, 512, 384, 256, 128} {
		k := [2]uint64{foldConsts[2*i], foldConsts[2*i+1]}
		if k != foldPair(d) {
			t.Fatalf("foldConsts[%d:%d] are not the pair for %d bits", 2*i, 2*i+2, d)
		}
		for range 100 {
			vlo, vhi := rng.Uint64(), rng.Uint64()
			alo, ahi := clmul(vlo, k[0])
			blo, bhi := clmul(vhi, k[1])
			wlo, whi := alo^blo, ahi^bhi

			m1 := make([]byte, 16+d/8)
			binary.LittleEndian.PutUint64(m1, vlo)
			binary.LittleEndian.PutUint64(m1[8:], vhi)
			m2 := make([]byte, 16+d/8)
			binary.LittleEndian.PutUint64(m2[d/8:], wlo)
			binary.LittleEndian.PutUint64(m2[d/8+8:], whi)
			if a, b := crc32.Update(0xffffffff, table, m1), crc32.Update(0xffffffff, table, m2); a != b {
				t.Fatalf("fold by %d bits of %016x%016x: CRC %08x, moved %08x", d, vhi, vlo, a, b)
			}
		}
	}
	if foldConsts[10] != 0 || foldConsts[11] != 0 {
		t.Fatal("the last lane's multipliers must be zero: it is added as it is")
	}
}
