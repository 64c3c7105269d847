//go:build !amd64

package retriever

// useAVX2 is false off amd64: the portable loop runs.
const useAVX2 = false

// dotBlocks adds a[j]*b[j] into lanes[j%32]; len(a) is a multiple of 32.
func dotBlocks(a, b []float32, lanes *[dotLanes]float32) { dotBlocksGeneric(a, b, lanes) }

// dotCodes is Σ q[j]·c[j] over code rows of equal length.
func dotCodes(q []int16, c []int8) int32 { return dotCodesGeneric(q, c) }

// dotWhole has no kernel here: ok is false.
func dotWhole(a, b []float32) (float64, bool) { return 0, false }

// dotCodesMulti sets out[j] to dotCodes(qs[j], c) for every query j.
func dotCodesMulti(qs [][]int16, c []int8, out []int32) { dotCodesMultiGeneric(qs, c, out) }

// dotMultiRuns is false: dotMulti has no kernel here.
func dotMultiRuns(n int) bool { return false }

// dotMulti has no kernel here: ok is false.
func dotMulti(qs [][]float32, row []float32, out []float64) bool { return false }

// prefetchRow does nothing here.
func prefetchRow[T int8 | float32](row []T) {}
