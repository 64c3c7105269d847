package retriever

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/index/scorch"
	"github.com/blevesearch/bleve/v2/search/query"

	"github.com/seed0cff8200/cardex/cards"
)

// Hooks for the benchmarks of package retriever_test (bench_test.go): the
// bare-bleve baseline needs the lexical leg's documents and the bleve
// mapping of its reference (lexical_ref_test.go: the bleve index the leg
// was, which it matches bit for bit).

// BenchLexicalDoc is the lexical document the retriever indexes for c.
func BenchLexicalDoc(c cards.Card) LexicalDoc {
	return lexicalDoc(newEntry(c), nil)
}

// BareBleve is the baseline of the lexical leg: a bleve index with the
// leg's analyzer, fields and documents (identifiers split), scored
// by bleve's own BM25 with index-wide statistics, and queried with the leg's
// field boosts for the top k by score. It is what a search with bleve alone
// costs, without candidate-set statistics, term locations or matched fields.
type BareBleve struct {
	idx    bleve.Index
	dir    string
	fields []lexField
}

// NewBareBleve indexes docs in batches of 1,000.
func NewBareBleve(docs []LexicalDoc) (*BareBleve, error) {
	m := refLexMapping()
	m.ScoringModel = "bm25" // bleve's BM25 (index.BM25Scoring)
	dir, err := os.MkdirTemp("", "cardex-barebleve-")
	if err != nil {
		return nil, err
	}
	idx, err := bleve.NewUsing(filepath.Join(dir, "index"), m, scorch.Name, scorch.Name, map[string]any{"unsafe_batch": true})
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	x := &BareBleve{idx: idx, dir: dir}
	for _, f := range DefaultLexicalWeights().fields() {
		if f.boost > 0 {
			x.fields = append(x.fields, f)
		}
	}
	for start := 0; start < len(docs); start += 1000 {
		b := idx.NewBatch()
		for _, d := range docs[start:min(start+1000, len(docs))] {
			if err := b.Index(d.ID, refLexDocument(d)); err != nil {
				_ = x.Close()
				return nil, fmt.Errorf("bare bleve: %s: %w", d.ID, err)
			}
		}
		if err := idx.Batch(b); err != nil {
			_ = x.Close()
			return nil, fmt.Errorf("bare bleve: %w", err)
		}
	}
	return x, nil
}

// Search returns the IDs of the k best docs of f for q by bleve's BM25:
// a match query per field with the field's boost, OR-ed, with the tenant
// (and f.IDs, when set) as a filter.
func (x *BareBleve) Search(q string, f Filter, k int) ([]string, error) {
	text := SplitIdentifiers(q)
	perField := make([]query.Query, 0, len(x.fields))
	for _, fl := range x.fields {
		mq := bleve.NewMatchQuery(text)
		mq.SetField(fl.name)
		mq.SetBoost(fl.boost)
		mq.SetOperator(query.MatchQueryOperatorOr)
		perField = append(perField, mq)
	}
	tq := bleve.NewTermQuery(f.Tenant)
	tq.SetField(lexFieldTenant)
	var filter query.Query = tq
	if f.IDs != nil {
		filter = bleve.NewConjunctionQuery(tq, bleve.NewDocIDQuery(f.IDs))
	}
	bq := bleve.NewBooleanQuery()
	bq.AddMust(bleve.NewDisjunctionQuery(perField...))
	bq.AddFilter(filter)
	res, err := x.idx.Search(bleve.NewSearchRequestOptions(bq, k, 0, false))
	if err != nil {
		return nil, err
	}
	ids := make([]string, len(res.Hits))
	for i, h := range res.Hits {
		ids[i] = h.ID
	}
	return ids, nil
}

// Close releases the index and removes its directory.
func (x *BareBleve) Close() error {
	err := x.idx.Close()
	if rmErr := os.RemoveAll(x.dir); err == nil {
		err = rmErr
	}
	return err
}

// TimedLoop runs op as the benchmark's loop and reports its allocations,
// its CPU time (cpu-ns/op, ProcessCPU) and the median and 99th percentile
// of its calls (p50-ns, p99-ns): medians are what the ratios of
// docs/BENCHMARKS.md compare, as they move less than means on a loaded
// machine.
func TimedLoop(b *testing.B, op func()) {
	b.ReportAllocs()
	var took []time.Duration
	cpu0 := ProcessCPU()
	for b.Loop() {
		t0 := time.Now()
		op()
		took = append(took, time.Since(t0))
	}
	b.ReportMetric(float64((ProcessCPU()-cpu0).Nanoseconds())/float64(len(took)), "cpu-ns/op")
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(took[len(took)*99/100].Nanoseconds()), "p99-ns")
}
