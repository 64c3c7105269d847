package retriever

import (
	"math"
)

// The vector leg's quantised pre-scan. Every stored vector v is also held as
// int8 codes c with a per-vector scale s (c_j = round(v_j/s), |c_j| ≤ 127),
// and a query q as int16 codes d with a power-of-two scale t (|d_j| ≤
// quantQueryMax). A search computes the exact integer I = Σ d_j·c_j of every
// candidate (a quarter of the float vector's bytes to read), keeps only the
// candidates that can still reach the top k, and scores those with dotF32,
// as the exact scan does: the answer is the exact scan's, hit for hit and
// bit for bit.
//
// The bound. Write e_j = v_j − s·c_j (the row's rounding error) and
// f_j = q_j − t·d_j (the query's). Then, in exact arithmetic,
//
//	Σ q_j·v_j = Σ q_j·(s·c_j + e_j)
//	          = s·Σ (t·d_j + f_j)·c_j + Σ q_j·e_j
//	          = s·t·I + s·Σ f_j·c_j + Σ q_j·e_j,
//
// so, with Cauchy–Schwarz and Hölder,
//
//	|Σ q_j·v_j − s·t·I| ≤ ‖f‖₂·‖s·c‖₂ + min(‖q‖₂·‖e‖₂, ‖q‖₁·‖e‖∞).
//
// The score the exact scan computes, dotF32, rounds every product to
// float32 and adds it to one of 32 float32 lanes (m = ⌈dim/32⌉ terms a
// lane), then sums the lanes in float64; its distance to the exact Σ q_j·v_j
// is at most γ·Σ|q_j·v_j| ≤ γ·‖q‖₂·‖v‖₂ with γ = (m+1)·2⁻²⁴·1.01 (the
// standard bound m·u/(1−m·u) of a recursive sum of m rounded products,
// u = 2⁻²⁴, plus the float64 sum of the lanes, 31·2⁻⁵³ of it), and
// ‖v‖₂ ≤ ‖s·c‖₂ + ‖e‖₂. Underflow adds at most 2⁻¹⁴⁹ a step (dim·2⁻¹⁴⁷ in
// all), and overflow cannot happen while ‖q‖₂ and ‖v‖₂ are at most 2⁶⁰
// (vectors beyond that make the search exact). So every candidate's score
// lies in [a − b, a + b] with a = s·t·I and b the sum of these terms; the
// per-vector norms are stored rounded up to float32, and b is widened by
// 2⁻³⁰ of itself and 2⁻⁴⁰·|a| for the float64 rounding of computing a and b.
//
// The pruning. Let τ be the k-th largest lower bound a − b over the
// candidates. At least k candidates score at least τ; a candidate whose upper
// bound a + b is under τ scores strictly less than each of them, so it is in
// no top k, whatever the ties (equal scores are ordered by ID). The scan
// keeps every candidate whose upper bound is at least τ — τ only rises while
// the scan runs, so one dropped early stays rightly dropped — and the exact
// top k of the kept ones is the exact top k of all.

const (
	quantRowMax = 127 // largest |c_j| (−128 is never used)
	// quantQueryMax is the largest |d_j|: 14 bits, fewer for vectors so long
	// that the int32 sum of dim products |d_j·c_j| could overflow
	// (queryCodeMax).
	quantQueryMax = 1<<14 - 1
	// quantNormMax is the largest norm (of a row or a query) the bound
	// covers without overflow; rows or queries beyond it are scanned
	// exactly.
	quantNormMax = 1 << 60
)

// rowQuant is one stored vector's quantisation: its scale and the norms of
// its codes and its rounding error (each rounded up).
type rowQuant struct {
	scale float32 // s
	codeN float32 // ‖s·c‖₂
	errN2 float32 // ‖e‖₂
	errNI float32 // ‖e‖∞
}

// quantPad is the length of a code row: dim rounded up to 32 (the kernel's
// block), zero filled.
func quantPad(dim int) int { return (dim + 31) &^ 31 }

// quantizeRow writes v's codes into codes (len quantPad(len(v)), zeroed
// past len(v)) and returns their quantisation. ok is false for a vector the
// bound does not cover (norm above quantNormMax).
func quantizeRow(v []float32, codes []int8) (q rowQuant, ok bool) {
	var maxAbs, norm float64
	for _, x := range v {
		a := math.Abs(float64(x))
		maxAbs = max(maxAbs, a)
		norm += a * a
	}
	clear(codes)
	if norm > quantNormMax*quantNormMax {
		return rowQuant{}, false
	}
	if maxAbs == 0 {
		return rowQuant{}, true
	}
	s := float32(maxAbs / quantRowMax)
	if s == 0 { // maxAbs/127 underflowed float32: scale up to the smallest
		s = math.SmallestNonzeroFloat32
	}
	var codeN, errN2, errNI float64
	for j, x := range v {
		c := math.Round(float64(x) / float64(s))
		c = max(-quantRowMax, min(quantRowMax, c))
		codes[j] = int8(c)
		sc := float64(s) * c
		e := math.Abs(float64(x) - sc)
		codeN += sc * sc
		errN2 += e * e
		errNI = max(errNI, e)
	}
	return rowQuant{scale: s, codeN: up32(math.Sqrt(codeN)), errN2: up32(math.Sqrt(errN2)), errNI: up32(errNI)}, true
}

// up32 is x as a float32 rounded up.
func up32(x float64) float32 {
	f := float32(x)
	if float64(f) < x {
		f = math.Nextafter32(f, float32(math.Inf(1)))
	}
	return f
}

// queryQuant is a query's codes and the terms of the bound that depend on
// the query alone.
type queryQuant struct {
	codes []int16
	t     float64 // the scale, a power of two
	n2    float64 // ‖q‖₂
	n1    float64 // ‖q‖₁
	fN    float64 // ‖f‖₂
	gamma float64 // γ·‖q‖₂
	under float64 // the underflow term dim·2⁻¹⁴⁷
}

// queryCodeMax is the largest |d_j| for vectors of length dim: the int32 sum
// Σ d_j·c_j is then at most dim·max·127 < 2³¹ (0: the vectors are too long
// for int32 sums at all).
func queryCodeMax(dim int) int {
	return min(quantQueryMax, (math.MaxInt32)/(max(dim, 1)*quantRowMax))
}

// quantize fills qq for query (codes reuses qq.codes' storage). ok is false
// for a query the bound does not cover.
func (qq *queryQuant) quantize(query []float32) bool {
	dim := len(query)
	dmax := float64(queryCodeMax(dim))
	if dmax < 1 {
		return false
	}
	pad := quantPad(dim)
	if cap(qq.codes) < pad {
		qq.codes = make([]int16, pad)
	}
	qq.codes = qq.codes[:pad]
	clear(qq.codes)
	var maxAbs, n2, n1 float64
	for _, x := range query {
		a := math.Abs(float64(x))
		maxAbs = max(maxAbs, a)
		n2 += a * a
		n1 += a
	}
	if n2 > quantNormMax*quantNormMax {
		return false
	}
	// t = a power of two with maxAbs/t ≤ dmax, so that t·d_j and f_j are
	// exact.
	t := 1.0
	if maxAbs > 0 {
		_, e := math.Frexp(maxAbs / dmax) // maxAbs/dmax = frac·2^e, frac in [0.5, 1)
		t = math.Ldexp(1, e)
	}
	var fN float64
	for j, x := range query {
		d := math.Round(float64(x) / t)
		d = max(-dmax, min(dmax, d))
		qq.codes[j] = int16(d)
		f := float64(x) - t*d
		fN += f * f
	}
	lanes := (dim + dotLanes - 1) / dotLanes
	qq.t = t
	qq.n2 = math.Sqrt(n2)
	qq.n1 = n1
	qq.fN = math.Sqrt(fN)
	qq.gamma = float64(lanes+1) * 0x1p-24 * 1.01 * qq.n2
	qq.under = float64(dim) * 0x1p-147
	return true
}

// bounds are the lower and upper bound of the exact scan's score of a row
// whose code product with the query is dot.
func (qq *queryQuant) bounds(rq rowQuant, dot int32) (lo, hi float64) {
	r := rq.terms()
	a, b := qq.bound(&r, dot)
	return a - b, a + b
}

// rowTerms are a rowQuant's terms of the bound in float64, converted once a
// row for all the queries it is scored against.
type rowTerms struct {
	scale, codeN, errN2, errNI float64
	norm                       float64 // codeN + errN2
}

func (rq rowQuant) terms() rowTerms {
	codeN, errN2 := float64(rq.codeN), float64(rq.errN2)
	return rowTerms{scale: float64(rq.scale), codeN: codeN, errN2: errN2, errNI: float64(rq.errNI), norm: codeN + errN2}
}

// bound is the centre a and half-width b of the bounds [a − b, a + b] of
// the exact scan's score of row r whose code product with the query is dot.
func (qq *queryQuant) bound(r *rowTerms, dot int32) (a, b float64) {
	a = r.scale * qq.t * float64(dot)
	b = qq.fN*r.codeN + min(qq.n2*r.errN2, qq.n1*r.errNI) + qq.gamma*r.norm
	b = (b+math.Abs(a)*0x1p-40)*(1+0x1p-30) + qq.under
	return a, b
}

// The prefilter. Most rows of a large scan are far under τ, and the scan
// need not compute their bounds: it compares each row's s·I with a limit L
// instead, below which a + b < τ. Let S, C, E and N be the largest scale
// s, ‖s·c‖₂, ‖e‖₂ and ‖s·c‖₂ + ‖e‖₂ over a tenant's covered rows, as stored
// (quantMax). Every term of b is a product or sum of non-negative factors,
// each at most its maximum (the min at most its first argument), and
// |I| < 2³¹ (queryCodeMax), so |a| < S·t·2³¹ =: A and, in exact
// arithmetic, b ≤ b̂ = ((‖f‖₂·C + ‖q‖₂·E + γ·N) + 2⁻⁴⁰·A)·(1+2⁻³⁰) + under.
// The computed a and b are their exact values up to a factor (1+2⁻⁵³) for
// each of their dozen float64 operations, fused or not, and so is their
// sum; with b̂ computed and widened by (1+2⁻²⁰), far more than that
// rounding, a row's computed a + b is at most s·t·I·(1+2⁻²⁰) + b̂ (a ≤ 0
// when I ≤ 0). Thus a row with s·I < L = (τ − b̂)/(t·(1+2⁻²⁰)), computed and
// narrowed by (1−2⁻²⁰) for the rounding of L and of s·I, has a + b < τ and
// is neither offered nor kept, as the full test would decide. While τ ≤ b̂
// (−∞ at first) L is −∞: every row is tested.

// quantMax holds the largest of each of the bound's row terms over a
// tenant's covered rows (wild ones are scanned exactly). It only grows:
// a row deleted or overwritten leaves it an upper bound still.
type quantMax struct {
	scale, codeN, errN2, norm float64
}

// add takes row quantisation q into the maxima (a wild one is left out).
func (m *quantMax) add(q rowQuant) {
	if math.IsInf(float64(q.codeN), 1) {
		return
	}
	r := q.terms()
	m.scale, m.codeN = max(m.scale, r.scale), max(m.codeN, r.codeN)
	m.errN2, m.norm = max(m.errN2, r.errN2), max(m.norm, r.norm)
}

// prefilterMargin widens the prefilter's bound past the rounding of
// computing either side of it.
const prefilterMargin = 0x1p-20

// limit is the prefilter's L for a scan at τ over a tenant's covered rows
// with maxima mx: a row of scale s whose code product with the query is I
// has an upper bound a + b under τ if s·I < L (passes reports whether).
func (qq *queryQuant) limit(mx *quantMax, tau float64) float64 {
	a := mx.scale * qq.t * (1 + prefilterMargin) * 0x1p31
	bHat := ((qq.fN*mx.codeN+qq.n2*mx.errN2+qq.gamma*mx.norm)+a*0x1p-40)*(1+0x1p-30) + qq.under
	bHat *= 1 + prefilterMargin
	if !(tau > bHat) { // τ ≤ b̂, or −∞ still
		return math.Inf(-1)
	}
	return (tau - bHat) / (qq.t * (1 + prefilterMargin)) * (1 - prefilterMargin)
}

// passes says a row of quantisation rq and code product dot passes the
// prefilter of limit lim: its bound must be computed.
func passes(rq *rowQuant, dot int32, lim float64) bool {
	return float64(rq.scale)*float64(dot) >= lim
}

// dotCodesGeneric is the portable dotCodes.
func dotCodesGeneric(q []int16, c []int8) int32 {
	q = q[:len(c)]
	var s int32
	for j, x := range c {
		s += int32(q[j]) * int32(x)
	}
	return s
}

// dotCodesMultiGeneric is the portable dotCodesMulti: out[j] is
// dotCodesGeneric(qs[j], c). The row's codes are read once for up to four
// queries at a time; the sums are exact integers, so the order of the
// additions does not matter.
func dotCodesMultiGeneric(qs [][]int16, c []int8, out []int32) {
	out = out[:len(qs)]
	for j := 0; j < len(qs); j += 4 {
		switch len(qs) - j {
		case 1:
			out[j] = dotCodesGeneric(qs[j], c)
		case 2:
			q0, q1 := qs[j][:len(c)], qs[j+1][:len(c)]
			var s0, s1 int32
			for i, x := range c {
				s0 += int32(q0[i]) * int32(x)
				s1 += int32(q1[i]) * int32(x)
			}
			out[j], out[j+1] = s0, s1
		case 3:
			q0, q1, q2 := qs[j][:len(c)], qs[j+1][:len(c)], qs[j+2][:len(c)]
			var s0, s1, s2 int32
			for i, x := range c {
				s0 += int32(q0[i]) * int32(x)
				s1 += int32(q1[i]) * int32(x)
				s2 += int32(q2[i]) * int32(x)
			}
			out[j], out[j+1], out[j+2] = s0, s1, s2
		default:
			q0, q1, q2, q3 := qs[j][:len(c)], qs[j+1][:len(c)], qs[j+2][:len(c)], qs[j+3][:len(c)]
			var s0, s1, s2, s3 int32
			for i, x := range c {
				s0 += int32(q0[i]) * int32(x)
				s1 += int32(q1[i]) * int32(x)
				s2 += int32(q2[i]) * int32(x)
				s3 += int32(q3[i]) * int32(x)
			}
			out[j], out[j+1], out[j+2], out[j+3] = s0, s1, s2, s3
		}
	}
}
