package crc32c

import "math/bits"

// poly is the Castagnoli polynomial without its x^32 term, in the usual (not reflected)
// bit order: bit i is the coefficient of x^i.
const poly = 0x1edc6f41

// xPowMod returns x^e mod P, bit i the coefficient of x^i.
func xPowMod(e int) uint32 {
	r := uint64(1)
	for range e {
		r <<= 1
		if r&(1<<32) != 0 {
			r ^= 1<<32 | poly
		}
	}
	return uint32(r)
}

// foldPair returns the two multipliers that move 128 bits of a message d bits further
// on (fold). The data are reflected: the first byte's lowest bit is the highest
// coefficient, so a little-endian 128-bit lane holds its high 64 coefficients H in the
// low quadword, bit-reversed, and its low 64, L, in the high one. Moving the lane d bits
// on is multiplying it by x^d: H·x^(d+64) + L·x^d, and modulo P each factor is a
// polynomial of degree below 32, so each product stays within the 128 bits of the lane
// it lands in. A carry-less product of two bit-reversed 64-bit operands is the reversed
// product shifted by one, that is the product times x: hence x^(d+63) and x^(d-1).
// Each multiplier is given bit-reversed in 64 bits, as the data are.
func foldPair(d int) [2]uint64 {
	return [2]uint64{
		bits.Reverse64(uint64(xPowMod(d + 63))), // for the low quadword (H)
		bits.Reverse64(uint64(xPowMod(d - 1))),  // for the high quadword (L)
	}
}

// foldConsts are the multipliers the assembly reads, pairs of quadwords:
//
//	[0:2]   fold by 2048 bits, four 64-byte blocks on (the main loop)
//	[2:4]   fold by 512 bits, one 64-byte block on
//	[4:12]  the four lanes of the last block onto the last lane: by 384, 256 and 128
//	        bits, and zero for the last lane itself (added as it is)
//
// Computed once at init, never written after.
var foldConsts = makeFoldConsts()

func makeFoldConsts() [12]uint64 {
	var k [12]uint64
	for i, d := range []int{2048, 512, 384, 256, 128} {
		p := foldPair(d)
		k[2*i], k[2*i+1] = p[0], p[1]
	}
	return k // k[10], k[11] stay zero
}
