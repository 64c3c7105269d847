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

// func dotCodesAVX2(q *int16, c *int8, n int) int32
//
// Σ q[j]·c[j] for j < n, n a multiple of 32: the int8 codes widened to
// int16 (VPMOVSXBW), multiplied and added in pairs into int32 (VPMADDWD),
// two 8-lane accumulators summed at the end. Integer arithmetic: exact, as
// long as the sum fits int32 (queryCodeMax).
TEXT ·dotCodesAVX2(SB), NOSPLIT, $0-28
	MOVQ q+0(FP), SI
	MOVQ c+8(FP), DI
	MOVQ n+16(FP), CX
	VPXOR Y0, Y0, Y0
	VPXOR Y1, Y1, Y1
cloop:
	CMPQ CX, $32
	JL   cdone
	VPMOVSXBW 0(DI), Y2
	VPMOVSXBW 16(DI), Y3
	VPMADDWD  0(SI), Y2, Y2
	VPMADDWD  32(SI), Y3, Y3
	VPADDD    Y2, Y0, Y0
	VPADDD    Y3, Y1, Y1
	ADDQ      $32, DI
	ADDQ      $64, SI
	SUBQ      $32, CX
	JMP       cloop
cdone:
	VPADDD       Y1, Y0, Y0
	VEXTRACTI128 $1, Y0, X1
	VPADDD       X1, X0, X0
	VPSHUFD      $0x4E, X0, X1
	VPADDD       X1, X0, X0
	VPSHUFD      $0xB1, X0, X1
	VPADDD       X1, X0, X0
	MOVL         X0, ret+24(FP)
	VZEROUPPER
	RET

// CODESUM adds the two 8-lane int32 accumulators ya and yb (xa, xb their
// low halves) into one int32 and stores it at ret, as dotCodesAVX2 ends.
#define CODESUM(ya, yb, xa, xb, ret) \
	VPADDD       yb, ya, ya; \
	VEXTRACTI128 $1, ya, xb; \
	VPADDD       xb, xa, xa; \
	VPSHUFD      $0x4E, xa, xb; \
	VPADDD       xb, xa, xa; \
	VPSHUFD      $0xB1, xa, xb; \
	VPADDD       xb, xa, xa; \
	MOVL         xa, ret

// CODEMADD multiplies the widened codes in Y8 (codes j..j+15) and Y9
// (j+16..j+31) by query q's codes j..j+31 (BX = j) and adds the pairs'
// sums into the query's accumulators ya and yb.
#define CODEMADD(q, ya, yb) \
	VPMADDWD 0(q)(BX*2), Y8, Y10; \
	VPMADDWD 32(q)(BX*2), Y9, Y11; \
	VPADDD   Y10, ya, ya; \
	VPADDD   Y11, yb, yb

// func dotCodes2AVX2(q0, q1 *int16, c *int8, n int) (s0, s1 int32)
//
// dotCodesAVX2 of one row of codes c against two queries at once: each 32
// codes are loaded and widened (VPMOVSXBW) once, then multiplied and added
// into each query's own pair of accumulators, summed at the end as
// dotCodesAVX2 sums its own. n is a positive multiple of 32. Integer
// arithmetic: every s_i is exactly dotCodesAVX2(q_i, c, n).
TEXT ·dotCodes2AVX2(SB), NOSPLIT, $0-40
	MOVQ  q0+0(FP), R8
	MOVQ  q1+8(FP), R9
	MOVQ  c+16(FP), DI
	MOVQ  n+24(FP), CX
	XORQ  BX, BX
	VPXOR Y0, Y0, Y0
	VPXOR Y1, Y1, Y1
	VPXOR Y2, Y2, Y2
	VPXOR Y3, Y3, Y3
c2loop:
	VPMOVSXBW 0(DI)(BX*1), Y8
	VPMOVSXBW 16(DI)(BX*1), Y9
	CODEMADD(R8, Y0, Y1)
	CODEMADD(R9, Y2, Y3)
	ADDQ      $32, BX
	CMPQ      BX, CX
	JLT       c2loop
	CODESUM(Y0, Y1, X0, X1, s0+32(FP))
	CODESUM(Y2, Y3, X2, X3, s1+36(FP))
	VZEROUPPER
	RET

// func dotCodes3AVX2(q0, q1, q2 *int16, c *int8, n int) (s0, s1, s2 int32)
//
// dotCodes2AVX2 for three queries.
TEXT ·dotCodes3AVX2(SB), NOSPLIT, $0-52
	MOVQ  q0+0(FP), R8
	MOVQ  q1+8(FP), R9
	MOVQ  q2+16(FP), R10
	MOVQ  c+24(FP), DI
	MOVQ  n+32(FP), CX
	XORQ  BX, BX
	VPXOR Y0, Y0, Y0
	VPXOR Y1, Y1, Y1
	VPXOR Y2, Y2, Y2
	VPXOR Y3, Y3, Y3
	VPXOR Y4, Y4, Y4
	VPXOR Y5, Y5, Y5
c3loop:
	VPMOVSXBW 0(DI)(BX*1), Y8
	VPMOVSXBW 16(DI)(BX*1), Y9
	CODEMADD(R8, Y0, Y1)
	CODEMADD(R9, Y2, Y3)
	CODEMADD(R10, Y4, Y5)
	ADDQ      $32, BX
	CMPQ      BX, CX
	JLT       c3loop
	CODESUM(Y0, Y1, X0, X1, s0+40(FP))
	CODESUM(Y2, Y3, X2, X3, s1+44(FP))
	CODESUM(Y4, Y5, X4, X5, s2+48(FP))
	VZEROUPPER
	RET

// func dotCodes4AVX2(q0, q1, q2, q3 *int16, c *int8, n int) (s0, s1, s2, s3 int32)
//
// dotCodes2AVX2 for four queries.
TEXT ·dotCodes4AVX2(SB), NOSPLIT, $0-64
	MOVQ  q0+0(FP), R8
	MOVQ  q1+8(FP), R9
	MOVQ  q2+16(FP), R10
	MOVQ  q3+24(FP), R11
	MOVQ  c+32(FP), DI
	MOVQ  n+40(FP), CX
	XORQ  BX, BX
	VPXOR Y0, Y0, Y0
	VPXOR Y1, Y1, Y1
	VPXOR Y2, Y2, Y2
	VPXOR Y3, Y3, Y3
	VPXOR Y4, Y4, Y4
	VPXOR Y5, Y5, Y5
	VPXOR Y6, Y6, Y6
	VPXOR Y7, Y7, Y7
c4loop:
	VPMOVSXBW 0(DI)(BX*1), Y8
	VPMOVSXBW 16(DI)(BX*1), Y9
	CODEMADD(R8, Y0, Y1)
	CODEMADD(R9, Y2, Y3)
	CODEMADD(R10, Y4, Y5)
	CODEMADD(R11, Y6, Y7)
	ADDQ      $32, BX
	CMPQ      BX, CX
	JLT       c4loop
	CODESUM(Y0, Y1, X0, X1, s0+48(FP))
	CODESUM(Y2, Y3, X2, X3, s1+52(FP))
	CODESUM(Y4, Y5, X4, X5, s2+56(FP))
	CODESUM(Y6, Y7, X6, X7, s3+60(FP))
	VZEROUPPER
	RET

// func dotAVX2(a, b *float32, n int) float64
//
// dotF32 of n elements (a positive multiple of 8) in one call, lanes kept in
// registers: element j's product added to lane j%32 as dotBlocksAVX2 does
// (past the last whole 32 elements, each 8 more go to lanes 0–7, 8–15,
// 16–23), then the lanes summed as sumLanes does — in float64, t_i =
// (l_i + l_{i+8}) + (l_{i+16} + l_{i+24}) for i = 0..7, added to 0 one
// after the other. Every step rounds as the Go code's; no fused
// multiply-add.
TEXT ·dotAVX2(SB), NOSPLIT, $0-32
	MOVQ   a+0(FP), SI
	MOVQ   b+8(FP), DI
	MOVQ   n+16(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
dloop:
	CMPQ    CX, $32
	JL      dtail
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
	JMP     dloop
dtail:
	CMPQ    CX, $8
	JL      dsum
	VMOVUPS 0(SI), Y4
	VMULPS  0(DI), Y4, Y4
	VADDPS  Y4, Y0, Y0
	CMPQ    CX, $16
	JL      dsum
	VMOVUPS 32(SI), Y5
	VMULPS  32(DI), Y5, Y5
	VADDPS  Y5, Y1, Y1
	CMPQ    CX, $24
	JL      dsum
	VMOVUPS 64(SI), Y6
	VMULPS  64(DI), Y6, Y6
	VADDPS  Y6, Y2, Y2
dsum:
	// l_i + l_{i+8}, i = 0..3 in Y4, 4..7 in Y5
	VCVTPS2PD    X0, Y4
	VEXTRACTF128 $1, Y0, X5
	VCVTPS2PD    X5, Y5
	VCVTPS2PD    X1, Y6
	VEXTRACTF128 $1, Y1, X7
	VCVTPS2PD    X7, Y7
	VADDPD       Y6, Y4, Y4
	VADDPD       Y7, Y5, Y5
	// l_{i+16} + l_{i+24}, i = 0..3 in Y6, 4..7 in Y7
	VCVTPS2PD    X2, Y6
	VEXTRACTF128 $1, Y2, X7
	VCVTPS2PD    X7, Y7
	VCVTPS2PD    X3, Y8
	VEXTRACTF128 $1, Y3, X9
	VCVTPS2PD    X9, Y9
	VADDPD       Y8, Y6, Y6
	VADDPD       Y9, Y7, Y7
	// t_i
	VADDPD       Y6, Y4, Y4
	VADDPD       Y7, Y5, Y5
	// s = 0 + t_0 + t_1 + … + t_7, in order
	VXORPD       X0, X0, X0
	VADDSD       X4, X0, X0
	VPERMILPD    $1, X4, X10
	VADDSD       X10, X0, X0
	VEXTRACTF128 $1, Y4, X11
	VADDSD       X11, X0, X0
	VPERMILPD    $1, X11, X12
	VADDSD       X12, X0, X0
	VADDSD       X5, X0, X0
	VPERMILPD    $1, X5, X10
	VADDSD       X10, X0, X0
	VEXTRACTF128 $1, Y5, X11
	VADDSD       X11, X0, X0
	VPERMILPD    $1, X11, X12
	VADDSD       X12, X0, X0
	VMOVSD       X0, ret+24(FP)
	VZEROUPPER
	RET

// DSUM is dotAVX2's sum of the lanes in Y0–Y3 (0–7, 8–15, 16–23, 24–31)
// into X0, the same instructions in the same order (Y4–Y12 scratch); it
// loads the lanes from off(DX) first.
#define DSUM(off) \
	VMOVUPS off+0(DX), Y0; \
	VMOVUPS off+32(DX), Y1; \
	VMOVUPS off+64(DX), Y2; \
	VMOVUPS off+96(DX), Y3; \
	VCVTPS2PD    X0, Y4; \
	VEXTRACTF128 $1, Y0, X5; \
	VCVTPS2PD    X5, Y5; \
	VCVTPS2PD    X1, Y6; \
	VEXTRACTF128 $1, Y1, X7; \
	VCVTPS2PD    X7, Y7; \
	VADDPD       Y6, Y4, Y4; \
	VADDPD       Y7, Y5, Y5; \
	VCVTPS2PD    X2, Y6; \
	VEXTRACTF128 $1, Y2, X7; \
	VCVTPS2PD    X7, Y7; \
	VCVTPS2PD    X3, Y8; \
	VEXTRACTF128 $1, Y3, X9; \
	VCVTPS2PD    X9, Y9; \
	VADDPD       Y8, Y6, Y6; \
	VADDPD       Y9, Y7, Y7; \
	VADDPD       Y6, Y4, Y4; \
	VADDPD       Y7, Y5, Y5; \
	VXORPD       X0, X0, X0; \
	VADDSD       X4, X0, X0; \
	VPERMILPD    $1, X4, X10; \
	VADDSD       X10, X0, X0; \
	VEXTRACTF128 $1, Y4, X11; \
	VADDSD       X11, X0, X0; \
	VPERMILPD    $1, X11, X12; \
	VADDSD       X12, X0, X0; \
	VADDSD       X5, X0, X0; \
	VPERMILPD    $1, X5, X10; \
	VADDSD       X10, X0, X0; \
	VEXTRACTF128 $1, Y5, X11; \
	VADDSD       X11, X0, X0; \
	VPERMILPD    $1, X11, X12; \
	VADDSD       X12, X0, X0

// LANES2 and LANES3: one block of 8 floats at byte offset off+BX of the
// row (DI) and of each query (R8, R9, R10): the row's block loaded once,
// each query's product with it rounded (VMULPS) and added (VADDPS) to the
// query's accumulator of that block, as dotAVX2 does for one query.
#define LANES2(off, a0, a1) \
	VMOVUPS off(DI)(BX*1), Y12; \
	VMULPS  off(R8)(BX*1), Y12, Y13; \
	VMULPS  off(R9)(BX*1), Y12, Y14; \
	VADDPS  Y13, a0, a0; \
	VADDPS  Y14, a1, a1

#define LANES3(off, a0, a1, a2) \
	VMOVUPS off(DI)(BX*1), Y12; \
	VMULPS  off(R8)(BX*1), Y12, Y13; \
	VMULPS  off(R9)(BX*1), Y12, Y14; \
	VMULPS  off(R10)(BX*1), Y12, Y15; \
	VADDPS  Y13, a0, a0; \
	VADDPS  Y14, a1, a1; \
	VADDPS  Y15, a2, a2

// func dotLanes2AVX2(q0, q1, r *float32, n int, lanes *[2][32]float32) (s0, s1 float64)
//
// The lanes of dotAVX2(q_i, r, n) for two queries at once, n a positive
// multiple of 8: element j's product added to lane j%32 (past the last
// whole 32 elements, each 8 more to lanes 0–7, 8–15, 16–23), every product
// and sum rounded as dotAVX2 rounds them; the row's floats are loaded once
// for both. lanes[i] is written (not added to), then summed as dotAVX2
// sums its lanes (DSUM): s_i is dotAVX2(q_i, r, n), and sumLanes(&lanes[i]).
TEXT ·dotLanes2AVX2(SB), NOSPLIT, $0-56
	MOVQ   q0+0(FP), R8
	MOVQ   q1+8(FP), R9
	MOVQ   r+16(FP), DI
	MOVQ   n+24(FP), CX
	MOVQ   lanes+32(FP), DX
	SHLQ   $2, CX       // bytes
	MOVQ   CX, AX
	ANDQ   $-128, AX    // bytes of whole 32-float blocks
	XORQ   BX, BX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
l2loop:
	CMPQ BX, AX
	JGE  l2tail
	LANES2(0, Y0, Y4)
	LANES2(32, Y1, Y5)
	LANES2(64, Y2, Y6)
	LANES2(96, Y3, Y7)
	ADDQ $128, BX
	JMP  l2loop
l2tail:
	SUBQ AX, CX // bytes left: 0, 32, 64 or 96
	CMPQ CX, $32
	JL   l2store
	LANES2(0, Y0, Y4)
	CMPQ CX, $64
	JL   l2store
	LANES2(32, Y1, Y5)
	CMPQ CX, $96
	JL   l2store
	LANES2(64, Y2, Y6)
l2store:
	VMOVUPS Y0, 0(DX)
	VMOVUPS Y1, 32(DX)
	VMOVUPS Y2, 64(DX)
	VMOVUPS Y3, 96(DX)
	VMOVUPS Y4, 128(DX)
	VMOVUPS Y5, 160(DX)
	VMOVUPS Y6, 192(DX)
	VMOVUPS Y7, 224(DX)
	DSUM(0)
	VMOVSD  X0, s0+40(FP)
	DSUM(128)
	VMOVSD  X0, s1+48(FP)
	VZEROUPPER
	RET

// func dotLanes3AVX2(q0, q1, q2, r *float32, n int, lanes *[3][32]float32) (s0, s1, s2 float64)
//
// dotLanes2AVX2 for three queries.
TEXT ·dotLanes3AVX2(SB), NOSPLIT, $0-72
	MOVQ   q0+0(FP), R8
	MOVQ   q1+8(FP), R9
	MOVQ   q2+16(FP), R10
	MOVQ   r+24(FP), DI
	MOVQ   n+32(FP), CX
	MOVQ   lanes+40(FP), DX
	SHLQ   $2, CX
	MOVQ   CX, AX
	ANDQ   $-128, AX
	XORQ   BX, BX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	VXORPS Y8, Y8, Y8
	VXORPS Y9, Y9, Y9
	VXORPS Y10, Y10, Y10
	VXORPS Y11, Y11, Y11
l3loop:
	CMPQ BX, AX
	JGE  l3tail
	LANES3(0, Y0, Y4, Y8)
	LANES3(32, Y1, Y5, Y9)
	LANES3(64, Y2, Y6, Y10)
	LANES3(96, Y3, Y7, Y11)
	ADDQ $128, BX
	JMP  l3loop
l3tail:
	SUBQ AX, CX
	CMPQ CX, $32
	JL   l3store
	LANES3(0, Y0, Y4, Y8)
	CMPQ CX, $64
	JL   l3store
	LANES3(32, Y1, Y5, Y9)
	CMPQ CX, $96
	JL   l3store
	LANES3(64, Y2, Y6, Y10)
l3store:
	VMOVUPS Y0, 0(DX)
	VMOVUPS Y1, 32(DX)
	VMOVUPS Y2, 64(DX)
	VMOVUPS Y3, 96(DX)
	VMOVUPS Y4, 128(DX)
	VMOVUPS Y5, 160(DX)
	VMOVUPS Y6, 192(DX)
	VMOVUPS Y7, 224(DX)
	VMOVUPS Y8, 256(DX)
	VMOVUPS Y9, 288(DX)
	VMOVUPS Y10, 320(DX)
	VMOVUPS Y11, 352(DX)
	DSUM(0)
	VMOVSD  X0, s0+48(FP)
	DSUM(128)
	VMOVSD  X0, s1+56(FP)
	DSUM(256)
	VMOVSD  X0, s2+64(FP)
	VZEROUPPER
	RET

// func prefetchBytes(p unsafe.Pointer, n int)
//
// Asks for the n bytes at p (n > 0) to be brought into the caches
// (PREFETCHT0 of each 64-byte line), without waiting for them: a scan of
// scattered rows asks for a row a few rows before it scores it.
TEXT ·prefetchBytes(SB), NOSPLIT, $0-16
	MOVQ p+0(FP), SI
	MOVQ n+8(FP), CX
ploop:
	PREFETCHT0 (SI)
	ADDQ       $64, SI
	SUBQ       $64, CX
	JGT        ploop
	RET
