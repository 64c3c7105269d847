package retriever

// The vector leg's dot product. Its value is defined by 32 lanes: element j
// of the vectors adds its product to lane j%32, in increasing j, each
// product rounded to float32 and added in float32; the lanes are then
// summed in a fixed order in float64. The AVX2 kernel (dot_amd64.s)
// computes exactly that — eight lanes per register, four registers,
// multiplications and additions rounded one by one, no fused multiply-add —
// and so does the portable loop, so every machine gives the same score to
// the bit and a ranking never depends on the hardware.

const dotLanes = 32

// dotF32 is the dot product of two equally long vectors.
func dotF32(a, b []float32) float64 {
	if s, ok := dotWhole(a, b); ok {
		return s // the kernel, lanes and their sum in registers
	}
	b = b[:len(a)]
	var lanes [dotLanes]float32
	n := len(a) &^ (dotLanes - 1)
	if n > 0 {
		dotBlocks(a[:n], b[:n], &lanes)
	}
	for j := n; j < len(a); j++ {
		lanes[j%dotLanes] += float32(a[j] * b[j])
	}
	return sumLanes(&lanes)
}

// dotSparse is dotF32 of a query whose non-zero dimensions are nz (in
// increasing order): the zeros dotF32 would add change no lane, so the result
// is the same to the bit. It is for machines without the AVX2 kernel, where
// skipping the zeros of the built-in embedder's sparse part is faster.
func dotSparse(q []float32, nz []int32, row []float32) float64 {
	var lanes [dotLanes]float32
	for _, j := range nz {
		lanes[j%dotLanes] += float32(q[j] * row[j])
	}
	return sumLanes(&lanes)
}

// dotBlocksGeneric is the portable dotBlocks: len(a) is a multiple of 32.
func dotBlocksGeneric(a, b []float32, lanes *[dotLanes]float32) {
	b = b[:len(a)]
	for len(a) >= dotLanes {
		a32, b32 := a[:dotLanes:dotLanes], b[:dotLanes:dotLanes]
		for i := range dotLanes {
			lanes[i] += float32(a32[i] * b32[i])
		}
		a, b = a[dotLanes:], b[dotLanes:]
	}
}

// sumLanes adds the lanes in a fixed order: pairwise, as the kernel's
// registers are laid out (0..7, 8..15, 16..23, 24..31), then within.
func sumLanes(l *[dotLanes]float32) float64 {
	var s float64
	for i := range 8 {
		s += (float64(l[i]) + float64(l[i+8])) + (float64(l[i+16]) + float64(l[i+24]))
	}
	return s
}
