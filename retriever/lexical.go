package retriever

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"unicode"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/analysis"
	"github.com/blevesearch/bleve/v2/analysis/analyzer/keyword"
	"github.com/blevesearch/bleve/v2/analysis/lang/en"
	"github.com/blevesearch/bleve/v2/index/scorch"
	"github.com/blevesearch/bleve/v2/mapping"
	"github.com/blevesearch/bleve/v2/search"
	"github.com/blevesearch/bleve/v2/search/query"
)

// LexicalDoc is what the lexical index holds for one card. Text fields are
// given as on the card; the index splits identifiers itself.
type LexicalDoc struct {
	ID          string // DocID(tenant, server, name)
	Tenant      string
	Server      string
	Name        string
	Summary     string
	Description string
	Aliases     []string
	// Learned are phrasings learned from use: queries that needed the card.
	Learned []string
	Tags    []string
	// Params are the parameter names of the input schema, top-level and
	// nested property names.
	Params []string
}

// LexicalWeights are the query-time boosts of the card fields. A zero
// weight leaves the field out of the query; negative weights are invalid.
type LexicalWeights struct {
	Name        float64
	Aliases     float64
	Learned     float64
	Summary     float64
	Tags        float64
	Params      float64
	Description float64
	Server      float64
}

// DefaultLexicalWeights returns the boosts used by NewLexicalIndex.
func DefaultLexicalWeights() LexicalWeights {
	return LexicalWeights{
		Name:        3,
		Aliases:     2.5,
		Learned:     2,
		Summary:     2,
		Tags:        1.5,
		Params:      1,
		Description: 1,
		Server:      0.5,
	}
}

func (w LexicalWeights) validate() error {
	for _, f := range w.fields() {
		if math.IsNaN(f.boost) || math.IsInf(f.boost, 0) || f.boost < 0 {
			return fmt.Errorf("lexical weight for %s must be a finite number >= 0, got %v", f.name, f.boost)
		}
	}
	return nil
}

type lexField struct {
	name  string
	boost float64
}

// fields lists the searchable fields in a fixed order. The index field names
// are the card field names.
func (w LexicalWeights) fields() []lexField {
	return []lexField{
		{lexFieldName, w.Name},
		{lexFieldAliases, w.Aliases},
		{lexFieldLearned, w.Learned},
		{lexFieldSummary, w.Summary},
		{lexFieldTags, w.Tags},
		{lexFieldParams, w.Params},
		{lexFieldDescription, w.Description},
		{lexFieldServer, w.Server},
	}
}

// Index field names. The text fields carry the card field names, so a match
// location's field is reported as is; tenant is a keyword field used only
// to filter.
const (
	lexFieldTenant      = "tenant"
	lexFieldName        = "name"
	lexFieldAliases     = "aliases"
	lexFieldLearned     = "learned"
	lexFieldSummary     = "summary"
	lexFieldTags        = "tags"
	lexFieldParams      = "params"
	lexFieldDescription = "description"
	lexFieldServer      = "server"

	// lexAnalyzer is bleve's English analyzer: unicode tokenizer,
	// possessive_en, to_lower, stop_en, porter stemmer.
	lexAnalyzer = en.AnalyzerName
)

// lexTextFields maps index field names to the card field names reported in
// Hit.Fields.
var lexTextFields = map[string]string{
	lexFieldName:        "name",
	lexFieldAliases:     "aliases",
	lexFieldLearned:     "learned",
	lexFieldSummary:     "summary",
	lexFieldTags:        "tags",
	lexFieldParams:      "params",
	lexFieldDescription: "description",
	lexFieldServer:      "server",
}

// LexicalIndex is the lexical leg: bleve analyses and matches, and Search
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
type LexicalIndex struct {
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
	lens    map[string]*lexLens // doc ID → lengths
	tenants map[string]*lexTenant
}

// lexLens holds one doc's tenant and field lengths, in x.fields order.
type lexLens struct {
	tenant string
	n      []int32
}

type lexTenant struct {
	docs int
	sum  []int64 // per field, in x.fields order
}

// NewLexicalIndex returns an empty index with DefaultLexicalWeights.
func NewLexicalIndex() (*LexicalIndex, error) {
	return NewLexicalIndexWithWeights(DefaultLexicalWeights())
}

// NewLexicalIndexWithWeights returns an empty index that searches with the
// given field boosts.
func NewLexicalIndexWithWeights(w LexicalWeights) (*LexicalIndex, error) {
	if err := w.validate(); err != nil {
		return nil, err
	}
	m := lexMapping()
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
	x := &LexicalIndex{idx: idx, dir: dir, analyzer: an, lens: map[string]*lexLens{}, tenants: map[string]*lexTenant{}}
	for _, f := range w.fields() {
		if f.boost > 0 {
			x.fields = append(x.fields, f)
		}
	}
	return x, nil
}

func lexMapping() *mapping.IndexMappingImpl {
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

// lexDocument is the bleve document of a card: identifier-split text.
func lexDocument(d LexicalDoc) map[string]any {
	return map[string]any{
		lexFieldTenant:      d.Tenant,
		lexFieldServer:      SplitIdentifiers(d.Server),
		lexFieldName:        SplitIdentifiers(d.Name),
		lexFieldSummary:     SplitIdentifiers(d.Summary),
		lexFieldDescription: SplitIdentifiers(d.Description),
		lexFieldAliases:     lexSplitAll(d.Aliases),
		lexFieldLearned:     lexSplitAll(d.Learned),
		lexFieldTags:        lexSplitAll(d.Tags),
		lexFieldParams:      lexSplitAll(d.Params),
	}
}

func lexSplitAll(ss []string) []any {
	out := make([]any, 0, len(ss))
	for _, s := range ss {
		if t := SplitIdentifiers(s); t != "" {
			out = append(out, t)
		}
	}
	return out
}

// Upsert indexes docs in one batch, replacing any doc with the same ID.
func (x *LexicalIndex) Upsert(docs []LexicalDoc) error {
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
		if err := b.Index(d.ID, lexDocument(d)); err != nil {
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
		doc := lexDocument(d)
		l := &lexLens{tenant: d.Tenant, n: make([]int32, len(x.fields))}
		for i, fl := range x.fields {
			l.n[i] = int32(x.fieldLen(doc[fl.name]))
		}
		x.lens[d.ID] = l
		t := x.tenants[d.Tenant]
		if t == nil {
			t = &lexTenant{sum: make([]int64, len(x.fields))}
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
func (x *LexicalIndex) forget(id string) {
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
func (x *LexicalIndex) fieldLen(v any) int {
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
func (x *LexicalIndex) Delete(ids []string) error {
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
func (x *LexicalIndex) Count() (uint64, error) {
	return x.idx.DocCount()
}

// Close releases the index and removes its directory. Calls after the first
// return the first call's result.
func (x *LexicalIndex) Close() error {
	x.closeOnce.Do(func() {
		err := x.idx.Close()
		if rmErr := os.RemoveAll(x.dir); err == nil {
			err = rmErr
		}
		x.closeErr = err
	})
	return x.closeErr
}

// BM25F parameters (Robertson, Zaragoza and Taylor, "Simple BM25 extension
// to multiple weighted fields", 2004): term frequencies are length-
// normalised per field, weighted by the field boosts and summed before one
// saturation, so a term matched in several fields counts once, saturated.
const (
	bm25K1 = 1.2
	bm25B  = 0.75
)

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
func (x *LexicalIndex) Search(q string, f Filter, limit int) ([]Hit, error) {
	return x.SearchWeighted([]WeightedText{{Text: q, Weight: 1}}, f, limit)
}

// WeightedText is one part of a weighted lexical query.
type WeightedText struct {
	Text   string
	Weight float64 // > 0
}

// SearchWeighted is Search for a query made of several texts with weights:
// a term's query weight is the sum over the texts of its count times the
// text's weight, and a hit's coverage is the share of the terms, each
// counted at the highest weight of a text holding it, that the hit matched.
// Search(q) is SearchWeighted of q alone at weight 1.
func (x *LexicalIndex) SearchWeighted(parts []WeightedText, f Filter, limit int) ([]Hit, error) {
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
			hits = append(hits, Hit{ID: m.ID, Score: score, Fields: lexMatchedFields(m.Locations),
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
func (x *LexicalIndex) candidateStats(f Filter) (int, []float64) {
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

func lexMatchedFields(locs search.FieldTermLocationMap) []string {
	out := make([]string, 0, len(locs))
	for f := range locs {
		if name, ok := lexTextFields[f]; ok {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// SplitIdentifiers rewrites identifiers in s as lower-case words: `_`, `-`,
// `.`, `:` and `/` become spaces, and camelCase, acronym and letter/digit
// boundaries are split, so "getPullRequest" becomes "get pull request",
// "list_open_issues" becomes "list open issues" and "HTTPServer2Status"
// becomes "http server 2 status". An acronym's plural stays whole ("getURLs"
// becomes "get urls"). Other characters, such as apostrophes and
// punctuation, are kept for the analyzer. Words are separated by one space.
func SplitIdentifiers(s string) string {
	rs := []rune(s)
	var b strings.Builder
	b.Grow(len(s) + 8)
	space := func() {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
	}
	pendingSpace := false
	for i, r := range rs {
		if unicode.IsSpace(r) || lexIsSeparator(r) {
			pendingSpace = true
			continue
		}
		if i > 0 && !pendingSpace && lexBoundary(rs, i) {
			pendingSpace = true
		}
		if pendingSpace {
			space()
			pendingSpace = false
		}
		b.WriteRune(unicode.ToLower(r))
	}
	return b.String()
}

func lexIsSeparator(r rune) bool {
	switch r {
	case '_', '-', '.', ':', '/':
		return true
	}
	return false
}

// lexBoundary reports whether a word starts at rs[i] inside a run with no
// separator before it.
func lexBoundary(rs []rune, i int) bool {
	prev, cur := rs[i-1], rs[i]
	switch {
	case unicode.IsLower(prev) && unicode.IsUpper(cur):
		return true // getPull
	case unicode.IsLetter(prev) && unicode.IsDigit(cur),
		unicode.IsDigit(prev) && unicode.IsLetter(cur):
		return true // server2, 2status
	case unicode.IsUpper(prev) && unicode.IsUpper(cur) &&
		i+1 < len(rs) && unicode.IsLower(rs[i+1]):
		// HTTPServer: a word starts at S, unless the lower-case tail is
		// a plural "s" of the acronym (URLs, IDs).
		if rs[i+1] == 's' && (i+2 == len(rs) || !unicode.IsLower(rs[i+2])) {
			return false
		}
		return true
	}
	return false
}
