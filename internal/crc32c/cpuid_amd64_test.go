package crc32c

import (
	"testing"

	"golang.org/x/sys/cpu"
)

// TestDetectFold: the package's own CPUID reading agrees with golang.org/x/sys/cpu on
// this processor (x/sys/cpu also checks that the operating system saves the AVX-512
// registers).
func TestDetectFold(t *testing.T) {
	want := cpu.X86.HasAVX512F && cpu.X86.HasAVX512VL && cpu.X86.HasAVX512VPCLMULQDQ && cpu.X86.HasSSE42
	if got := detectFold(); got != want {
		t.Fatalf("detectFold() = %v, x/sys/cpu says %v", got, want)
	}
	t.Logf("folding with AVX-512: %v", want)
}
