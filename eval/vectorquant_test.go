package eval

import (
	"bufio"
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/seed0cff8200/cardex/cards"
	"github.com/seed0cff8200/cardex/cards/synth"
	"github.com/seed0cff8200/cardex/embed"
	"github.com/seed0cff8200/cardex/retriever"
)

// TestQuantisedVectorsAnswerExactly: the vector leg's quantised pre-scan
// (retriever/quant.go) gives the exact scan's answer — the same IDs in the
// same order with the same scores, to the bit — on the cards and texts of
// every dataset of ../shared/eval (its queries, their intents and the
// examples of examples.jsonl) and on synthetic catalogues, for the whole
// tenant and for a candidate subset, at the pipeline's depth and at small k.
// It also shows the pre-scan prunes: it scores exactly far fewer rows than
// it scans.
func TestQuantisedVectorsAnswerExactly(t *testing.T) {
	emb := embed.MustBuiltin()
	type corpus struct {
		name  string
		cards []cards.Card
		texts []string
	}
	var corpora []corpus
	for _, name := range []string{"livemcpbench", "metatool", "mcp_catalog"} {
		dir := sharedDataset(t, name)
		d, err := Load(dir)
		if err != nil {
			t.Fatal(err)
		}
		cat, err := NewCatalog(d, "t")
		if err != nil {
			t.Fatal(err)
		}
		var texts []string
		for _, q := range d.Queries {
			texts = append(texts, q.Query)
			texts = append(texts, q.Intents...)
		}
		texts = append(texts, readExamples(t, filepath.Join(dir, "examples.jsonl"))...)
		corpora = append(corpora, corpus{name, cat.Cards, texts})
	}
	corpora = append(corpora,
		corpus{"synth-3000", synth.Catalogue(3000, 1, "t"), synth.Queries(200, 7)},
		corpus{"synth-10000", synth.Catalogue(10000, 3, "t"), synth.Queries(60, 9)})

	for _, c := range corpora {
		t.Run(c.name, func(t *testing.T) {
			if len(c.texts) < 20 {
				t.Fatalf("%d texts", len(c.texts))
			}
			m := retriever.NewMemoryVectors(emb.Dim())
			texts := make([]string, len(c.cards))
			for i := range c.cards {
				texts[i] = retriever.EmbeddingText(&c.cards[i])
			}
			vecs := embedAll(t, emb, texts)
			var subset []string
			for i := range c.cards {
				id := retriever.DocID(c.cards[i].Key())
				if err := m.Upsert(id, "t", vecs[i]); err != nil {
					t.Fatal(err)
				}
				if i%3 != 1 {
					subset = append(subset, id)
				}
			}
			qvecs := embedAll(t, emb, c.texts)
			// Every text at the pipeline's depth over the whole tenant; each
			// text also in one of the other cases, in turn.
			type search struct {
				f retriever.Filter
				k int
			}
			all, sub := retriever.Filter{Tenant: "t"}, retriever.Filter{Tenant: "t", IDs: subset}
			others := []search{{all, 1}, {all, 5}, {sub, 1}, {sub, 5}, {sub, retriever.LegDepth}}
			scanned, before := 0, m.KeptRows()
			for qi, q := range qvecs {
				for _, s := range []search{{all, retriever.LegDepth}, others[qi%len(others)]} {
					want, err := m.SearchExact(q, s.f, s.k)
					if err != nil {
						t.Fatal(err)
					}
					got, err := m.Search(q, s.f, s.k)
					if err != nil {
						t.Fatal(err)
					}
					n := len(c.cards)
					if s.f.IDs != nil {
						n = len(s.f.IDs)
					}
					if !slices.EqualFunc(got, want, sameHit) {
						t.Fatalf("k=%d, %d candidates, %q: the quantised answer differs from the exact one", s.k, n, c.texts[qi])
					}
					if n > s.k {
						scanned += n
					}
				}
			}
			kept := m.KeptRows() - before
			t.Logf("%d cards, %d texts: %d of %d scanned rows scored exactly (%.1f%%)", len(c.cards), len(c.texts), kept, scanned, 100*float64(kept)/float64(scanned))
			if len(c.cards) >= 3000 && kept*5 > uint64(scanned) {
				t.Errorf("the pre-scan kept %d of %d rows: it does not prune", kept, scanned)
			}
		})
	}
}

func embedAll(t *testing.T, emb embed.Embedder, texts []string) [][]float32 {
	t.Helper()
	var out [][]float32
	for start := 0; start < len(texts); start += 256 {
		vs, err := emb.Embed(context.Background(), texts[start:min(start+256, len(texts))])
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, vs...)
	}
	return out
}

// readExamples reads the example requests of an examples.jsonl
// ({"name": …, "examples": [...]} a line).
func readExamples(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var row struct {
			Examples []string `json:"examples"`
		}
		if err := json.Unmarshal(sc.Bytes(), &row); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out = append(out, row.Examples...)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// sameHit: the same ID and the same score, bit for bit.
func sameHit(a, b retriever.Hit) bool {
	return a.ID == b.ID && math.Float64bits(a.Score) == math.Float64bits(b.Score)
}
