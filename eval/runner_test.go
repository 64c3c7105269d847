package eval

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/seed0cff8200/cardex/retriever"
)

// byteTokenizer counts one token per byte, so expected counts are easy to
// compute by hand.
type byteTokenizer struct{}

func (byteTokenizer) Encoding() string            { return "bytes" }
func (byteTokenizer) Count(s string) (int, error) { return len(s), nil }

func runFixture(t *testing.T, dir string, o Options) (*Report, []Miss) {
	t.Helper()
	d, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	b := NewInProcess(nil)
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Error(err)
		}
	})
	rep, misses, err := Run(context.Background(), d, b, o)
	if err != nil {
		t.Fatal(err)
	}
	return rep, misses
}

func TestRunFixtureEndToEnd(t *testing.T) {
	var calls, last int
	rep, misses := runFixture(t, "testdata/tiny", Options{Tokenizer: byteTokenizer{}, Workers: 3,
		Progress: func(done, total int) { calls++; last = done; _ = total }})

	if rep.Dataset != "tiny" || rep.Tools != 8 || rep.Queries != 5 || rep.TopK != DefaultTopK || rep.Tenant != "eval-tiny" || rep.Fusion != retriever.DefaultFusion {
		t.Errorf("report header = %+v", rep)
	}
	if strings.Join(rep.Modes, ",") != "lexical,semantic,hybrid" {
		t.Errorf("modes = %v", rep.Modes)
	}
	if calls != 15 || last != 15 {
		t.Errorf("progress called %d times, last done %d; want 15, 15", calls, last)
	}
	want := map[string]int{"all": 5, "single": 4, "multi": 1}
	if len(rep.Subsets) != 3 {
		t.Fatalf("subsets = %+v", rep.Subsets)
	}
	for _, s := range rep.Subsets {
		if want[s.Name] != s.Queries || len(s.Modes) != 3 {
			t.Errorf("subset %s: %d queries, %d modes", s.Name, s.Queries, len(s.Modes))
		}
		for _, m := range s.Modes {
			for _, v := range []float64{m.Recall1, m.Recall3, m.Recall5, m.Recall10, m.MRR, m.NDCG10} {
				if v < 0 || v > 1 {
					t.Errorf("%s/%s: metric %v outside [0,1]", s.Name, m.Mode, v)
				}
			}
			if m.Recall1 > m.Recall3 || m.Recall3 > m.Recall5 || m.Recall5 > m.Recall10 {
				t.Errorf("%s/%s: recall not monotone in K: %+v", s.Name, m.Mode, m.Metrics)
			}
		}
	}

	// q5 matches no word of any card: the lexical leg returns nothing,
	// and every mode misses it.
	var q5 *Miss
	for i := range misses {
		if misses[i].ID == "q5" {
			q5 = &misses[i]
		}
		if len(misses[i].Modes) != 3 {
			t.Errorf("miss %s has modes %v", misses[i].ID, misses[i].Modes)
		}
	}
	if q5 == nil {
		t.Fatalf("q5 is not among the misses %+v", misses)
	}
	if lm := q5.Modes["lexical"]; len(lm.Returned) != 0 || len(lm.Missed) != 1 || lm.Missed[0][0] != "github/search" || lm.Found[0] != 0 {
		t.Errorf("q5 lexical = %+v", lm)
	}
	// q1 names its tool outright: the lexical leg ranks it first.
	all := rep.Subset("all")
	if all.Modes[0].Mode != "lexical" || all.Modes[0].Recall10 < 0.79 {
		t.Errorf("lexical recall@10 over the fixture = %v, want at least 4 of 5 queries", all.Modes[0].Recall10)
	}

	// Tokens: one per byte of each definition; no queries in the shortlist
	// beyond what hybrid returned, so check the catalogue total by hand.
	d, _ := Load("testdata/tiny")
	total := 0
	for i := range d.Tools {
		def, err := Definition(&d.Tools[i])
		if err != nil {
			t.Fatal(err)
		}
		total += len(def)
	}
	tr := rep.Tokens
	if tr == nil || tr.CatalogTokens != total || tr.Tools != 8 || tr.ToolsWithSchema != 7 || len(tr.Shortlists) != 3 {
		t.Fatalf("tokens = %+v, want catalogue %d", tr, total)
	}
	for _, s := range tr.Shortlists {
		if s.Tokens <= 0 || s.Tokens > float64(total) || s.Saved < 0 || s.Saved >= 1 || !strings.Contains(s.Source, "hybrid") {
			t.Errorf("shortlist %+v", s)
		}
	}

	// Same run, same numbers.
	again, _ := runFixture(t, "testdata/tiny", Options{Tokenizer: byteTokenizer{}, Workers: 1})
	a, _ := json.Marshal(rep.Subsets)
	b, _ := json.Marshal(again.Subsets)
	if !bytes.Equal(stripLatency(t, a), stripLatency(t, b)) {
		t.Errorf("two runs differ:\n%s\n%s", a, b)
	}

	// Outputs: Markdown, JSON, misses as JSON Lines.
	var md bytes.Buffer
	if err := rep.WriteMarkdown(&md, false); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"## tiny: 8 tools, 5 queries", "| all (5) | lexical |", "| all (5) | semantic |", "| all (5) | hybrid |",
		"Single-need queries (4): recall@5", "| top 3 |", "| top 10 |"} {
		if !strings.Contains(md.String(), s) {
			t.Errorf("Markdown lacks %q:\n%s", s, md.String())
		}
	}
	if strings.Contains(md.String(), "| single (4) |") {
		t.Error("subset rows without --split")
	}
	md.Reset()
	if err := rep.WriteMarkdown(&md, true); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(md.String(), "| single (4) | hybrid |") || !strings.Contains(md.String(), "| multi (1) | lexical |") {
		t.Errorf("split Markdown lacks subset rows:\n%s", md.String())
	}
	var js bytes.Buffer
	if err := rep.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(js.Bytes(), &back); err != nil || back.Subset("all").Modes[2].Mode != "hybrid" {
		t.Errorf("JSON report does not round-trip: %v", err)
	}
	if !strings.Contains(js.String(), `"recall@5"`) || !strings.Contains(js.String(), `"ndcg@10"`) {
		t.Errorf("JSON report lacks metric names:\n%s", js.String())
	}
	path := filepath.Join(t.TempDir(), "misses.jsonl")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteMisses(f, misses); err != nil {
		t.Fatal(err)
	}
	f.Close()
	f, _ = os.Open(path)
	defer f.Close()
	sc := bufio.NewScanner(f)
	lines := 0
	for sc.Scan() {
		lines++
		var m struct {
			ID       string                    `json:"id"`
			Query    string                    `json:"query"`
			Expected [][]string                `json:"expected_groups"`
			Modes    map[string]map[string]any `json:"modes"`
		}
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil || m.ID == "" || m.Query == "" || len(m.Expected) == 0 {
			t.Errorf("misses line %d: %v %s", lines, err, sc.Bytes())
		}
		for mode, v := range m.Modes {
			for _, k := range []string{"missed", "found", "returned"} {
				if _, ok := v[k]; !ok {
					t.Errorf("misses line %d, mode %s lacks %q", lines, mode, k)
				}
			}
		}
	}
	if lines != len(misses) {
		t.Errorf("%d lines for %d misses", lines, len(misses))
	}
}

func stripLatency(t *testing.T, b []byte) []byte {
	t.Helper()
	var subsets []map[string]any
	if err := json.Unmarshal(b, &subsets); err != nil {
		t.Fatal(err)
	}
	for _, s := range subsets {
		for _, m := range s["modes"].([]any) {
			delete(m.(map[string]any), "mean_latency_ms")
		}
	}
	out, _ := json.Marshal(subsets)
	return out
}

func TestRunOptions(t *testing.T) {
	// One mode, top 1, relative fusion, a named tenant; no schemas, so no
	// token report.
	rep, misses := runFixture(t, "testdata/plain", Options{TopK: 1, Modes: []retriever.Mode{retriever.ModeHybrid},
		Fusion: retriever.FusionRelative, Alpha: 0.3, AlphaSet: true, Tenant: "t-plain", Tokenizer: byteTokenizer{}, NoReformulate: true})
	if strings.Join(rep.Modes, ",") != "hybrid" || rep.TopK != 1 || rep.Tenant != "t-plain" || rep.Fusion != "relative" || rep.Alpha == nil || *rep.Alpha != 0.3 {
		t.Errorf("report = %+v", rep)
	}
	var md bytes.Buffer
	if err := rep.WriteMarkdown(&md, false); err != nil || !rep.NoReformulate || !strings.Contains(md.String(), "fusion relative (alpha 0.30); low-confidence reformulation off") {
		t.Errorf("NoReformulate %v, Markdown:\n%s", rep.NoReformulate, md.String())
	}
	if rep.Tokens != nil || !strings.Contains(rep.TokensNote, "no tool of this dataset has an input schema") {
		t.Errorf("tokens %+v, note %q", rep.Tokens, rep.TokensNote)
	}
	// p2 has two needs: a top 1 always misses one.
	found := false
	for _, m := range misses {
		if m.ID == "p2" {
			found = true
			if len(m.Modes) != 1 || len(m.Modes["hybrid"].Returned) > 1 || len(m.Modes["hybrid"].Missed) == 0 {
				t.Errorf("p2 miss = %+v", m)
			}
		}
	}
	if !found {
		t.Error("p2 is not a miss at top 1")
	}

	d, _ := Load("testdata/plain")
	for _, o := range []Options{{TopK: 51}, {TopK: -1}, {Tenant: "bad tenant"}, {Modes: []retriever.Mode{"fuzzy"}}} {
		b := NewInProcess(nil)
		if _, _, err := Run(context.Background(), d, b, o); err == nil {
			t.Errorf("Run accepted %+v", o)
		}
		b.Close()
	}
}

func TestTokensWithoutQueries(t *testing.T) {
	dir := t.TempDir()
	raw, err := os.ReadFile("testdata/tiny/tools.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	write(t, dir, "tools.jsonl", string(raw))
	rep, misses := runFixture(t, dir, Options{Tokenizer: byteTokenizer{}})
	if rep.Queries != 0 || len(rep.Subsets) != 0 || len(misses) != 0 {
		t.Errorf("report %+v, misses %v", rep, misses)
	}
	tr := rep.Tokens
	if tr == nil {
		t.Fatal("no token report")
	}
	mean := float64(tr.CatalogTokens) / 8
	for i, k := range []int{3, 5, 10} {
		s := tr.Shortlists[i]
		wantTokens := float64(min(k, 8)) * mean
		if s.K != k || s.Tokens != wantTokens || !strings.Contains(s.Source, "no queries") {
			t.Errorf("K=%d: %+v, want %v tokens", k, s, wantTokens)
		}
	}
	var md bytes.Buffer
	rep.WriteMarkdown(&md, false)
	if !strings.Contains(md.String(), "No labelled queries") || !strings.Contains(md.String(), "| top 5 |") {
		t.Errorf("Markdown:\n%s", md.String())
	}
}

func TestShortlistCosts(t *testing.T) {
	r := &TokenReport{Tools: 4, CatalogTokens: 100, MeanToolTokens: 25, perTool: map[string]int{"a": 10, "b": 20, "c": 30, "d": 40}}
	r.addShortlists([][]string{{"a", "b", "c", "d"}, {"d"}}, "hybrid")
	// K=3: (10+20+30 + 40) / 2 = 50; K=5 and K=10: (100 + 40) / 2 = 70.
	want := []float64{50, 70, 70}
	for i, s := range r.Shortlists {
		if s.Tokens != want[i] || s.Saved != 1-want[i]/100 || s.Factor != 100/want[i] {
			t.Errorf("K=%d: %+v, want %v tokens", s.K, s, want[i])
		}
	}
}

func TestBPE(t *testing.T) {
	for _, enc := range Encodings {
		tk, err := NewBPE(enc)
		if err != nil {
			t.Fatal(err)
		}
		if tk.Encoding() != enc {
			t.Errorf("Encoding = %q, want %q", tk.Encoding(), enc)
		}
		// Known counts (tiktoken): "hello world" is 2 tokens in both.
		if n, err := tk.Count("hello world"); err != nil || n != 2 {
			t.Errorf("%s: Count(hello world) = %d, %v; want 2", enc, n, err)
		}
		if n, _ := tk.Count(""); n != 0 {
			t.Errorf("%s: Count(\"\") = %d", enc, n)
		}
	}
	if _, err := NewBPE("gpt2"); err == nil {
		t.Error("NewBPE accepted an unsupported encoding")
	}
	def, err := Definition(&Tool{Name: "s/a<b>", ToolName: "a<b>", Description: "x & y", InputSchema: []byte(`{"type": "object", "b": 1, "a": 2}`)})
	if err != nil || string(def) != `{"name":"a<b>","description":"x & y","input_schema":{"a":2,"b":1,"type":"object"}}` {
		t.Errorf("Definition = %s, %v", def, err)
	}
	def, _ = Definition(&Tool{Name: "n", Description: "d", InputSchema: []byte("null")})
	if string(def) != `{"name":"n","description":"d"}` {
		t.Errorf("Definition without schema = %s", def)
	}
}

// Search examples reach the ranking: queries worded only like a tool's
// examples are found with them, and the report says which examples ran.
func TestRunWithExamples(t *testing.T) {
	d, err := Load("testdata/examples")
	if err != nil {
		t.Fatal(err)
	}
	run := func(d *Dataset) *Report {
		b := NewInProcess(nil)
		defer b.Close()
		rep, _, err := Run(context.Background(), d, b, Options{Workers: 2})
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	with, without := run(d), run(d.WithoutExamples())
	if !strings.Contains(with.Examples, "examples.jsonl (3 tools, 6 phrases)") || without.Examples != "" {
		t.Errorf("examples noted: with %q, without %q", with.Examples, without.Examples)
	}
	r1 := func(rep *Report, mode string) float64 {
		for _, m := range rep.Subset("all").Modes {
			if m.Mode == mode {
				return m.Recall1
			}
		}
		t.Fatalf("no %s row", mode)
		return 0
	}
	for _, mode := range []string{"lexical", "hybrid"} {
		if r1(with, mode) != 1 || r1(without, mode) >= 1 {
			t.Errorf("%s recall@1: with examples %.3f, without %.3f", mode, r1(with, mode), r1(without, mode))
		}
	}
	with.WithoutExamples = without
	var md bytes.Buffer
	if err := with.WriteMarkdown(&md, false); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(md.String(), "Without → with search examples") || !strings.Contains(md.String(), "| query | hybrid | ") {
		t.Errorf("markdown:\n%s", md.String())
	}
}
