#include "textflag.h"

// func dotBlocksAVX2(a, b *float32, n int, lanes *[32]float32)
//
// lanes[i] += a[j]*b[j] for j ≡ i (mod 32), j < n, n a multiple of 32: four
// 8-float accumulators (lanes 0–7, 8–15, 16–23, 24–31), loaded from and
// stored back to lanes. VMULPS then VADDPS round each step as scalar code
// does; no fused multiply-add.
TEXT ·dotBlocksAVX2(SB), NOSPLIT, $0-32
	MOVQ a+0(FP), SI
	MOVQ b+8(FP), DI
	MOVQ n+16(FP), CX
	MOVQ lanes+24(FP), DX
	VMOVUPS 0(DX), Y0
	VMOVUPS 32(DX), Y1
	VMOVUPS 64(DX), Y2
	VMOVUPS 96(DX), Y3
loop:
	CMPQ CX, $32
	JL   done
	VMOVUPS 0(SI), Y4
	VMOVUPS 32(SI), Y5
	VMOVUPS 64(SI), Y6
	VMOVUPS 96(SI), Y7
	VMULPS  0(DI), Y4, Y4
	VMULPS  32(DI), Y5, Y5
	VMULPS  64(DI), Y6, Y6
	VMULPS  96(DI), Y7, Y7
	VADDPS  Y4, Y0, Y0
	VADDPS  Y5, Y1, Y1
	VADDPS  Y6, Y2, Y2
	VADDPS  Y7, Y3, Y3
	ADDQ    $128, SI
	ADDQ    $128, DI
	SUBQ    $32, CX
	JMP     loop
done:
	VMOVUPS Y0, 0(DX)
	VMOVUPS Y1, 32(DX)
	VMOVUPS Y2, 64(DX)
	VMOVUPS Y3, 96(DX)
	VZEROUPPER
	RET
