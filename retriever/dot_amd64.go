package retriever

import "golang.org/x/sys/cpu"

// useAVX2 says the AVX2 kernel runs here.
var useAVX2 = cpu.X86.HasAVX2

// dotBlocksAVX2 adds a[j]*b[j] into lanes[j%32] for n elements (a multiple
// of 32), with 256-bit multiplications and additions (dot_amd64.s).
//
//go:noescape
func dotBlocksAVX2(a, b *float32, n int, lanes *[dotLanes]float32)

// dotBlocks adds a[j]*b[j] into lanes[j%32]; len(a) is a multiple of 32.
func dotBlocks(a, b []float32, lanes *[dotLanes]float32) {
	if useAVX2 && len(a) > 0 {
		b = b[:len(a)]
		dotBlocksAVX2(&a[0], &b[0], len(a), lanes)
		return
	}
	dotBlocksGeneric(a, b, lanes)
}

// dotCodesAVX2 is Σ q[j]·c[j] over n codes (a multiple of 32), with 256-bit
// integer multiply-adds (dot_amd64.s).
//
//go:noescape
func dotCodesAVX2(q *int16, c *int8, n int) int32

// dotCodes is Σ q[j]·c[j] over code rows of equal length (a multiple of 32).
func dotCodes(q []int16, c []int8) int32 {
	if useAVX2 && len(c) > 0 {
		q = q[:len(c)]
		return dotCodesAVX2(&q[0], &c[0], len(c))
	}
	return dotCodesGeneric(q, c)
}

// dotAVX2 is dotF32 of n elements, a positive multiple of 8, in one call
// (dot_amd64.s).
//
//go:noescape
func dotAVX2(a, b *float32, n int) float64

// dotWhole is dotF32 of vectors whose length is a positive multiple of 8,
// where the AVX2 kernel runs; ok is false elsewhere.
func dotWhole(a, b []float32) (s float64, ok bool) {
	if !useAVX2 || len(a) == 0 || len(a)%8 != 0 {
		return 0, false
	}
	b = b[:len(a)]
	return dotAVX2(&a[0], &b[0], len(a)), true
}
