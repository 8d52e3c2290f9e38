package crc32c

// canFold: the processor has the 512-bit carry-less multiplication, the AVX-512 forms of
// the other instructions on 128- and 256-bit registers (VL), and the CRC32 instruction
// for the last 16 bytes; and the operating system saves the registers (detectFold).
// Every instruction of fold_amd64.s is covered by these (a review checked each
// encoding). Set at init, never written after.
var canFold = detectFold()

// foldMin is the shortest input folded, the four blocks the assembly starts from. At
// that length the fold and hash/crc32's three streams take about as long
// (BenchmarkUpdate: 31-35 ns against 28-42 ns for 256 bytes, 20-24 against 37-39 for
// 512); from there on the fold's fixed cost (the reduction to one lane, the last 16
// bytes through the CRC32 instruction) is paid back.
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
