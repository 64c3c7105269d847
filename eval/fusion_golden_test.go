package eval

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/seed0cff8200/cardex/cards"
	"github.com/seed0cff8200/cardex/cards/embedded"
	"github.com/seed0cff8200/cardex/embed"
	"github.com/seed0cff8200/cardex/retriever"
)

var updateFusionGolden = flag.Bool("update-fusion-golden", false,
	"rewrite testdata/fusion-golden from the pipeline as it is (only from the implementation the golden files stand for)")

// TestFusionGolden: the pipeline's answers — every tool, its order, its
// scores, ranks and confidence to the bit, its reason, alternatives, intents
// and companion anchor, and the result's flags — are those recorded in
// testdata/fusion-golden, on every dataset of ../shared/eval without and
// with its examples.jsonl. The files were recorded (-update-fusion-golden)
// from the pipeline before lean fusion (integer keys, pooled scratch,
// partial selection), so they hold it to today's answers bit for bit.
//
// Each dataset's cards are registered with a few variations that reach
// every step of fusion: every fifth card needs a scope (a restricted caller
// sees a subset), every seventeenth is deprecated, and the co-usage of each
// query's expected tools is recorded (companions). Every sampled query is
// asked as a hybrid query (relative fusion, top 10), with reciprocal rank
// fusion, lexical and semantic alone, by the restricted caller with a pin,
// and, when it has intents, with them.
func TestFusionGolden(t *testing.T) {
	reached := map[string]int{}
	for _, name := range []string{"livemcpbench", "metatool", "mcp_catalog"} {
		t.Run(name, func(t *testing.T) {
			dir := sharedDataset(t, name)
			d, err := Load(dir)
			if err != nil {
				t.Fatal(err)
			}
			queries := goldenQueries(d)
			var got []string
			for _, cond := range []struct {
				name string
				d    *Dataset
			}{{"without", d.WithoutExamples()}, {"with", d}} {
				got = append(got, goldenRun(t, cond.name, cond.d, queries)...)
			}
			path := filepath.Join("testdata", "fusion-golden", name+".txt")
			if *updateFusionGolden {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				var b strings.Builder
				for _, line := range got {
					b.WriteString(goldenLine(line) + "\n")
				}
				if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
					t.Fatal(err)
				}
				t.Logf("wrote %d answers to %s", len(got), path)
				return
			}
			for _, line := range got {
				for _, mark := range goldenMarks {
					if strings.Count(line, mark) > strings.Count(line, mark+"]") {
						reached[mark]++
					}
				}
			}
			want := readGolden(t, path)
			if len(want) != len(got) {
				t.Fatalf("%d answers, the golden file has %d", len(got), len(want))
			}
			bad := 0
			for i, line := range got {
				if g := goldenLine(line); g != want[i] {
					if bad++; bad <= 3 {
						t.Errorf("answer %d differs from the golden one (%s):\n%s", i, want[i], line)
					}
				}
			}
			if bad > 0 {
				t.Errorf("%d of %d answers differ", bad, len(got))
			}
		})
	}
	// The variations reach the steps they are there for (over the
	// datasets: metatool has no servers, so no near-duplicates).
	for _, mark := range goldenMarks {
		t.Logf("%d answers hold %q", reached[mark], mark)
		if reached[mark] == 0 && !t.Failed() && !t.Skipped() {
			t.Errorf("no answer holds %q: the variation does not reach its step", mark)
		}
	}
}

// goldenMarks are what the answers of TestFusionGolden must show, each in
// at least one answer: a companion, an alternative, a pin, an intent, a
// low-confidence list and an abstention.
var goldenMarks = []string{"companion-of=", "alternatives=[", "pinned=true", "intents=[0", "low=true", "abstained=true"}

// goldenQuery is one sampled query: its id, text, intents and the labels
// of the tools it needs.
type goldenQuery struct {
	id, text string
	intents  []string
	expected []string
}

// goldenQueries samples a dataset's queries: all of livemcpbench's, every
// eighth of metatool's, and for a dataset without queries (mcp_catalog)
// the first search example of every other tool (which needs that tool and,
// for the co-usage, the next one).
func goldenQueries(d *Dataset) []goldenQuery {
	var out []goldenQuery
	step := 1
	if len(d.Queries) > 500 {
		step = 8
	}
	for i := 0; i < len(d.Queries); i += step {
		q := &d.Queries[i]
		out = append(out, goldenQuery{q.ID, q.Query, q.Intents, q.Expected})
	}
	if len(d.Queries) == 0 {
		for i := 0; i < len(d.Tools); i += 2 {
			if ex := d.Examples[d.Tools[i].Name]; len(ex) > 0 {
				need := []string{d.Tools[i].Name}
				if i+1 < len(d.Tools) {
					need = append(need, d.Tools[i+1].Name)
				}
				out = append(out, goldenQuery{id: d.Tools[i].Name, text: ex[0], expected: need})
			}
		}
	}
	return out
}

// goldenRun registers d's cards (with the variations TestFusionGolden
// describes) in a fresh retriever and returns every answer, described.
func goldenRun(t *testing.T, cond string, d *Dataset, queries []goldenQuery) []string {
	ctx := context.Background()
	cat, err := NewCatalog(d, "t")
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string]cards.Key{}
	for i := range cat.Cards {
		c := &cat.Cards[i]
		if i%5 == 4 {
			c.RequiredScopes = []string{"golden:read"}
		}
		if i%17 == 16 {
			c.Tags = append(c.Tags, cards.TagDeprecated)
		}
		keys[cat.Label(c.Server, c.Name)] = c.Key()
	}
	st, err := embedded.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for start := 0; start < len(cat.Cards); start += 500 {
		if _, err := st.Put(ctx, cat.Cards[start:min(start+500, len(cat.Cards))]); err != nil {
			t.Fatal(err)
		}
	}
	if len(cat.Servers) > 0 {
		if _, err := st.PutServers(ctx, cat.Servers); err != nil {
			t.Fatal(err)
		}
	}
	r, err := retriever.New(ctx, st, embed.MustBuiltin(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var uses []cards.CoUse
	for _, q := range queries {
		var tools []cards.Key
		for _, l := range q.expected {
			if k, ok := keys[l]; ok && len(tools) < cards.MaxSessionTools && !slices.Contains(tools, k) {
				tools = append(tools, k)
			}
		}
		if len(tools) >= 2 {
			uses = append(uses, cards.CoUse{Tools: tools}, cards.CoUse{Tools: tools})
		}
	}
	for start := 0; start < len(uses); start += cards.MaxCoUses {
		if _, err := r.RecordCoUse(ctx, uses[start:min(start+cards.MaxCoUses, len(uses))]); err != nil {
			t.Fatal(err)
		}
	}

	admin := retriever.Caller{Tenant: "t", Subject: "golden", Scopes: []string{"*"}}
	restricted := retriever.Caller{Tenant: "t", Subject: "agent", Scopes: []string{"other:read"}}
	var out []string
	for _, q := range queries {
		var pin []cards.Key
		if k, ok := keys[q.expected[0]]; ok {
			pin = []cards.Key{{Server: k.Server, Name: k.Name}}
		}
		variants := []struct {
			name string
			req  retriever.Request
		}{
			{"hybrid", retriever.Request{Caller: admin, Query: q.text, TopK: 10}},
			{"rrf", retriever.Request{Caller: admin, Query: q.text, Fusion: retriever.FusionRRF}},
			{"lexical", retriever.Request{Caller: admin, Query: q.text, Mode: retriever.ModeLexical}},
			{"semantic", retriever.Request{Caller: admin, Query: q.text, Mode: retriever.ModeSemantic}},
			{"restricted", retriever.Request{Caller: restricted, Query: q.text, TopK: 8, AlwaysLoad: pin}},
		}
		if len(q.intents) > 0 {
			variants = append(variants, struct {
				name string
				req  retriever.Request
			}{"intents", retriever.Request{Caller: admin, Query: q.text, Intents: q.intents, TopK: 10}})
		}
		for _, v := range variants {
			res, err := r.Discover(ctx, v.req)
			if err != nil {
				t.Fatalf("%s %s %s: %v", cond, q.id, v.name, err)
			}
			out = append(out, cond+" "+q.id+" "+v.name+"\n"+describeResult(&res))
		}
	}
	return out
}

// describeResult writes down everything an answer says, floats as their
// bits, timings aside.
func describeResult(res *retriever.Result) string {
	var b strings.Builder
	bits := func(x float64) string { return fmt.Sprintf("%016x", math.Float64bits(x)) }
	fmt.Fprintf(&b, "candidates=%d shortlist=%d catalog=%d degraded=%t low=%t reformulated=%q %q abstained=%t %v min=%s\n",
		res.CandidateCount, res.ShortlistTokens, res.CatalogTokens, res.Degraded, res.LowConfidence,
		res.Reformulated, res.ReformulatedIntents, res.Abstained, res.AbstainedIntents, bits(res.MinConfidence))
	for _, s := range res.Tools {
		f := s.Scores
		fmt.Fprintf(&b, "%s/%s pinned=%t for-query=%t tokens=%d id=%q score=%s lex=%s sem=%s ranks=%d,%d fields=%v cov=%s ev=%s conf=%s\n",
			s.Card.Server, s.Card.Name, s.Pinned, s.ForQuery, s.Tokens, f.ID, bits(f.Score), bits(f.Lexical), bits(f.Semantic),
			f.LexicalRank, f.SemanticRank, f.Fields, bits(f.Coverage), bits(f.Evidence), bits(f.Confidence))
		fmt.Fprintf(&b, "  reason=%q alternatives=%v intents=%v", s.Reason, s.Alternatives, s.Intents)
		if s.CompanionOf != nil {
			fmt.Fprintf(&b, " companion-of=%v", *s.CompanionOf)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// goldenLine is an answer's line in a golden file: its name and the hash
// of its description.
func goldenLine(answer string) string {
	name, body, _ := strings.Cut(answer, "\n")
	sum := sha256.Sum256([]byte(body))
	return name + " " + hex.EncodeToString(sum[:10])
}

func readGolden(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("%v (record it with -update-fusion-golden from the implementation it stands for)", err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		out = append(out, sc.Text())
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
