package embed

import (
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
)

func embedOne(t *testing.T, h *Hashed, text string) []float32 {
	t.Helper()
	vs, err := h.Embed(context.Background(), []string{text})
	if err != nil {
		t.Fatalf("Embed(%q): %v", text, err)
	}
	if len(vs) != 1 || len(vs[0]) != h.Dim() {
		t.Fatalf("Embed(%q): got %d vectors, want 1 of dim %d", text, len(vs), h.Dim())
	}
	return vs[0]
}

func dot(a, b []float32) float64 {
	var s float64
	for i := range a {
		s += float64(a[i]) * float64(b[i])
	}
	return s
}

func norm(a []float32) float64 { return math.Sqrt(dot(a, a)) }

func TestHashedModelAndDim(t *testing.T) {
	for _, tc := range []struct {
		dim       int
		wantDim   int
		wantModel string
	}{
		{384, 384, "cardex-hashed-v1-384"},
		{DefaultDim, 384, "cardex-hashed-v1-384"},
		{0, DefaultDim, "cardex-hashed-v1-384"},
		{-5, DefaultDim, "cardex-hashed-v1-384"},
		{1024, 1024, "cardex-hashed-v1-1024"},
	} {
		h := NewHashed(tc.dim)
		if h.Dim() != tc.wantDim || h.Model() != tc.wantModel {
			t.Errorf("NewHashed(%d): Dim=%d Model=%q, want %d %q", tc.dim, h.Dim(), h.Model(), tc.wantDim, tc.wantModel)
		}
	}
	var _ Embedder = NewHashed(8)
}

func TestHashedDeterministic(t *testing.T) {
	texts := []string{
		"Create a GitHub issue in a repository",
		"refund an invoice",
		"createIssue",
		"",
		"Überweisung prüfen — naïve café",
	}
	a, err := NewHashed(0).Embed(context.Background(), texts)
	if err != nil {
		t.Fatal(err)
	}
	// A fresh embedder, a different batch order and repeated calls agree.
	for range 3 {
		rev := slices.Clone(texts)
		slices.Reverse(rev)
		b, err := NewHashed(0).Embed(context.Background(), rev)
		if err != nil {
			t.Fatal(err)
		}
		slices.Reverse(b)
		for i := range a {
			if !slices.Equal(a[i], b[i]) {
				t.Fatalf("text %q: vectors differ between calls", texts[i])
			}
		}
	}
}

func TestHashedUnitLength(t *testing.T) {
	h := NewHashed(0)
	for _, text := range []string{
		"create a github issue",
		"x",
		"the", // only stop words: kept rather than dropped
		"a an the of",
		"getUserByID_v2.list-all",
		strings.Repeat("refund invoice ", 500),
		"日本語のテキスト",
	} {
		v := embedOne(t, h, text)
		if n := norm(v); math.Abs(n-1) > 1e-5 {
			t.Errorf("%q: norm %v, want 1", text, n)
		}
	}
}

func TestHashedEmptyIsZero(t *testing.T) {
	h := NewHashed(0)
	other := embedOne(t, h, "create a github issue")
	for _, text := range []string{"", "   ", "!?-_.", "\n\t"} {
		v := embedOne(t, h, text)
		if n := norm(v); n != 0 {
			t.Errorf("%q: norm %v, want zero vector", text, n)
		}
		if c := dot(v, other); c != 0 {
			t.Errorf("%q: cosine with a real vector %v, want 0", text, c)
		}
	}
	vs, err := h.Embed(context.Background(), nil)
	if err != nil || len(vs) != 0 {
		t.Errorf("Embed(nil) = %v, %v; want empty, nil", vs, err)
	}
}

func TestHashedSimilarity(t *testing.T) {
	h := NewHashed(0)
	for _, tc := range []struct{ anchor, near, far string }{
		{"create a github issue", "open new issue in repository", "refund an invoice"},
		{"refund an invoice", "issue a refund for the customer's invoices", "list github pull requests"},
		{"track package shipping", "where is my shipment, tracking number", "delete a database table"},
		{"send an email", "sending emails to users", "query sales database"},
	} {
		a, n, f := embedOne(t, h, tc.anchor), embedOne(t, h, tc.near), embedOne(t, h, tc.far)
		near, far := dot(a, n), dot(a, f)
		if near <= far {
			t.Errorf("%q: cos(near %q)=%.3f <= cos(far %q)=%.3f", tc.anchor, tc.near, near, tc.far, far)
		}
	}
}

func TestHashedCamelCase(t *testing.T) {
	h := NewHashed(0)
	query := embedOne(t, h, "create issue")
	for _, name := range []string{"createIssue", "create_issue", "create-issue", "create.issue", "CreateIssue", "CREATE_ISSUE"} {
		v := embedOne(t, h, name)
		if c := dot(query, v); c < 0.999 {
			t.Errorf("cos(%q, %q) = %.4f, want ≈1 (same words after splitting)", "create issue", name, c)
		}
	}
	// Without the split, the glued word shares only character n-grams.
	glued := embedOne(t, h, "createissue")
	camel := embedOne(t, h, "createIssue")
	if dot(query, glued) >= dot(query, camel) {
		t.Errorf("camelCase split has no effect: cos(glued)=%.3f cos(camel)=%.3f", dot(query, glued), dot(query, camel))
	}
}

func TestSplitWords(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"createIssue", []string{"create", "issue"}},
		{"HTTPServer", []string{"http", "server"}},
		{"getUserByID", []string{"get", "user", "by", "id"}},
		{"list_all-repos.v2", []string{"list", "all", "repos", "v2"}},
		{"oauth2Token", []string{"oauth2", "token"}},
		{"  Hello,   World! ", []string{"hello", "world"}},
		{"naïveCafé", []string{"naïve", "café"}},
		{"", nil},
	} {
		got := splitWords(tc.in, nil)
		if !slices.Equal(got, tc.want) {
			t.Errorf("splitWords(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestStem(t *testing.T) {
	groups := [][]string{
		{"create", "creates", "created", "creating"},
		{"issue", "issues"},
		{"query", "queries"},
		{"ship", "ships", "shipped", "shipping"},
		{"match", "matches"},
		{"box", "boxes"},
		{"address", "addresses"},
		{"bill", "billing", "billed"},
		{"apply", "applied"},
	}
	for _, g := range groups {
		want := stem(g[0])
		for _, w := range g[1:] {
			if got := stem(w); got != want {
				t.Errorf("stem(%q) = %q, want %q (as stem(%q))", w, got, want, g[0])
			}
		}
	}
	for _, w := range []string{"status", "analysis", "need", "string", "thing", "bus", "is"} {
		if got := stem(w); got != w && !(len(got) == len(w)-1 && w[len(w)-1] == 'e') {
			t.Errorf("stem(%q) = %q, want it unchanged", w, got)
		}
	}
}

func TestHashedContextCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	vs, err := NewHashed(0).Embed(ctx, []string{"create a github issue"})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if vs != nil {
		t.Errorf("vectors = %v, want nil on error", vs)
	}
}

func TestHashedConcurrent(t *testing.T) {
	h := NewHashed(0)
	want := embedOne(t, h, "refund an invoice")
	done := make(chan []float32)
	for range 8 {
		go func() {
			vs, _ := h.Embed(context.Background(), []string{"refund an invoice"})
			done <- vs[0]
		}()
	}
	for range 8 {
		if got := <-done; !slices.Equal(got, want) {
			t.Fatal("concurrent Embed differs")
		}
	}
}

func BenchmarkHashedEmbed(b *testing.B) {
	h := NewHashed(0)
	// A typical card text: name, summary and aliases.
	texts := []string{
		"github.createIssue Create a new issue in a GitHub repository. open a bug report; file a ticket; new issue",
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := h.Embed(ctx, texts); err != nil {
			b.Fatal(err)
		}
	}
}
