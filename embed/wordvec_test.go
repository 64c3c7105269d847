package embed

import (
	"bytes"
	"context"
	"math"
	"slices"
	"strings"
	"testing"
)

func TestWordVectorsRoundTrip(t *testing.T) {
	words := []string{"imag", "photo", "invoic"}
	vecs := [][]float64{{1, 0.9, 0}, {0.9, 1, 0.1}, {0, 0.1, 1}}
	wv, err := BuildWordVectors(words, vecs, []float64{0.01, 0.001, 0.0001})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := wv.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	first := buf.Bytes()
	var again bytes.Buffer
	wv.WriteTo(&again)
	if !bytes.Equal(first, again.Bytes()) {
		t.Error("WriteTo is not deterministic")
	}
	back, err := ReadWordVectors(bytes.NewReader(first))
	if err != nil {
		t.Fatal(err)
	}
	if back.ID() != wv.ID() || back.Len() != 3 || back.Dim() != 3 {
		t.Fatalf("read back %s %d×%d, want %s 3×3", back.ID(), back.Len(), back.Dim(), wv.ID())
	}
	if got := back.Similar("images", 1); !slices.Equal(got, []string{"photo"}) {
		t.Errorf("Similar(images) = %v, want [photo] (stemmed lookup)", got)
	}
	// A rarer word weighs more (smooth inverse frequency).
	if !(back.weight[2] > back.weight[1] && back.weight[1] > back.weight[0]) {
		t.Errorf("weights %v do not fall with frequency", back.weight)
	}
	for _, bad := range [][]byte{nil, []byte("not gzip"), first[:len(first)/2]} {
		if _, err := ReadWordVectors(bytes.NewReader(bad)); err == nil {
			t.Errorf("ReadWordVectors accepted %d bad bytes", len(bad))
		}
	}
	if _, err := BuildWordVectors(words, vecs[:2], []float64{1, 1, 1}); err == nil {
		t.Error("BuildWordVectors accepted mismatched lengths")
	}
	if _, err := BuildWordVectors([]string{"a", "a"}, vecs[:2], []float64{1, 1}); err == nil {
		t.Error("BuildWordVectors accepted a duplicate word")
	}
}

func TestAnalyzeWords(t *testing.T) {
	got := AnalyzeWords("Create the GitHub issues for 2024 releases")
	want := []string{"creat", "git", "hub", "issu", "releas"} // camelCase splits GitHub
	if !slices.Equal(got, want) {
		t.Errorf("AnalyzeWords = %q, want %q", got, want)
	}
}

// The built-in vectors are data built into the binary: check they load and
// carry meaning (words used alike are closer than unrelated words).
func TestBuiltinWordVectors(t *testing.T) {
	wv, err := BuiltinWordVectors()
	if err != nil {
		t.Fatal(err)
	}
	if wv.Len() < 10000 || wv.Dim() < 64 {
		t.Fatalf("built-in vectors: %d words × %d", wv.Len(), wv.Dim())
	}
	cos := func(a, b string) float32 { return wv.cos(wv.index[stem(a)], wv.index[stem(b)]) }
	for _, tc := range [][3]string{{"picture", "photograph", "invoice"}, {"song", "music", "database"}, {"car", "vehicle", "compiler"}} {
		if cos(tc[0], tc[1]) <= cos(tc[0], tc[2]) {
			t.Errorf("cos(%s, %s) = %.2f is not above cos(%s, %s) = %.2f", tc[0], tc[1], cos(tc[0], tc[1]), tc[0], tc[2], cos(tc[0], tc[2]))
		}
	}
}

func TestBlend(t *testing.T) {
	b, err := Builtin()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(b.Model(), "cardex-blend-v1-cardex-hashed-v1-384+wv-") || b.Dim() != DefaultDim+200 {
		t.Fatalf("model %q dim %d", b.Model(), b.Dim())
	}
	texts := []string{"show me a photograph of a cat", "find pictures of kittens", "refund the customer's invoice", "", "zzqx"}
	v1, err := b.Embed(context.Background(), texts)
	if err != nil {
		t.Fatal(err)
	}
	v2, _ := b.Embed(context.Background(), texts)
	for i := range v1 {
		if !slices.Equal(v1[i], v2[i]) {
			t.Fatalf("text %d: not deterministic", i)
		}
		n := 0.0
		for _, x := range v1[i] {
			n += float64(x) * float64(x)
		}
		if want := 1.0; texts[i] != "" && math.Abs(n-want) > 1e-4 || texts[i] == "" && n != 0 {
			t.Errorf("text %q: squared norm %v", texts[i], n)
		}
	}
	dot := func(a, b []float32) float64 {
		s := 0.0
		for i := range a {
			s += float64(a[i]) * float64(b[i])
		}
		return s
	}
	// No shared word, but shared meaning: the word vectors carry it.
	h := NewHashed(DefaultDim)
	hv, _ := h.Embed(context.Background(), texts)
	if dot(v1[0], v1[1]) <= dot(v1[0], v1[2]) || dot(v1[0], v1[1]) <= dot(hv[0], hv[1]) {
		t.Errorf("photo/pictures %.3f (hashed alone %.3f) vs photo/refund %.3f", dot(v1[0], v1[1]), dot(hv[0], hv[1]), dot(v1[0], v1[2]))
	}
}

func TestCommonComponentRoundTrip(t *testing.T) {
	wv, err := BuildWordVectors([]string{"aa", "bb"}, [][]float64{{1, 0}, {0.5, 0.5}}, []float64{0.5, 0.5})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := wv.WithCommonComponent([]float64{0, 0}); err == nil {
		t.Error("a zero common component was accepted")
	}
	pc, err := wv.WithCommonComponent([]float64{3, 0})
	if err != nil {
		t.Fatal(err)
	}
	if pc.ID() == wv.ID() {
		t.Error("the common component is not part of the id")
	}
	var buf bytes.Buffer
	pc.WriteTo(&buf)
	back, err := ReadWordVectors(&buf)
	if err != nil || back.ID() != pc.ID() {
		t.Fatalf("round trip: %v, id %s vs %s", err, back.ID(), pc.ID())
	}
	// "aa" lies on the common direction: nothing of it is left.
	acc := make([]float64, 2)
	if known := back.composeWords(splitWords("aa", nil), acc); !known || math.Abs(acc[0]) > 1e-9 {
		t.Errorf("composeWords(aa) = %v; the common direction was not removed", acc)
	}
}

func BenchmarkBuiltinEmbed(b *testing.B) {
	e, err := Builtin()
	if err != nil {
		b.Fatal(err)
	}
	texts := []string{"Create a new issue in a GitHub repository with a title, body and labels."}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := e.Embed(context.Background(), texts); err != nil {
			b.Fatal(err)
		}
	}
}
