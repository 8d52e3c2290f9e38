package crc32c

import "golang.org/x/sys/cpu"

// canFold: the processor has the 512-bit carry-less multiplication, the AVX-512 forms of
// the other instructions on 128- and 256-bit registers (VL), and the CRC32 instruction
// for the last 16 bytes; and the operating system saves the registers (x/sys/cpu checks
// that for AVX-512). Every instruction of fold_amd64.s is covered by these (a review
// checked each encoding). Set at init, never written after.
var canFold = cpu.X86.HasAVX512F && cpu.X86.HasAVX512VL && cpu.X86.HasAVX512VPCLMULQDQ &&
	cpu.X86.HasSSE42

// foldMin is the shortest input folded: below it hash/crc32's three streams are as fast
// (BenchmarkUpdate), and the fold's fixed cost (four blocks loaded, the reduction to one
// lane, the last 16 bytes through the CRC32 instruction) is not paid back.
const foldMin = 256

// foldAVX512 returns the CRC register (not inverted) after p, from the register crc; p
// is a multiple of 64 bytes and at least 256. It folds p, with crc added into its first
// four bytes, to 128 bits congruent to it modulo P placed as its last 16 bytes
// (consts.go), and passes those through the CRC32 instruction from a zero register.
// k is &foldConsts.
//
//go:noescape
func foldAVX512(crc uint32, p []byte, k *[12]uint64) uint32

func fold(crc uint32, p []byte) uint32 { return foldAVX512(crc, p, &foldConsts) }
