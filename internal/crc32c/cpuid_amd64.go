package crc32c

// The processor's features, read with CPUID here rather than through golang.org/x/sys/cpu:
// the helpers under internal use the standard library only (test/layering_test.go), and
// the standard library's own detection (internal/cpu) cannot be imported.

func cpuid(leaf, sub uint32) (eax, ebx, ecx, edx uint32)

func xgetbv() uint32

// Feature bits (Intel SDM vol. 2A, CPUID; vol. 1 §13.3, XCR0).
const (
	cpuid1SSE42    = 1 << 20 // leaf 1, ECX
	cpuid1OSXSAVE  = 1 << 27 // leaf 1, ECX: XGETBV is usable
	cpuid1AVX      = 1 << 28 // leaf 1, ECX
	cpuid7AVX512F  = 1 << 16 // leaf 7, EBX
	cpuid7AVX512VL = 1 << 31 // leaf 7, EBX
	cpuid7VPCLMUL  = 1 << 10 // leaf 7, ECX: VPCLMULQDQ
	// xcr0AVX512 are the state components the operating system must save for AVX-512
	// registers to survive a context switch: SSE, AVX, the opmasks, the upper halves of
	// ZMM0-15 and ZMM16-31.
	xcr0AVX512 = 1<<1 | 1<<2 | 1<<5 | 1<<6 | 1<<7
)

// detectFold reports whether the processor has every instruction fold_amd64.s uses
// (AVX-512 F and VL, VPCLMULQDQ, and SSE 4.2 for the CRC32 instruction) and the operating
// system saves the registers they use.
func detectFold() bool {
	maxLeaf, _, _, _ := cpuid(0, 0)
	if maxLeaf < 7 {
		return false
	}
	_, _, ecx1, _ := cpuid(1, 0)
	if ecx1&(cpuid1SSE42|cpuid1OSXSAVE|cpuid1AVX) != cpuid1SSE42|cpuid1OSXSAVE|cpuid1AVX {
		return false
	}
	if xgetbv()&xcr0AVX512 != xcr0AVX512 {
		return false
	}
	_, ebx7, ecx7, _ := cpuid(7, 0)
	return ebx7&(cpuid7AVX512F|cpuid7AVX512VL) == cpuid7AVX512F|cpuid7AVX512VL && ecx7&cpuid7VPCLMUL != 0
}
