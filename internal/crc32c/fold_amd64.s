#include "textflag.h"

// func foldAVX512(crc uint32, p []byte, k *[12]uint64) uint32
//
// Four accumulators of 64 bytes (Z0-Z3) each move 256 bytes on per step, so that four
// independent multiplications are in flight; then they fold into one (Z3), its four
// 16-byte lanes into one, and that through the CRC32 instruction to the CRC register. See consts.go for the multipliers and why they are what they
// are. p's length is a multiple of 64 and at least 256 (Update makes sure).
TEXT ·foldAVX512(SB), NOSPLIT, $0-44
	MOVL crc+0(FP), AX
	MOVQ p_base+8(FP), SI
	MOVQ p_len+16(FP), CX
	MOVQ k+32(FP), DX

	VMOVDQU64 (SI), Z0
	VMOVDQU64 64(SI), Z1
	VMOVDQU64 128(SI), Z2
	VMOVDQU64 192(SI), Z3
	VMOVD     AX, X4      // zeroes the rest of Z4
	VPXORQ    Z4, Z0, Z0  // the initial register into the first four bytes
	ADDQ      $256, SI
	SUBQ      $256, CX

	VBROADCASTI32X4 (DX), Z8 // fold by 2048 bits, in every lane
	CMPQ            CX, $256
	JB              fold512

	PCALIGN $16
loop256:
	VMOVDQU64  (SI), Z12
	VMOVDQU64  64(SI), Z13
	VMOVDQU64  128(SI), Z14
	VMOVDQU64  192(SI), Z15
	VPCLMULQDQ $0x00, Z8, Z0, Z4
	VPCLMULQDQ $0x11, Z8, Z0, Z0
	VPCLMULQDQ $0x00, Z8, Z1, Z5
	VPCLMULQDQ $0x11, Z8, Z1, Z1
	VPCLMULQDQ $0x00, Z8, Z2, Z6
	VPCLMULQDQ $0x11, Z8, Z2, Z2
	VPCLMULQDQ $0x00, Z8, Z3, Z7
	VPCLMULQDQ $0x11, Z8, Z3, Z3
	VPTERNLOGD $0x96, Z12, Z4, Z0 // Z0 = Z0 ^ Z4 ^ Z12
	VPTERNLOGD $0x96, Z13, Z5, Z1
	VPTERNLOGD $0x96, Z14, Z6, Z2
	VPTERNLOGD $0x96, Z15, Z7, Z3
	ADDQ       $256, SI
	SUBQ       $256, CX
	CMPQ       CX, $256
	JAE        loop256

fold512:
	// Z0 onto Z1, Z1 onto Z2, Z2 onto Z3: each 64 bytes before the next.
	VBROADCASTI32X4 16(DX), Z8
	VPCLMULQDQ      $0x00, Z8, Z0, Z4
	VPCLMULQDQ      $0x11, Z8, Z0, Z5
	VPTERNLOGD      $0x96, Z4, Z5, Z1
	VPCLMULQDQ      $0x00, Z8, Z1, Z4
	VPCLMULQDQ      $0x11, Z8, Z1, Z5
	VPTERNLOGD      $0x96, Z4, Z5, Z2
	VPCLMULQDQ      $0x00, Z8, Z2, Z4
	VPCLMULQDQ      $0x11, Z8, Z2, Z5
	VPTERNLOGD      $0x96, Z4, Z5, Z3

loop64:
	// What is left, 64 bytes at a time (at most three blocks).
	CMPQ       CX, $64
	JB         lanes
	VMOVDQU64  (SI), Z12
	VPCLMULQDQ $0x00, Z8, Z3, Z4
	VPCLMULQDQ $0x11, Z8, Z3, Z3
	VPTERNLOGD $0x96, Z12, Z4, Z3
	ADDQ       $64, SI
	SUBQ       $64, CX
	JMP        loop64

lanes:
	// Lanes 0-2 of Z3 move on by 384, 256 and 128 bits onto lane 3 (whose multipliers
	// are zero: it is added as it is).
	VMOVDQU64     32(DX), Z8
	VPCLMULQDQ    $0x00, Z8, Z3, Z4
	VPCLMULQDQ    $0x11, Z8, Z3, Z5
	VPXORQ        Z4, Z5, Z4
	VEXTRACTI32X4 $3, Z3, X6
	VEXTRACTI64X4 $1, Z4, Y7
	VPXORQ        Y7, Y4, Y4
	VEXTRACTI32X4 $1, Y4, X7
	VPTERNLOGD    $0x96, X6, X7, X4
	// The 128 bits left are congruent to everything folded, placed as its last 16 bytes:
	// their CRC from a zero register is the register after everything folded.
	VMOVQ         X4, R8
	VPEXTRQ       $1, X4, R9
	VZEROUPPER
	XORL          AX, AX
	CRC32Q        R8, AX
	CRC32Q        R9, AX
	MOVL          AX, ret+40(FP)
	RET
