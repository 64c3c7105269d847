package retriever

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

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

// dotCodes2AVX2, dotCodes3AVX2 and dotCodes4AVX2 are dotCodesAVX2 of one
// row of n codes (a positive multiple of 32) against two, three and four
// queries in one pass: each block of the row's codes is loaded and widened
// once for all of them (dot_amd64.s).
//
//go:noescape
func dotCodes2AVX2(q0, q1 *int16, c *int8, n int) (s0, s1 int32)

//go:noescape
func dotCodes3AVX2(q0, q1, q2 *int16, c *int8, n int) (s0, s1, s2 int32)

//go:noescape
func dotCodes4AVX2(q0, q1, q2, q3 *int16, c *int8, n int) (s0, s1, s2, s3 int32)

// dotCodesMulti sets out[j] to dotCodes(qs[j], c) for every query j (each
// at least len(c) long, len(c) a multiple of 32), the queries taken four,
// three or two at a time so that the row's codes are read once a group.
func dotCodesMulti(qs [][]int16, c []int8, out []int32) {
	out = out[:len(qs)]
	n := len(c)
	if !useAVX2 || n == 0 {
		dotCodesMultiGeneric(qs, c, out)
		return
	}
	for j := 0; j < len(qs); {
		switch r := len(qs) - j; {
		case r >= 4 && r != 5: // 5 goes as 3 and 2
			q0, q1, q2, q3 := qs[j][:n], qs[j+1][:n], qs[j+2][:n], qs[j+3][:n]
			out[j], out[j+1], out[j+2], out[j+3] = dotCodes4AVX2(&q0[0], &q1[0], &q2[0], &q3[0], &c[0], n)
			j += 4
		case r >= 3:
			q0, q1, q2 := qs[j][:n], qs[j+1][:n], qs[j+2][:n]
			out[j], out[j+1], out[j+2] = dotCodes3AVX2(&q0[0], &q1[0], &q2[0], &c[0], n)
			j += 3
		case r == 2:
			q0, q1 := qs[j][:n], qs[j+1][:n]
			out[j], out[j+1] = dotCodes2AVX2(&q0[0], &q1[0], &c[0], n)
			j += 2
		default:
			q0 := qs[j][:n]
			out[j] = dotCodesAVX2(&q0[0], &c[0], n)
			j++
		}
	}
}

// dotLanes2AVX2 and dotLanes3AVX2 are dotAVX2 of a row of n floats (a
// positive multiple of 8) with two and three queries at once, the row
// loaded once for all of them (dot_amd64.s); they leave each query's lanes
// in lanes, and s_i is sumLanes of lanes[i].
//
//go:noescape
func dotLanes2AVX2(q0, q1, r *float32, n int, lanes *[2][dotLanes]float32) (s0, s1 float64)

//go:noescape
func dotLanes3AVX2(q0, q1, q2, r *float32, n int, lanes *[3][dotLanes]float32) (s0, s1, s2 float64)

// dotMultiRuns says dotMulti has a kernel for rows of n floats: AVX2, n a
// positive multiple of 8.
func dotMultiRuns(n int) bool { return useAVX2 && n > 0 && n%8 == 0 }

// dotMulti sets out[j] to dotF32(qs[j], row) for every query j (each as
// long as row), the queries taken three or two at a time so that the row
// is read once a group, where the AVX2 kernels run and len(row) is a
// positive multiple of 8; ok is false (and out untouched) elsewhere.
func dotMulti(qs [][]float32, row []float32, out []float64) (ok bool) {
	n := len(row)
	if !dotMultiRuns(n) {
		return false
	}
	out = out[:len(qs)]
	for j := 0; j < len(qs); {
		switch r := len(qs) - j; {
		case r == 1:
			q0 := qs[j][:n]
			out[j] = dotAVX2(&q0[0], &row[0], n)
			j++
		case r == 2 || r == 4:
			var lanes [2][dotLanes]float32
			q0, q1 := qs[j][:n], qs[j+1][:n]
			out[j], out[j+1] = dotLanes2AVX2(&q0[0], &q1[0], &row[0], n, &lanes)
			j += 2
		default:
			var lanes [3][dotLanes]float32
			q0, q1, q2 := qs[j][:n], qs[j+1][:n], qs[j+2][:n]
			out[j], out[j+1], out[j+2] = dotLanes3AVX2(&q0[0], &q1[0], &q2[0], &row[0], n, &lanes)
			j += 3
		}
	}
	return true
}

// prefetchBytes asks for the n bytes at p to be brought into the caches
// without waiting for them (dot_amd64.s).
//
//go:noescape
func prefetchBytes(p unsafe.Pointer, n int)

// prefetchRow asks for a row (codes or floats) to be brought into the
// caches; a scan calls it prefetchAhead rows before it reads the row.
func prefetchRow[T int8 | float32](row []T) {
	if len(row) > 0 {
		prefetchBytes(unsafe.Pointer(&row[0]), len(row)*int(unsafe.Sizeof(row[0])))
	}
}
