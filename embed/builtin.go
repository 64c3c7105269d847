package embed

import (
	"bytes"
	"context"
	_ "embed"
	"fmt"
	"math"
	"sync"
)

//go:embed wordvec.bin.gz
var builtinWordVectors []byte

var (
	builtinOnce sync.Once
	builtinWV   *WordVectors
	builtinErr  error
)

// BuiltinWordVectors are the word vectors built into the binary (trained by
// embed/wordvec-train from Debian's package descriptions and WordNet's
// glosses; see scripts/wordvec-corpus). Loaded once, on first use.
func BuiltinWordVectors() (*WordVectors, error) {
	builtinOnce.Do(func() {
		builtinWV, builtinErr = ReadWordVectors(bytes.NewReader(builtinWordVectors))
	})
	return builtinWV, builtinErr
}

// Blend weights: the cosine of two blended vectors is about
// blendHashed²·cos(hashed) + blendWords²·cos(words) when both texts have
// known words. Chosen with cardex eval (docs/EVAL.md).
const (
	blendHashed = 0.71
	blendWords  = 0.71
)

// Blend is the default built-in embedder: the hashed features of Hashed
// (surface words, phrases, word fragments) next to the smooth-inverse-
// frequency weighted average of distributional word vectors (meaning: words
// used alike are close, "picture" and "photo"), each part unit-length and
// weighted, the whole L2-normalised. Deterministic, no download, no model
// server.
type Blend struct {
	h      *Hashed
	wv     *WordVectors
	wh, ws float64
	model  string
	// scratch is the working memory of finished Embed calls
	// (*blendScratch), reused by the next ones: a query's embedding is on
	// every discovery's path.
	scratch sync.Pool
}

// blendScratch is one Embed call's working memory: a text's words, its
// hashed features and the two parts' sums.
type blendScratch struct {
	fx         featurizer
	hAcc, wAcc []float64
}

// NewBlend blends a hashed embedder of hashedDim with word vectors.
func NewBlend(hashedDim int, wv *WordVectors) *Blend {
	h := NewHashed(hashedDim)
	return &Blend{h: h, wv: wv, wh: blendHashed, ws: blendWords, model: fmt.Sprintf("cardex-blend-v1-%s+wv-%s-%d", h.Model(), wv.ID(), wv.Dim())}
}

// Builtin returns the default embedder: Blend of Hashed(DefaultDim) with
// the built-in word vectors.
func Builtin() (*Blend, error) {
	wv, err := BuiltinWordVectors()
	if err != nil {
		return nil, err
	}
	return NewBlend(DefaultDim, wv), nil
}

// Model implements Embedder.
func (b *Blend) Model() string { return b.model }

// Dim implements Embedder.
func (b *Blend) Dim() int { return b.h.Dim() + b.wv.Dim() }

// Embed implements Embedder. Each text is split into words once, for both
// parts; the vectors share one allocation.
func (b *Blend) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	hd, dim := b.h.Dim(), b.Dim()
	out := make([][]float32, len(texts))
	flat := make([]float32, len(texts)*dim)
	sc, _ := b.scratch.Get().(*blendScratch)
	if sc == nil {
		sc = &blendScratch{hAcc: make([]float64, hd), wAcc: make([]float64, b.wv.Dim())}
	}
	defer func() {
		clear(sc.fx.words) // the texts' words
		b.scratch.Put(sc)
	}()
	for i, t := range texts {
		if i > 0 && i%64 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		v := flat[i*dim : (i+1)*dim : (i+1)*dim]
		sc.fx.words = splitWords(t, sc.fx.words[:0])
		// The hashed part, as Hashed.Embed makes it, weighted.
		clear(sc.hAcc)
		sc.fx.accumulateWords(sc.hAcc)
		normalizeInto(v[:hd], sc.hAcc)
		for k, x := range v[:hd] {
			v[k] = float32(b.wh) * x
		}
		clear(sc.wAcc)
		if b.wv.composeWords(sc.fx.words, sc.wAcc) {
			n := 0.0
			for _, x := range sc.wAcc {
				n += x * x
			}
			if n > 0 {
				f := b.ws / math.Sqrt(n)
				for k, x := range sc.wAcc {
					v[hd+k] = float32(f * x)
				}
			}
		}
		normalize32(v)
		out[i] = v
	}
	return out, nil
}

func normalize32(v []float32) {
	n := 0.0
	for _, x := range v {
		n += float64(x) * float64(x)
	}
	if n == 0 {
		return
	}
	f := float32(1 / math.Sqrt(n))
	for i := range v {
		v[i] *= f
	}
}

// MustBuiltin is Builtin for callers that cannot handle an error: the data
// is part of the binary, so failing to read it is a build defect.
func MustBuiltin() *Blend {
	b, err := Builtin()
	if err != nil {
		panic("embed: built-in word vectors: " + err.Error())
	}
	return b
}
