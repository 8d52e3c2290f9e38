// Package crc32c computes CRC-32C (Castagnoli), the checksum of every batch, the same
// value as hash/crc32 with crc32.Castagnoli, faster on long inputs where the processor
// can fold 64 bytes at a time.
//
// Why not hash/crc32 alone: each produced byte is checksummed three times on its way
// (the producer seals its batch, the broker checks it before accepting it, the consumer
// checks it again), and at a million 1 KiB records a second those checks took 13-14 % of
// both the broker's and the harness's processor time (the profiles in
// docs/bench/latency-notebook.md). hash/crc32 computes Castagnoli with the SSE 4.2
// CRC32 instruction, three streams at a time: about 18 GB/s on the benchmark hosts. On
// processors with AVX-512 and VPCLMULQDQ this package folds four 64-byte blocks per
// step with carry-less multiplications instead (the method of Intel's "Fast CRC
// Computation for Generic Polynomials Using PCLMULQDQ Instruction"), passes the 128 bits
// left through the CRC32 instruction, and leaves the tail (under 64 bytes) to hash/crc32.
// Elsewhere, and for short inputs, it is hash/crc32.
package crc32c

import "hash/crc32"

// table is the Castagnoli table of hash/crc32, which uses the CRC32 instruction where the
// processor has it. Never written after init.
var table = crc32.MakeTable(crc32.Castagnoli)

// Checksum returns the CRC-32C of p.
func Checksum(p []byte) uint32 { return Update(0, p) }

// Update returns the result of adding the bytes of p to crc, as crc32.Update does with
// the Castagnoli table.
func Update(crc uint32, p []byte) uint32 {
	if len(p) < foldMin || !canFold {
		return crc32.Update(crc, table, p)
	}
	n := len(p) &^ 63
	// hash/crc32 inverts the register on the way in and out; fold takes and gives it as
	// it is.
	return crc32.Update(^fold(^crc, p[:n]), table, p[n:])
}
