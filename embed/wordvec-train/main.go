// Command wordvec-train trains the built-in word vectors from a corpus (one
// document per line) and writes them in cardex's word-vector file format:
//
//	scripts/wordvec-corpus /tmp/cardex-corpus
//	go run ./embed/wordvec-train -o embed/wordvec.bin.gz /tmp/cardex-corpus/*.txt
//
// Method (all deterministic: the same corpus gives the same bytes):
//  1. words as embed.AnalyzeWords sees them; the MaxVocab most frequent
//     with at least MinCount occurrences;
//  2. co-occurrences within a window, weighted (window-d+1)/window at
//     distance d;
//  3. positive PMI with context-distribution smoothing 0.75 (Levy, Goldberg
//     and Dagan, "Improving distributional similarity with lessons learned
//     from word embeddings", TACL 2015);
//  4. a rank-Dim truncated SVD of the PPMI matrix by randomised subspace
//     iteration (Halko, Martinsson and Tropp, 2011); word vector = U·Σ^0.5,
//     each singular vector's sign fixed (its largest entry positive).
package main

import (
	"bufio"
	"cmp"
	"errors"
	"flag"
	"fmt"
	"log"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"time"

	"gonum.org/v1/gonum/mat"

	"github.com/seed0cff8200/cardex/embed"
)

func main() {
	out := flag.String("o", "embed/wordvec.bin.gz", "output file")
	var o options
	flag.IntVar(&o.dim, "dim", 200, "vector dimension")
	flag.IntVar(&o.window, "window", 5, "context window on each side")
	flag.IntVar(&o.minCount, "min-count", 5, "minimum word count")
	flag.IntVar(&o.maxVocab, "max-vocab", 30000, "vocabulary size")
	flag.IntVar(&o.iters, "power-iterations", 3, "subspace iterations of the randomised SVD")
	flag.Uint64Var(&o.seed, "seed", 1, "seed of the randomised SVD's random start")
	flag.Parse()
	if flag.NArg() == 0 {
		log.Fatal("usage: wordvec-train [-o FILE] CORPUS.txt...")
	}
	start := time.Now()
	say := func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "%s (%s)\n", fmt.Sprintf(format, args...), time.Since(start).Round(time.Second))
	}
	wv, err := train(flag.Args(), o, say)
	if err != nil {
		log.Fatal(err)
	}
	f, err := os.Create(*out)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := wv.WriteTo(f); err != nil {
		log.Fatal(err)
	}
	if err := f.Close(); err != nil {
		log.Fatal(err)
	}
	fi, _ := os.Stat(*out)
	say("wrote %s: %d words × %d dims, %d bytes, id %s", *out, wv.Len(), wv.Dim(), fi.Size(), wv.ID())
	for _, w := range []string{"picture", "weather", "refund", "bug", "song", "car", "job", "delete", "translate", "stock"} {
		fmt.Fprintf(os.Stderr, "  %s: %v\n", w, wv.Similar(w, 8))
	}
}

// options are the training parameters (the command's flags).
type options struct {
	dim, window, minCount, maxVocab, iters int
	seed                                   uint64
}

// train trains word vectors from the documents (lines) of the files at
// paths, reporting progress to say.
func train(paths []string, o options, say func(string, ...any)) (*embed.WordVectors, error) {
	// Pass 1: word counts.
	counts := map[string]int{}
	total := 0
	err := eachDoc(paths, func(ws []string) {
		for _, w := range ws {
			counts[w]++
			total++
		}
	})
	if err != nil {
		return nil, err
	}
	words := make([]string, 0, len(counts))
	for w, n := range counts {
		if n >= o.minCount {
			words = append(words, w)
		}
	}
	slices.SortFunc(words, func(a, b string) int { return cmp.Or(cmp.Compare(counts[b], counts[a]), cmp.Compare(a, b)) })
	words = words[:min(len(words), o.maxVocab)]
	index := make(map[string]int32, len(words))
	for i, w := range words {
		index[w] = int32(i)
	}
	say("pass 1: %d tokens, %d distinct, vocabulary %d", total, len(counts), len(words))
	if l := o.dim + 20; len(words) < l {
		return nil, fmt.Errorf("a vocabulary of %d words is too small for %d dimensions (the SVD needs -dim + 20 = %d words): give a bigger corpus or a smaller -dim", len(words), o.dim, l)
	}

	// Pass 2: weighted co-occurrences (symmetric).
	n := len(words)
	cooc := make([]map[int32]float64, n)
	for i := range cooc {
		cooc[i] = map[int32]float64{}
	}
	var ids []int32
	err = eachDoc(paths, func(ws []string) {
		ids = ids[:0]
		for _, w := range ws {
			if i, ok := index[w]; ok {
				ids = append(ids, i)
			}
		}
		for i, a := range ids {
			for d := 1; d <= o.window && i+d < len(ids); d++ {
				b := ids[i+d]
				if a != b {
					wt := float64(o.window-d+1) / float64(o.window)
					cooc[a][b] += wt
					cooc[b][a] += wt
				}
			}
		}
	})
	if err != nil {
		return nil, err
	}

	// PPMI as a sparse matrix (CSR), rows and columns in vocabulary order.
	const alpha = 0.75
	// Sums in a fixed order (rows in vocabulary order, columns sorted), so
	// that the same corpus gives the same bits whatever the map order.
	rowSum := make([]float64, n)
	colSum := make([]float64, n)
	var cols []int32
	for a, row := range cooc {
		cols = sortedKeys(row, cols)
		for _, b := range cols {
			rowSum[a] += row[b]
			colSum[b] += row[b]
		}
	}
	smoothed := 0.0
	for _, c := range colSum {
		smoothed += math.Pow(c, alpha)
	}
	logSmoothed := math.Log(smoothed)
	m := csr{n: n, ptr: make([]int, n+1)}
	for a := range n {
		cols = sortedKeys(cooc[a], cols)
		for _, b := range cols {
			pmi := math.Log(cooc[a][b]) - math.Log(rowSum[a]) - alpha*math.Log(colSum[b]) + logSmoothed
			if pmi > 0 {
				m.col = append(m.col, b)
				m.val = append(m.val, pmi)
			}
		}
		m.ptr[a+1] = len(m.col)
		cooc[a] = nil
	}
	say("pass 2: PPMI matrix %d×%d with %d non-zeros", n, n, len(m.val))

	// Randomised truncated SVD: Y = (M Mᵀ)^q M Ω, Q = orth(Y), B = Qᵀ M,
	// eigen-decompose B Bᵀ = V Λ Vᵀ, U = Q V, σ = √λ.
	l := o.dim + 20
	rng := rand.New(rand.NewPCG(o.seed, 2))
	omega := mat.NewDense(n, l, nil)
	for i := range n {
		for j := range l {
			omega.Set(i, j, rng.NormFloat64())
		}
	}
	y := m.mul(omega)
	for range o.iters {
		if err := orthonormalise(y); err != nil {
			return nil, err
		}
		y = m.mul(m.mulT(y))
	}
	if err := orthonormalise(y); err != nil {
		return nil, err
	}
	q := y
	bt := m.mulT(q) // Mᵀ Q = Bᵀ, n×l
	var c mat.SymDense
	c.SymOuterK(1, bt.T()) // Bᵀᵀ Bᵀ = B Bᵀ, l×l
	var eig mat.EigenSym
	if !eig.Factorize(&c, true) {
		return nil, errors.New("eigen-decomposition failed")
	}
	lambda := eig.Values(nil) // ascending
	var v mat.Dense
	eig.VectorsTo(&v)
	var u mat.Dense
	u.Mul(q, &v)
	say("SVD: top singular values %.1f %.1f %.1f", math.Sqrt(lambda[l-1]), math.Sqrt(lambda[l-2]), math.Sqrt(lambda[l-3]))

	// A singular vector's sign is arbitrary and can flip with the last bit
	// of the input: fix it so that each vector's largest entry is positive
	// (cosines do not change), so the output bytes stay the same.
	sign := make([]float64, l)
	for j := range l {
		big, at := 0.0, 0
		for i := range n {
			if a := math.Abs(u.At(i, j)); a > big {
				big, at = a, i
			}
		}
		sign[j] = math.Copysign(1, u.At(at, j))
	}
	vecs := make([][]float64, n)
	probs := make([]float64, n)
	for i := range n {
		vecs[i] = make([]float64, o.dim)
		for k := range o.dim {
			j := l - 1 - k // descending
			vecs[i][k] = sign[j] * u.At(i, j) * math.Sqrt(math.Sqrt(max(lambda[j], 0)))
		}
		probs[i] = float64(counts[words[i]]) / float64(total)
	}
	wv, err := embed.BuildWordVectors(words, vecs, probs)
	if err != nil {
		return nil, err
	}
	// 5. The common component: the top principal direction of the
	// documents' SIF text vectors, removed from every text vector.
	pc, err := commonComponent(wv, paths, o.dim)
	if err != nil {
		return nil, err
	}
	if wv, err = wv.WithCommonComponent(pc); err != nil {
		return nil, err
	}
	say("common component removed")
	return wv, nil
}

// commonComponent is the first (uncentred) principal direction of the SIF
// text vectors of the corpus documents, by power iteration on their
// second-moment matrix.
func commonComponent(wv *embed.WordVectors, paths []string, dim int) ([]float64, error) {
	m := make([]float64, dim*dim)
	err := eachLine(paths, func(line string) {
		v := wv.TextVector(line)
		if v == nil {
			return
		}
		n := 0.0
		for _, x := range v {
			n += x * x
		}
		n = math.Sqrt(n)
		for i := range dim {
			for j := range dim {
				m[i*dim+j] += v[i] * v[j] / (n * n)
			}
		}
	})
	if err != nil {
		return nil, err
	}
	pc := make([]float64, dim)
	for i := range pc {
		pc[i] = 1
	}
	next := make([]float64, dim)
	for range 100 {
		for i := range dim {
			s := 0.0
			for j := range dim {
				s += m[i*dim+j] * pc[j]
			}
			next[i] = s
		}
		n := 0.0
		for _, x := range next {
			n += x * x
		}
		n = math.Sqrt(n)
		for i := range pc {
			pc[i] = next[i] / n
		}
	}
	return pc, nil
}

// sortedKeys returns row's keys in ascending order, reusing buf.
func sortedKeys(row map[int32]float64, buf []int32) []int32 {
	buf = buf[:0]
	for b := range row {
		buf = append(buf, b)
	}
	slices.Sort(buf)
	return buf
}

// eachDoc feeds the analysed words of every line of every file to f.
func eachDoc(paths []string, f func([]string)) error {
	return eachLine(paths, func(line string) { f(embed.AnalyzeWords(line)) })
}

// eachLine feeds every line of every file to f.
func eachLine(paths []string, f func(string)) error {
	for _, p := range paths {
		file, err := os.Open(p)
		if err != nil {
			return err
		}
		sc := bufio.NewScanner(file)
		sc.Buffer(make([]byte, 1<<20), 1<<24)
		for sc.Scan() {
			f(sc.Text())
		}
		err = sc.Err()
		file.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
	}
	return nil
}

// csr is a sparse square matrix in compressed-row form.
type csr struct {
	n   int
	ptr []int
	col []int32
	val []float64
}

// mul returns M·X.
func (m csr) mul(x *mat.Dense) *mat.Dense {
	_, k := x.Dims()
	out := mat.NewDense(m.n, k, nil)
	for i := range m.n {
		row := out.RawRowView(i)
		for p := m.ptr[i]; p < m.ptr[i+1]; p++ {
			xr := x.RawRowView(int(m.col[p]))
			v := m.val[p]
			for j := range row {
				row[j] += v * xr[j]
			}
		}
	}
	return out
}

// mulT returns Mᵀ·X.
func (m csr) mulT(x *mat.Dense) *mat.Dense {
	_, k := x.Dims()
	out := mat.NewDense(m.n, k, nil)
	for i := range m.n {
		xr := x.RawRowView(i)
		for p := m.ptr[i]; p < m.ptr[i+1]; p++ {
			row := out.RawRowView(int(m.col[p]))
			v := m.val[p]
			for j := range row {
				row[j] += v * xr[j]
			}
		}
	}
	return out
}

// orthonormalise replaces the columns of y by an orthonormal basis of their
// span, by Cholesky QR applied twice (Y = QR with R from chol(YᵀY); the
// second pass restores orthogonality lost to rounding). It never forms
// the full n×n Q of a Householder QR.
func orthonormalise(y *mat.Dense) error {
	_, l := y.Dims()
	for range 2 {
		var g mat.SymDense
		g.SymOuterK(1, y.T())
		for i := range l { // a tiny ridge keeps rank-deficient blocks factorable
			g.SetSym(i, i, g.At(i, i)*(1+1e-12)+1e-300)
		}
		var ch mat.Cholesky
		if !ch.Factorize(&g) {
			return errors.New("orthonormalise: Gram matrix not positive definite")
		}
		var r, rinv mat.TriDense
		ch.UTo(&r)
		if err := rinv.InverseTri(&r); err != nil {
			return err
		}
		var q mat.Dense
		q.Mul(y, &rinv)
		y.Copy(&q)
	}
	return nil
}
