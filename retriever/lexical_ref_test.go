package retriever

// The lexical index as it was before it kept its own postings: bleve
// matches (with term locations) and BM25F is scored over the hits. Kept as
// the reference the new index must agree with exactly (TestLexicalMatchesReference).

import (
	"errors"
	"fmt"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/analysis"
	"github.com/blevesearch/bleve/v2/analysis/analyzer/keyword"
	"github.com/blevesearch/bleve/v2/index/scorch"
	"github.com/blevesearch/bleve/v2/mapping"
	"github.com/blevesearch/bleve/v2/search"
	"github.com/blevesearch/bleve/v2/search/query"
)

// refLexicalIndex is the lexical leg: bleve analyses and matches, and Search
// scores the matches with BM25F over the caller's candidate set (see
// Search). It is ephemeral: its contents live as long as the value and are
// lost on Close. It is safe for concurrent use.
//
// It is a scorch index in a private temporary directory, not bleve's
// NewMemOnly index: a scorch index with no directory never merges its
// segments, so the one-card updates of a running server would each leave a
// segment behind and searches would slow down without bound. Batches do not
// wait for the disk (unsafe_batch): a batch is searchable when Upsert or
// Delete returns.
// The reference's tenant field, and its text fields (the card field names).
const lexFieldTenant = "tenant"

var lexTextFields = map[string]string{
	lexFieldName: "name", lexFieldAliases: "aliases", lexFieldLearned: "learned", lexFieldExamples: "examples", lexFieldSummary: "summary",
	lexFieldTags: "tags", lexFieldParams: "params", lexFieldDescription: "description", lexFieldServer: "server",
}

type refLexicalIndex struct {
	idx       bleve.Index
	dir       string
	analyzer  analysis.Analyzer
	fields    []lexField // weights > 0 only
	closeOnce sync.Once
	closeErr  error

	// Field lengths (in analysed tokens) per doc and their sums per
	// tenant: the length statistics of BM25, computed over the caller's
	// candidate set at search time.
	mu      sync.RWMutex
	lens    map[string]*refLexLens // doc ID → lengths
	tenants map[string]*refLexTenant
}

// refLexLens holds one doc's tenant and field lengths, in x.fields order.
type refLexLens struct {
	tenant string
	n      []int32
}

type refLexTenant struct {
	docs int
	sum  []int64 // per field, in x.fields order
}

// NewLexicalIndex returns an empty index with DefaultLexicalWeights.
func newRefLexicalIndex() (*refLexicalIndex, error) {
	return newRefLexicalIndexWithWeights(DefaultLexicalWeights())
}

// NewLexicalIndexWithWeights returns an empty index that searches with the
// given field boosts.
func newRefLexicalIndexWithWeights(w LexicalWeights) (*refLexicalIndex, error) {
	if err := w.validate(); err != nil {
		return nil, err
	}
	m := refLexMapping()
	if err := m.Validate(); err != nil {
		return nil, fmt.Errorf("lexical index mapping: %w", err)
	}
	dir, err := os.MkdirTemp("", "cardex-lexical-")
	if err != nil {
		return nil, fmt.Errorf("lexical index: %w", err)
	}
	idx, err := bleve.NewUsing(filepath.Join(dir, "index"), m, scorch.Name, scorch.Name,
		map[string]any{"unsafe_batch": true})
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("lexical index: %w", err)
	}
	an := idx.Mapping().AnalyzerNamed(lexAnalyzer)
	if an == nil {
		_ = idx.Close()
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("lexical index: analyzer %q not registered", lexAnalyzer)
	}
	x := &refLexicalIndex{idx: idx, dir: dir, analyzer: an, lens: map[string]*refLexLens{}, tenants: map[string]*refLexTenant{}}
	for _, f := range w.fields() {
		if f.boost > 0 {
			x.fields = append(x.fields, f)
		}
	}
	return x, nil
}

func refLexMapping() *mapping.IndexMappingImpl {
	text := func() *mapping.FieldMapping {
		fm := bleve.NewTextFieldMapping()
		fm.Analyzer = lexAnalyzer
		fm.Store = false
		fm.IncludeInAll = false
		fm.IncludeTermVectors = true // for hit locations: which fields matched
		fm.DocValues = false
		return fm
	}
	kw := bleve.NewKeywordFieldMapping()
	kw.Analyzer = keyword.Name
	kw.Store = false
	kw.IncludeInAll = false
	kw.IncludeTermVectors = false
	kw.DocValues = false

	dm := bleve.NewDocumentStaticMapping()
	dm.AddFieldMappingsAt(lexFieldTenant, kw)
	for name := range lexTextFields {
		dm.AddFieldMappingsAt(name, text())
	}

	m := bleve.NewIndexMapping()
	m.DefaultMapping = dm
	m.DefaultAnalyzer = lexAnalyzer
	m.IndexDynamic = false
	m.StoreDynamic = false
	m.DocValuesDynamic = false
	return m
}

// refLexDocument is the bleve document of a card: identifier-split text.
func refLexDocument(d LexicalDoc) map[string]any {
	return map[string]any{
		lexFieldTenant:      d.Tenant,
		lexFieldServer:      SplitIdentifiers(d.Server),
		lexFieldName:        SplitIdentifiers(d.Name),
		lexFieldSummary:     SplitIdentifiers(d.Summary),
		lexFieldDescription: SplitIdentifiers(d.Description),
		lexFieldAliases:     refLexSplitAll(d.Aliases),
		lexFieldLearned:     refLexSplitAll(d.Learned),
		lexFieldExamples:    refLexSplitAll(d.Examples),
		lexFieldTags:        refLexSplitAll(d.Tags),
		lexFieldParams:      refLexSplitAll(d.Params),
	}
}

func refLexSplitAll(ss []string) []any {
	out := make([]any, 0, len(ss))
	for _, s := range ss {
		if t := SplitIdentifiers(s); t != "" {
			out = append(out, t)
		}
	}
	return out
}

// Upsert indexes docs in one batch, replacing any doc with the same ID.
func (x *refLexicalIndex) Upsert(docs []LexicalDoc) error {
	if len(docs) == 0 {
		return nil
	}
	b := x.idx.NewBatch()
	for i, d := range docs {
		if d.ID == "" {
			return fmt.Errorf("lexical upsert: doc %d: empty ID", i)
		}
		if d.Tenant == "" {
			return fmt.Errorf("lexical upsert: doc %q: empty tenant", d.ID)
		}
		if err := b.Index(d.ID, refLexDocument(d)); err != nil {
			return fmt.Errorf("lexical upsert: doc %q: %w", d.ID, err)
		}
	}
	if err := x.idx.Batch(b); err != nil {
		return fmt.Errorf("lexical upsert: %w", err)
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, d := range docs {
		x.forget(d.ID)
		doc := refLexDocument(d)
		l := &refLexLens{tenant: d.Tenant, n: make([]int32, len(x.fields))}
		for i, fl := range x.fields {
			l.n[i] = int32(x.fieldLen(doc[fl.name]))
		}
		x.lens[d.ID] = l
		t := x.tenants[d.Tenant]
		if t == nil {
			t = &refLexTenant{sum: make([]int64, len(x.fields))}
			x.tenants[d.Tenant] = t
		}
		t.docs++
		for i, n := range l.n {
			t.sum[i] += int64(n)
		}
	}
	return nil
}

// forget drops a doc's length statistics. Call with x.mu held.
func (x *refLexicalIndex) forget(id string) {
	l, ok := x.lens[id]
	if !ok {
		return
	}
	delete(x.lens, id)
	t := x.tenants[l.tenant]
	t.docs--
	for i, n := range l.n {
		t.sum[i] -= int64(n)
	}
	if t.docs == 0 {
		delete(x.tenants, l.tenant)
	}
}

// fieldLen counts the analysed tokens of a field value (text or list).
func (x *refLexicalIndex) fieldLen(v any) int {
	switch v := v.(type) {
	case string:
		return len(x.analyzer.Analyze([]byte(v)))
	case []any:
		n := 0
		for _, e := range v {
			n += x.fieldLen(e)
		}
		return n
	}
	return 0
}

// Delete removes the docs with the given IDs in one batch; unknown IDs are
// ignored.
func (x *refLexicalIndex) Delete(ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	b := x.idx.NewBatch()
	for _, id := range ids {
		b.Delete(id)
	}
	if err := x.idx.Batch(b); err != nil {
		return fmt.Errorf("lexical delete: %w", err)
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, id := range ids {
		x.forget(id)
	}
	return nil
}

// Count returns the number of indexed docs, all tenants together.
func (x *refLexicalIndex) Count() (uint64, error) {
	return x.idx.DocCount()
}

// Close releases the index and removes its directory. Calls after the first
// return the first call's result.
func (x *refLexicalIndex) Close() error {
	x.closeOnce.Do(func() {
		err := x.idx.Close()
		if rmErr := os.RemoveAll(x.dir); err == nil {
			err = rmErr
		}
		x.closeErr = err
	})
	return x.closeErr
}

// Search returns at most limit docs of the candidate set f that match query,
// best first: score descending, then ID ascending, which within a tenant is
// (server, name) order (see DocID). A query without searchable terms (empty,
// stop words only) returns no hits.
//
// bleve analyses and matches: the candidate set is a filter inside the bleve
// query, which returns every matching candidate with its term locations.
// cardex scores them with BM25F whose statistics (document count, document
// frequencies, average field lengths) are those of the candidate set alone,
// so no score depends on a card the caller cannot see — another tenant's or
// one outside the caller's scopes.
func (x *refLexicalIndex) Search(q string, f Filter, limit int) ([]Hit, error) {
	return x.SearchWeighted([]WeightedText{{Text: q, Weight: 1}}, f, limit)
}

// SearchWeighted is Search for a query made of several texts with weights:
// a term's query weight is the sum over the texts of its count times the
// text's weight, and a hit's coverage is the share of the terms, each
// counted at the highest weight of a text holding it, that the hit matched.
// Search(q) is SearchWeighted of q alone at weight 1.
func (x *refLexicalIndex) SearchWeighted(parts []WeightedText, f Filter, limit int) ([]Hit, error) {
	if limit < 0 {
		return nil, fmt.Errorf("lexical search: negative limit %d", limit)
	}
	if f.Tenant == "" {
		return nil, errors.New("lexical search: filter has no tenant")
	}
	if limit == 0 || (f.IDs != nil && len(f.IDs) == 0) || len(x.fields) == 0 {
		return nil, nil
	}
	qtf := map[string]float64{}   // query weight of each term
	cover := map[string]float64{} // its weight in the coverage
	texts := make([]string, 0, len(parts))
	for _, p := range parts {
		if !(p.Weight > 0) {
			continue
		}
		text := SplitIdentifiers(p.Text)
		texts = append(texts, text)
		for _, tok := range x.analyzer.Analyze([]byte(text)) {
			t := string(tok.Term)
			if os.Getenv("QTF1") != "" {
				if _, seen := cover[t]; seen && cover[t] >= p.Weight {
					continue
				}
			}
			qtf[t] += p.Weight
			cover[t] = max(cover[t], p.Weight)
		}
	}
	if len(qtf) == 0 {
		return nil, nil
	}
	text := strings.Join(texts, " ")
	terms := make([]string, 0, len(qtf))
	for t := range qtf {
		terms = append(terms, t)
	}
	sort.Strings(terms)

	// Candidate-set statistics: N and the average length of each field.
	x.mu.RLock()
	n, avg := x.candidateStats(f)
	x.mu.RUnlock()
	if n == 0 {
		return nil, nil
	}

	// Matching: any analysed query term in any field (OR), inside the
	// candidate set; bleve's own scores are not used.
	perField := make([]query.Query, 0, len(x.fields))
	for _, fl := range x.fields {
		mq := bleve.NewMatchQuery(text)
		mq.SetField(fl.name)
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
	req := bleve.NewSearchRequestOptions(bq, n, 0, false)
	req.IncludeLocations = true
	req.Score = bleve.ScoreNone
	req.SortBy([]string{"_id"})
	res, err := x.idx.Search(req)
	if err != nil {
		return nil, fmt.Errorf("lexical search: %w", err)
	}

	// Per hit, the length-normalised, boosted frequency of each query term,
	// summed over fields in the fixed field order (so the floating-point
	// sums, and the scores, are the same on every run).
	termIdx := make(map[string]int, len(terms))
	for i, t := range terms {
		termIdx[t] = i
	}
	x.mu.RLock()
	tfs := make([]float64, len(res.Hits)*len(terms))
	df := make([]int, len(terms))
	keep := make([]bool, len(res.Hits))
	for h, m := range res.Hits {
		l := x.lens[m.ID]
		if l == nil { // deleted since the search; never a candidate now
			continue
		}
		keep[h] = true
		row := tfs[h*len(terms) : (h+1)*len(terms)]
		for i, fl := range x.fields {
			if avg[i] == 0 {
				continue
			}
			norm := 1 - bm25B + bm25B*float64(l.n[i])/avg[i]
			for t, locs := range m.Locations[fl.name] {
				if k, ok := termIdx[t]; ok && len(locs) > 0 {
					row[k] += fl.boost * float64(len(locs)) / norm
				}
			}
		}
		for k, tf := range row {
			if tf > 0 {
				df[k]++ // every candidate holding the term matched: exact df
			}
		}
	}
	x.mu.RUnlock()
	idf := make([]float64, len(terms))
	for k, t := range terms {
		idf[k] = qtf[t] * math.Log(1+(float64(n)-float64(df[k])+0.5)/(float64(df[k])+0.5))
	}
	coverTotal, evidenceTotal := 0.0, 0.0
	idfOne := make([]float64, len(terms)) // idf of one occurrence
	for k, t := range terms {
		coverTotal += cover[t]
		idfOne[k] = idf[k] / qtf[t]
		evidenceTotal += cover[t] * idfOne[k]
	}
	hits := make([]Hit, 0, len(res.Hits))
	for h, m := range res.Hits {
		if !keep[h] {
			continue
		}
		score, matched, evidence := 0.0, 0.0, 0.0
		for k, tf := range tfs[h*len(terms) : (h+1)*len(terms)] {
			if tf > 0 {
				score += idf[k] * tf / (bm25K1 + tf)
				matched += cover[terms[k]]
				evidence += cover[terms[k]] * idfOne[k]
			}
		}
		if score > 0 {
			hits = append(hits, Hit{ID: m.ID, Score: score, Fields: refLexMatchedFields(m.Locations),
				Coverage: matched / coverTotal, Evidence: evidence / evidenceTotal})
		}
	}
	sort.Slice(hits, func(i, j int) bool {
		if hits[i].Score != hits[j].Score {
			return hits[i].Score > hits[j].Score
		}
		return hits[i].ID < hits[j].ID
	})
	if len(hits) > limit {
		hits = hits[:limit]
	}
	return hits, nil
}

// candidateStats returns the size of the candidate set and the average
// length of each field over it. Call with x.mu held.
func (x *refLexicalIndex) candidateStats(f Filter) (int, []float64) {
	avg := make([]float64, len(x.fields))
	if f.IDs == nil {
		t := x.tenants[f.Tenant]
		if t == nil {
			return 0, avg
		}
		for i, s := range t.sum {
			avg[i] = float64(s) / float64(t.docs)
		}
		return t.docs, avg
	}
	n := 0
	sum := make([]int64, len(x.fields))
	seen := make(map[string]bool, len(f.IDs))
	for _, id := range f.IDs {
		l := x.lens[id]
		if l == nil || l.tenant != f.Tenant || seen[id] {
			continue
		}
		seen[id] = true
		n++
		for i, v := range l.n {
			sum[i] += int64(v)
		}
	}
	for i := range sum {
		if n > 0 {
			avg[i] = float64(sum[i]) / float64(n)
		}
	}
	return n, avg
}

func refLexMatchedFields(locs search.FieldTermLocationMap) []string {
	out := make([]string, 0, len(locs))
	for f := range locs {
		if name, ok := lexTextFields[f]; ok {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// TestLexicalMatchesReference: the index with its own postings finds the
// same hits as the bleve-matching reference — IDs, order, scores bit for
// bit, fields, coverage and evidence — for many queries, callers and
// candidate sets, before and after updates and deletions.
func TestLexicalMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	words := strings.Fields("get list create update delete search export import invoice order ticket issue user customer payment refund " +
		"account report file folder pipeline build deploy alert incident metric dashboard token webhook group role team " +
		"open closed pending failed recent monthly weekly critical the a of for with by")
	phrase := func(n int) string {
		ws := make([]string, n)
		for i := range ws {
			ws[i] = words[rng.Intn(len(words))]
		}
		return strings.Join(ws, " ")
	}
	var docs []LexicalDoc
	for i := range 400 {
		tenant := []string{"acme", "globex"}[i%5/4]
		d := LexicalDoc{ID: lexID(tenant, fmt.Sprintf("srv%d", i%7), fmt.Sprintf("%s_%s_%d", words[rng.Intn(12)], words[12+rng.Intn(20)], i)),
			Tenant: tenant, Server: fmt.Sprintf("srv%d", i%7), Summary: phrase(4 + rng.Intn(10))}
		d.Name = strings.SplitN(d.ID, idSep, 3)[2]
		if rng.Intn(2) == 0 {
			d.Description = phrase(10 + rng.Intn(30))
		}
		for range rng.Intn(4) {
			d.Aliases = append(d.Aliases, phrase(2+rng.Intn(3)))
		}
		for range rng.Intn(3) {
			d.Tags = append(d.Tags, words[rng.Intn(len(words))])
		}
		for range rng.Intn(4) {
			d.Params = append(d.Params, words[rng.Intn(20)]+"_id")
		}
		if rng.Intn(5) == 0 {
			d.Learned = []string{phrase(5)}
		}
		for range rng.Intn(7) / 2 {
			d.Examples = append(d.Examples, phrase(3+rng.Intn(6)))
		}
		if i%9 == 0 { // a word more often than a packed posting holds (lexTFMax)
			d.Description += strings.Repeat(" "+words[rng.Intn(20)], lexTFMax+1+rng.Intn(12))
		}
		docs = append(docs, d)
	}
	ref, err := newRefLexicalIndex()
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	x := newTestLexical(t)
	upsert := func(ds []LexicalDoc) {
		t.Helper()
		if err := ref.Upsert(ds); err != nil {
			t.Fatal(err)
		}
		if err := x.Upsert(ds); err != nil {
			t.Fatal(err)
		}
	}
	del := func(ids []string) {
		t.Helper()
		if err := ref.Delete(ids); err != nil {
			t.Fatal(err)
		}
		if err := x.Delete(ids); err != nil {
			t.Fatal(err)
		}
	}
	compare := func(stage string) {
		t.Helper()
		var someIDs []string
		for i, d := range docs {
			if i%3 != 1 && d.Tenant == "acme" {
				someIDs = append(someIDs, d.ID)
			}
		}
		slices.Sort(someIDs)
		for q := range 60 {
			parts := []WeightedText{{Text: phrase(1 + rng.Intn(8)), Weight: 1}}
			if q%4 == 0 {
				parts = append(parts, WeightedText{Text: phrase(6), Weight: 0.3})
			}
			for _, f := range []Filter{{Tenant: "acme"}, {Tenant: "globex"}, {Tenant: "acme", IDs: someIDs}, {Tenant: "nobody"}} {
				for _, limit := range []int{5, 200} {
					want, err := ref.SearchWeighted(parts, f, limit)
					if err != nil {
						t.Fatal(err)
					}
					got, err := x.SearchWeighted(parts, f, limit)
					if err != nil {
						t.Fatal(err)
					}
					if len(got) != len(want) {
						t.Fatalf("%s: %v in %s (%d IDs), limit %d: %d hits, reference %d", stage, parts, f.Tenant, len(f.IDs), limit, len(got), len(want))
					}
					for i := range want {
						g, w := got[i], want[i]
						if g.ID != w.ID || g.Score != w.Score || !slices.Equal(g.Fields, w.Fields) || g.Coverage != w.Coverage ||
							math.Abs(g.Evidence-w.Evidence) > 1e-12 {
							for j := range want {
								if want[j].ID == g.ID {
									t.Logf("got's hit is the reference's #%d: %+v", j, want[j])
								}
								if got[j].ID == w.ID {
									t.Logf("the reference's hit is ours #%d: %+v", j, got[j])
								}
							}
							t.Fatalf("%s: %v in %s (%d IDs), limit %d, hit %d:\n got %+v\nwant %+v", stage, parts, f.Tenant, len(f.IDs), limit, i, g, w)
						}
					}
				}
			}
		}
	}
	upsert(docs[:300])
	compare("first 300")
	upsert(docs[300:])
	compare("all 400")
	if len(x.wide) == 0 {
		t.Fatal("no posting holds a frequency over lexTFMax: the wide postings are not tested")
	}
	// Updates (new text for a third of the docs) and deletions.
	var changed []LexicalDoc
	var gone []string
	for i := range docs {
		switch i % 6 {
		case 0:
			docs[i].Summary = phrase(5)
			changed = append(changed, docs[i])
		case 1:
			gone = append(gone, docs[i].ID)
		}
	}
	upsert(changed)
	del(gone)
	var kept []LexicalDoc
	for i, d := range docs {
		if i%6 != 1 {
			kept = append(kept, d)
		}
	}
	docs = kept
	compare("after updates and deletions")
	// The same index written to a snapshot and read back (its term and
	// wide-slot numbering afresh) answers the same, and takes changes.
	x = lexRoundTrip(t, x)
	compare("read back from a snapshot")
	changed, gone, kept = nil, nil, nil
	for i := range docs {
		switch i % 5 {
		case 0:
			docs[i].Description = phrase(12) + strings.Repeat(" refund", lexTFMax+2)
			changed = append(changed, docs[i])
		case 1:
			gone = append(gone, docs[i].ID)
		default:
			kept = append(kept, docs[i])
		}
	}
	upsert(changed)
	del(gone)
	docs = append(kept, changed...)
	compare("changes after the snapshot")
	// Deleted numbers are reused.
	upsert([]LexicalDoc{{ID: lexID("acme", "new", "fresh_tool"), Tenant: "acme", Name: "fresh_tool", Summary: "a fresh refund tool"}})
	docs = append(docs, LexicalDoc{ID: lexID("acme", "new", "fresh_tool"), Tenant: "acme", Name: "fresh_tool", Summary: "a fresh refund tool"})
	compare("after a reuse")
}

// lexRoundTrip is x written to a snapshot file and read into a new index.
func lexRoundTrip(t *testing.T, x *LexicalIndex) *LexicalIndex {
	t.Helper()
	path := filepath.Join(t.TempDir(), "lex.snap")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := newSnapWriter(f)
	x.writeSnapshot(w)
	if err := errors.Join(w.finish(), f.Close()); err != nil {
		t.Fatal(err)
	}
	if f, err = os.Open(path); err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := newSnapReader(f)
	if err != nil {
		t.Fatal(err)
	}
	y := newTestLexical(t)
	if err := y.readSnapshot(r); err != nil {
		t.Fatal(err)
	}
	if err := r.check(); err != nil {
		t.Fatal(err)
	}
	return y
}
