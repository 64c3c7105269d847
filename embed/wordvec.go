package embed

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"time"
)

// WordVectors are distributional word vectors: each vocabulary word (a
// stemmed, lower-cased, non-stop word, as the hashed embedder sees words)
// has a dense vector such that words used in similar contexts are close, so
// that "picture" and "image" match although they share no letters. They are
// trained here by embed/wordvec-train from text that Debian ships (see
// scripts/wordvec-corpus) and built into the binary.
//
// A WordVectors is immutable and safe for concurrent use.
type WordVectors struct {
	dim    int
	index  map[string]int32
	vecs   []int8    // len(words)*dim, quantised
	scale  []float32 // per word: 1/‖quantised vector‖
	weight []float32 // per word: smooth inverse frequency a/(a+p(w))
	// common is the unit "common discourse" direction removed from every
	// text vector (SIF's common-component removal), or nil.
	common []float64
	id     string // content hash, part of the model id
}

// Dim is the vector length.
func (wv *WordVectors) Dim() int { return wv.dim }

// Len is the vocabulary size.
func (wv *WordVectors) Len() int { return len(wv.scale) }

// ID identifies the vectors' content (a hash prefix).
func (wv *WordVectors) ID() string { return wv.id }

// sifA is the smooth-inverse-frequency constant (Arora, Liang and Ma, "A
// simple but tough-to-beat baseline for sentence embeddings", 2017).
const sifA = 1e-3

// BuildWordVectors makes WordVectors from trained vectors (any scale; they
// are quantised to int8) and word probabilities p(w) in the training corpus,
// which become smooth-inverse-frequency weights a/(a+p(w)).
func BuildWordVectors(words []string, vecs [][]float64, probs []float64) (*WordVectors, error) {
	if len(words) == 0 || len(vecs) != len(words) || len(probs) != len(words) {
		return nil, errors.New("word vectors: words, vectors and probabilities must have one entry per word")
	}
	dim := len(vecs[0])
	wv := &WordVectors{dim: dim, index: make(map[string]int32, len(words)), vecs: make([]int8, len(words)*dim),
		scale: make([]float32, len(words)), weight: make([]float32, len(words))}
	for i, w := range words {
		if len(vecs[i]) != dim {
			return nil, fmt.Errorf("word vectors: %q has %d dimensions, want %d", w, len(vecs[i]), dim)
		}
		if _, dup := wv.index[w]; dup {
			return nil, fmt.Errorf("word vectors: %q twice", w)
		}
		wv.index[w] = int32(i)
		quantise(vecs[i], wv.vecs[i*dim:(i+1)*dim])
		wv.weight[i] = float32(sifA / (sifA + probs[i]))
	}
	wv.finish(words)
	return wv, nil
}

// AnalyzeWords is how word vectors see a text: split into lower-cased
// words (on non-letters and camelCase), stop words, one-letter words and
// numbers dropped, the rest stemmed. Training uses it too.
func AnalyzeWords(text string) []string {
	var out []string
	for _, w := range splitWords(text, nil) {
		if stopWords[w] || len(w) < 2 || isNumber(w) {
			continue
		}
		out = append(out, stem(w))
	}
	return out
}

func isNumber(w string) bool {
	for _, r := range w {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// quantise writes v scaled to the int8 range.
func quantise(v []float64, out []int8) {
	m := 0.0
	for _, x := range v {
		m = max(m, math.Abs(x))
	}
	if m == 0 {
		return
	}
	for i, x := range v {
		out[i] = int8(math.Round(x / m * 127))
	}
}

// finish computes the per-word scales and the content id.
func (wv *WordVectors) finish(words []string) {
	for i := range wv.scale {
		n := 0.0
		for _, q := range wv.vecs[i*wv.dim : (i+1)*wv.dim] {
			n += float64(q) * float64(q)
		}
		if n > 0 {
			wv.scale[i] = float32(1 / math.Sqrt(n))
		}
	}
	h := sha256.New()
	for _, w := range words {
		h.Write([]byte(w))
		h.Write([]byte{0})
	}
	h.Write(unsafeInt8Bytes(wv.vecs))
	binary.Write(h, binary.LittleEndian, wv.weight)
	for _, x := range wv.common {
		binary.Write(h, binary.LittleEndian, float32(x))
	}
	wv.id = hex.EncodeToString(h.Sum(nil)[:6])
}

func unsafeInt8Bytes(v []int8) []byte {
	b := make([]byte, len(v))
	for i, x := range v {
		b[i] = byte(x)
	}
	return b
}

// The file format (gzip-compressed): magic "CXWV1\n", uint32 dim, uint32
// count, then per word: uint16 length, the word's bytes, float32 weight,
// dim int8 components. Little endian.
const wvMagic = "CXWV1\n"

// wvCommon starts the optional trailer: the common component, dim float32.
const wvCommon = "PC1\n"

// WriteTo writes the vectors in the file format, gzip-compressed.
func (wv *WordVectors) WriteTo(w io.Writer) (int64, error) {
	words := make([]string, wv.Len())
	for word, i := range wv.index {
		words[i] = word
	}
	var buf bytes.Buffer
	buf.WriteString(wvMagic)
	binary.Write(&buf, binary.LittleEndian, uint32(wv.dim))
	binary.Write(&buf, binary.LittleEndian, uint32(len(words)))
	for i, word := range words {
		binary.Write(&buf, binary.LittleEndian, uint16(len(word)))
		buf.WriteString(word)
		binary.Write(&buf, binary.LittleEndian, wv.weight[i])
		buf.Write(unsafeInt8Bytes(wv.vecs[i*wv.dim : (i+1)*wv.dim]))
	}
	if wv.common != nil {
		buf.WriteString(wvCommon)
		for _, x := range wv.common {
			binary.Write(&buf, binary.LittleEndian, float32(x))
		}
	}
	zw, err := gzip.NewWriterLevel(w, gzip.BestCompression)
	if err != nil {
		return 0, err
	}
	zw.ModTime = zeroTime // deterministic output
	n, err := zw.Write(buf.Bytes())
	if err != nil {
		return int64(n), err
	}
	return int64(n), zw.Close()
}

// ReadWordVectors reads the file format written by WriteTo.
func ReadWordVectors(r io.Reader) (*WordVectors, error) {
	zr, err := gzip.NewReader(r)
	if err != nil {
		return nil, fmt.Errorf("word vectors: %w", err)
	}
	data, err := io.ReadAll(zr)
	if err != nil {
		return nil, fmt.Errorf("word vectors: %w", err)
	}
	if !bytes.HasPrefix(data, []byte(wvMagic)) || len(data) < len(wvMagic)+8 {
		return nil, errors.New("word vectors: not a cardex word-vector file")
	}
	p := data[len(wvMagic):]
	dim := int(binary.LittleEndian.Uint32(p))
	n := int(binary.LittleEndian.Uint32(p[4:]))
	p = p[8:]
	if dim <= 0 || dim > 4096 || n <= 0 {
		return nil, fmt.Errorf("word vectors: bad header (dim %d, %d words)", dim, n)
	}
	wv := &WordVectors{dim: dim, index: make(map[string]int32, n), vecs: make([]int8, n*dim),
		scale: make([]float32, n), weight: make([]float32, n)}
	words := make([]string, n)
	for i := range n {
		if len(p) < 2 {
			return nil, errors.New("word vectors: truncated")
		}
		l := int(binary.LittleEndian.Uint16(p))
		if len(p) < 2+l+4+dim {
			return nil, errors.New("word vectors: truncated")
		}
		words[i] = string(p[2 : 2+l])
		wv.index[words[i]] = int32(i)
		wv.weight[i] = math.Float32frombits(binary.LittleEndian.Uint32(p[2+l:]))
		for k, b := range p[2+l+4 : 2+l+4+dim] {
			wv.vecs[i*dim+k] = int8(b)
		}
		p = p[2+l+4+dim:]
	}
	switch {
	case len(p) == 0:
	case bytes.HasPrefix(p, []byte(wvCommon)) && len(p) == len(wvCommon)+4*dim:
		wv.common = make([]float64, dim)
		for k := range dim {
			wv.common[k] = float64(math.Float32frombits(binary.LittleEndian.Uint32(p[len(wvCommon)+4*k:])))
		}
	default:
		return nil, errors.New("word vectors: unexpected data after the words")
	}
	wv.finish(words)
	return wv, nil
}

// WithCommonComponent returns a copy that removes the given direction
// (normalised here) from every text vector: the common component of
// smooth-inverse-frequency sentence embeddings (Arora et al., 2017).
func (wv *WordVectors) WithCommonComponent(pc []float64) (*WordVectors, error) {
	if len(pc) != wv.dim {
		return nil, fmt.Errorf("common component has %d dimensions, want %d", len(pc), wv.dim)
	}
	n := 0.0
	for _, x := range pc {
		n += x * x
	}
	if n == 0 {
		return nil, errors.New("common component is zero")
	}
	out := *wv
	out.common = make([]float64, wv.dim)
	for k, x := range pc {
		out.common[k] = float64(float32(x / math.Sqrt(n))) // as stored
	}
	words := make([]string, wv.Len())
	for w, i := range wv.index {
		words[i] = w
	}
	out.finish(words)
	return &out, nil
}

// TextVector is the smooth-inverse-frequency weighted average direction of
// a text's known words (not normalised), before any common-component
// removal; nil when no word is known.
func (wv *WordVectors) TextVector(text string) []float64 {
	acc := make([]float64, wv.dim)
	if _, known := wv.accumulate(text, acc, nil); !known {
		return nil
	}
	return acc
}

// composeWords is TextVector of a text's words (splitWords) into acc, with
// the common component removed.
func (wv *WordVectors) composeWords(words []string, acc []float64) bool {
	known := wv.accumulateWords(words, acc)
	if known && wv.common != nil {
		d := 0.0
		for k, x := range acc {
			d += x * wv.common[k]
		}
		for k := range acc {
			acc[k] -= d * wv.common[k]
		}
	}
	return known
}

// Similar returns the n vocabulary words closest to word (for inspection).
func (wv *WordVectors) Similar(word string, n int) []string {
	i, ok := wv.index[stem(word)]
	if !ok {
		return nil
	}
	type sim struct {
		w string
		s float32
	}
	var all []sim
	for w, j := range wv.index {
		if j != i {
			all = append(all, sim{w, wv.cos(i, j)})
		}
	}
	sort.Slice(all, func(a, b int) bool { return all[a].s > all[b].s || all[a].s == all[b].s && all[a].w < all[b].w })
	out := make([]string, 0, n)
	for _, s := range all[:min(n, len(all))] {
		out = append(out, s.w)
	}
	return out
}

func (wv *WordVectors) cos(i, j int32) float32 {
	var s int32
	a, b := wv.vecs[int(i)*wv.dim:int(i+1)*wv.dim], wv.vecs[int(j)*wv.dim:int(j+1)*wv.dim]
	for k := range a {
		s += int32(a[k]) * int32(b[k])
	}
	return float32(s) * wv.scale[i] * wv.scale[j]
}

// accumulate adds the SIF-weighted unit vectors of text's known words to
// acc and reports whether any word was known.
func (wv *WordVectors) accumulate(text string, acc []float64, words []string) ([]string, bool) {
	words = splitWords(text, words[:0])
	return words, wv.accumulateWords(words, acc)
}

// accumulateWords is accumulate of a text's words (splitWords).
func (wv *WordVectors) accumulateWords(words []string, acc []float64) bool {
	known := false
	for _, w := range words {
		if stopWords[w] {
			continue
		}
		i, ok := wv.index[stem(w)]
		if !ok {
			continue
		}
		known = true
		f := float64(wv.weight[i] * wv.scale[i])
		for k, q := range wv.vecs[int(i)*wv.dim : int(i+1)*wv.dim] {
			acc[k] += f * float64(q)
		}
	}
	return known
}

var zeroTime time.Time
