package embed

import (
	"context"
	"math"
	"strings"
	"testing"
)

// blendReference is Blend.Embed as it was before it split each text once
// and reused its memory: the hashed part from Hashed.Embed, the word part
// from accumulate, each text on its own.
func blendReference(b *Blend, texts []string) [][]float32 {
	hv, err := b.h.Embed(context.Background(), texts)
	if err != nil {
		panic(err)
	}
	out := make([][]float32, len(texts))
	hd := b.h.Dim()
	for i, t := range texts {
		v := make([]float32, b.Dim())
		for k, x := range hv[i] {
			v[k] = float32(b.wh) * x
		}
		acc := make([]float64, b.wv.Dim())
		words, known := b.wv.accumulate(t, acc, nil)
		_ = words
		if known && b.wv.common != nil {
			d := 0.0
			for k, x := range acc {
				d += x * b.wv.common[k]
			}
			for k := range acc {
				acc[k] -= d * b.wv.common[k]
			}
		}
		if known {
			n := 0.0
			for _, x := range acc {
				n += x * x
			}
			if n > 0 {
				f := b.ws / math.Sqrt(n)
				for k, x := range acc {
					v[hd+k] = float32(f * x)
				}
			}
		}
		normalize32(v)
		out[i] = v
	}
	return out
}

// TestBlendIsUnchanged holds the built-in embedder to its reference, bit
// for bit, over texts of every kind (queries, card texts, identifiers,
// stop words only, no words, non-Latin scripts, long texts), one at a time
// and in batches, the batches past the context check's stride too.
func TestBlendIsUnchanged(t *testing.T) {
	b := MustBuiltin()
	texts := []string{
		"", "   ", "the of and", "it", "find a restaurant near me", "github.createIssue", "HTTPServer getURLParams v2",
		"Create a new issue in a GitHub repository. open a bug report; file a ticket; new issue",
		"Résumé: café naïve — 東京 の 天気", "deprecated: use list_files instead", "12306 tickets from Beijing to Shanghai",
		strings.Repeat("convert currency exchange rates ", 40), "a", "photo picture image", "queries running shipped",
	}
	for i := range 150 {
		texts = append(texts, texts[i%15]+" "+texts[(i*7)%15])
	}
	for _, batch := range [][]string{texts[:1], texts[:15], texts} {
		got, err := b.Embed(context.Background(), batch)
		if err != nil {
			t.Fatal(err)
		}
		want := blendReference(b, batch)
		for i := range want {
			for k := range want[i] {
				if math.Float32bits(got[i][k]) != math.Float32bits(want[i][k]) {
					t.Fatalf("text %q: component %d is %v, want %v", batch[i], k, got[i][k], want[i][k])
				}
			}
		}
	}
	// Again, on scratch that earlier calls left behind.
	for range 3 {
		got, _ := b.Embed(context.Background(), texts[:20])
		want := blendReference(b, texts[:20])
		for i := range want {
			for k := range want[i] {
				if math.Float32bits(got[i][k]) != math.Float32bits(want[i][k]) {
					t.Fatalf("reused scratch, text %q: component %d differs", texts[i], k)
				}
			}
		}
	}
}

func BenchmarkBlendEmbed(b *testing.B) {
	e := MustBuiltin()
	texts := []string{"find the cheapest flight from Paris to Tokyo next week"}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := e.Embed(ctx, texts); err != nil {
			b.Fatal(err)
		}
	}
}
