package retriever

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"iter"
	"math"
	"math/bits"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"unicode"
	"unsafe"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/analysis"
	"github.com/blevesearch/bleve/v2/analysis/lang/en"
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
	// Examples are the card's search examples: requests the tool serves.
	Examples []string
	Tags     []string
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
	Examples    float64
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
		Examples:    2,
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
		{lexFieldExamples, w.Examples},
		{lexFieldSummary, w.Summary},
		{lexFieldTags, w.Tags},
		{lexFieldParams, w.Params},
		{lexFieldDescription, w.Description},
		{lexFieldServer, w.Server},
	}
}

// Index field names: the card field names, reported as they are in
// Hit.Fields.
const (
	lexFieldName        = "name"
	lexFieldAliases     = "aliases"
	lexFieldLearned     = "learned"
	lexFieldExamples    = "examples"
	lexFieldSummary     = "summary"
	lexFieldTags        = "tags"
	lexFieldParams      = "params"
	lexFieldDescription = "description"
	lexFieldServer      = "server"

	// lexAnalyzer is bleve's English analyzer: unicode tokenizer,
	// possessive_en, to_lower, stop_en, porter stemmer.
	lexAnalyzer = en.AnalyzerName
)

// maxLexFields is the number of searchable fields (LexicalWeights).
const maxLexFields = 9

// LexicalIndex is the lexical leg: BM25F over the caller's candidate set.
// Text is analysed by bleve's English analyzer (unicode tokenizer,
// possessive, lower case, English stop words, Porter stemmer) after
// identifier splitting; the index keeps, per analysed term, a posting list
// of the docs holding it with the term's frequency in each field, in dense
// doc numbers, and per doc its field lengths. A search walks the query
// terms' postings once, keeps the candidates' (a bitset or the tenant), and
// scores them with statistics of the candidate set alone (see Search).
//
// It used to be a bleve (scorch) index whose matches, with term locations,
// were scored here; bleve's own scorers cannot take candidate-set
// statistics, and resolving its internal doc numbers costs a stored-field
// read per hit, so finding every candidate match through it was most of a
// discovery's time (docs/BENCHMARKS.md). The scores are the same, bit for
// bit (TestLexicalMatchesReference).
//
// It is safe for concurrent use. Its contents live as long as the value.
//
// Its layout is for a small heap (docs/BENCHMARKS.md, "Live heap"): terms
// are numbered (termNo), a doc lists its terms by number, and a posting is
// two words, its field frequencies packed (lexTF).
type LexicalIndex struct {
	analyzer analysis.Analyzer
	fields   []lexField // weights > 0 only

	mu   sync.RWMutex
	docs []lexDoc // by doc number; dead ones have id ""
	// tenantOf is, by doc number, the doc's tenant's number (lexNoTenant
	// for a dead one): beside the docs, so that a search tells a tenant's
	// postings without reading their docs.
	tenantOf []uint32
	free     []uint32          // dead doc numbers, for reuse
	byID     map[string]uint32 // doc ID → number
	// termNo numbers the terms; by number, termName is the term and
	// postings its postings, in doc order (freeTerms: numbers of terms no
	// doc holds any more, for reuse).
	termNo    map[string]uint32
	termName  []string
	postings  [][]posting
	freeTerms []uint32
	// bound is, by term number, the highest frequency in each field of
	// the term's postings (packed as a lexTF; lexTFMax stands for that or
	// more). A deletion does not lower it: it bounds the postings from
	// above, which is all the pruned search needs (lexprune.go).
	bound []lexTF
	// wide holds the field frequencies of the postings with one over
	// lexTFMax (freeWide: slots no posting uses, for reuse).
	wide     [][maxLexFields]uint16
	freeWide []uint32
	tenants  map[string]*lexTenant
	tenantNo map[string]uint32 // tenant → its number in tenantOf
	// version counts mutations; a LexSet built at one version is stale at
	// the next.
	version uint64
}

// lexDoc is one doc: its field lengths (analysed tokens, in x.fields
// order) and the numbers of the distinct terms it holds (to drop its
// postings). Its tenant is in LexicalIndex.tenantOf.
type lexDoc struct {
	id    string
	key   uint32 // the key its hits carry (setKey; Hit.key)
	n     [maxLexFields]int32
	terms termList
}

// lexNoTenant is the tenant number of a dead doc (tenantOf).
const lexNoTenant = math.MaxUint32

// termList is a doc's term numbers, ascending, as the unsigned varints of
// their differences (a doc holds its postings' terms in a quarter of
// their four-byte numbers).
type termList []byte

// appendTerms appends the ascending numbers nos to l.
func appendTerms(l termList, nos []uint32) termList {
	prev := uint32(0)
	for _, no := range nos {
		l = binary.AppendUvarint(l, uint64(no-prev))
		prev = no
	}
	return l
}

// all yields the numbers, ascending.
func (l termList) all() iter.Seq[uint32] {
	return func(yield func(uint32) bool) {
		no := uint32(0)
		for len(l) > 0 {
			d, k := binary.Uvarint(l)
			no, l = no+uint32(d), l[k:]
			if !yield(no) {
				return
			}
		}
	}
}

// posting is one doc holding a term, with the term's count in each field
// (x.fields order), packed: lexTF.
type posting struct {
	doc uint32
	tf  lexTF
}

// lexTF is a posting's field frequencies: lexTFBits bits a field, in
// x.fields order from the low bits, when none is over lexTFMax; otherwise
// lexTFWide plus the index of the frequencies in LexicalIndex.wide.
type lexTF uint32

const (
	lexTFBits = 3
	lexTFMax  = 1<<lexTFBits - 1
	lexTFWide = lexTF(1) << 31
)

// A packed posting has room for every field.
var _ [31 - lexTFBits*maxLexFields]struct{}

// packTF is tf as a posting's lexTF, taking a wide slot when a frequency is
// over lexTFMax. Call with x.mu held.
func (x *LexicalIndex) packTF(tf *[maxLexFields]uint16) lexTF {
	var p lexTF
	for i, v := range tf {
		if v > lexTFMax {
			return x.wideTF(tf)
		}
		p |= lexTF(v) << (lexTFBits * i)
	}
	return p
}

func (x *LexicalIndex) wideTF(tf *[maxLexFields]uint16) lexTF {
	if k := len(x.freeWide); k > 0 {
		w := x.freeWide[k-1]
		x.freeWide = x.freeWide[:k-1]
		x.wide[w] = *tf
		return lexTFWide | lexTF(w)
	}
	x.wide = append(x.wide, *tf)
	return lexTFWide | lexTF(len(x.wide)-1)
}

// unpackTF is the field frequencies of p. Call with x.mu held.
func (x *LexicalIndex) unpackTF(p lexTF) (tf [maxLexFields]uint16) {
	if p&lexTFWide != 0 {
		return x.wide[p&^lexTFWide]
	}
	for i := range tf {
		tf[i] = uint16(p>>(lexTFBits*i)) & lexTFMax
	}
	return tf
}

// dropTF frees p's wide slot, if it has one. Call with x.mu held.
func (x *LexicalIndex) dropTF(p lexTF) {
	if p&lexTFWide != 0 {
		x.freeWide = append(x.freeWide, uint32(p&^lexTFWide))
	}
}

// term is the number of term, numbering it if it is new. Call with x.mu
// held.
func (x *LexicalIndex) term(term string) uint32 {
	if no, ok := x.termNo[term]; ok {
		return no
	}
	var no uint32
	if k := len(x.freeTerms); k > 0 {
		no, x.freeTerms = x.freeTerms[k-1], x.freeTerms[:k-1]
		x.termName[no], x.bound[no] = term, 0
	} else {
		no = uint32(len(x.termName))
		x.termName = append(x.termName, term)
		x.postings = append(x.postings, nil)
		x.bound = append(x.bound, 0)
	}
	x.termNo[term] = no
	return no
}

type lexTenant struct {
	no   uint32
	docs int
	sum  [maxLexFields]int64 // per field, in x.fields order
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
	an, err := lexicalAnalyzer()
	if err != nil {
		return nil, err
	}
	x := &LexicalIndex{analyzer: an, byID: map[string]uint32{}, termNo: map[string]uint32{},
		tenants: map[string]*lexTenant{}, tenantNo: map[string]uint32{}}
	for _, f := range w.fields() {
		if f.boost > 0 {
			x.fields = append(x.fields, f)
		}
	}
	return x, nil
}

// lexicalAnalyzer is bleve's English analyzer, from bleve's registry.
func lexicalAnalyzer() (analysis.Analyzer, error) {
	an := bleve.NewIndexMapping().AnalyzerNamed(lexAnalyzer)
	if an == nil {
		return nil, fmt.Errorf("lexical index: analyzer %q not registered", lexAnalyzer)
	}
	return an, nil
}

// fieldValues returns a doc's values of field name, identifier-split.
func fieldValues(d *LexicalDoc, name string) []string {
	one := func(s string) []string {
		if s == "" {
			return nil
		}
		return []string{SplitIdentifiers(s)}
	}
	all := func(ss []string) []string {
		out := make([]string, 0, len(ss))
		for _, s := range ss {
			if t := SplitIdentifiers(s); t != "" {
				out = append(out, t)
			}
		}
		return out
	}
	switch name {
	case lexFieldServer:
		return one(d.Server)
	case lexFieldName:
		return one(d.Name)
	case lexFieldSummary:
		return one(d.Summary)
	case lexFieldDescription:
		return one(d.Description)
	case lexFieldAliases:
		return all(d.Aliases)
	case lexFieldLearned:
		return all(d.Learned)
	case lexFieldExamples:
		return all(d.Examples)
	case lexFieldTags:
		return all(d.Tags)
	case lexFieldParams:
		return all(d.Params)
	}
	return nil
}

// analyse returns a doc's field lengths and per-term field frequencies.
func (x *LexicalIndex) analyse(d *LexicalDoc) ([maxLexFields]int32, map[string]*[maxLexFields]uint16) {
	var n [maxLexFields]int32
	tfs := map[string]*[maxLexFields]uint16{}
	for i, fl := range x.fields {
		for _, v := range fieldValues(d, fl.name) {
			for _, tok := range x.analyzer.Analyze([]byte(v)) {
				n[i]++
				t := string(tok.Term)
				tf := tfs[t]
				if tf == nil {
					tf = new([maxLexFields]uint16)
					tfs[t] = tf
				}
				if tf[i] < math.MaxUint16 {
					tf[i]++
				}
			}
		}
	}
	return n, tfs
}

// Upsert indexes docs in one batch, replacing any doc with the same ID.
// Analysis runs before the index is locked, so searches go on meanwhile.
func (x *LexicalIndex) Upsert(docs []LexicalDoc) error {
	if len(docs) == 0 {
		return nil
	}
	type analysed struct {
		n   [maxLexFields]int32
		tfs map[string]*[maxLexFields]uint16
	}
	an := make([]analysed, len(docs))
	for i := range docs {
		d := &docs[i]
		if d.ID == "" {
			return fmt.Errorf("lexical upsert: doc %d: empty ID", i)
		}
		if d.Tenant == "" {
			return fmt.Errorf("lexical upsert: doc %q: empty tenant", d.ID)
		}
	}
	// Analysis is most of a large batch's cost (a restart's): spread it over
	// the cores. The analyzer holds no state between calls.
	workers := min(runtime.GOMAXPROCS(0), (len(docs)+63)/64)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < len(docs); i += workers {
				an[i].n, an[i].tfs = x.analyse(&docs[i])
			}
		}()
	}
	wg.Wait()
	x.mu.Lock()
	defer x.mu.Unlock()
	x.version++
	var nos []uint32 // a doc's term numbers
	for i := range docs {
		d := &docs[i]
		num, exists := x.byID[d.ID]
		if exists {
			x.forget(num)
		} else if k := len(x.free); k > 0 {
			num, x.free = x.free[k-1], x.free[:k-1]
		} else {
			num = uint32(len(x.docs))
			x.docs, x.tenantOf = append(x.docs, lexDoc{}), append(x.tenantOf, lexNoTenant)
		}
		t := x.tenants[d.Tenant]
		if t == nil {
			no, ok := x.tenantNo[d.Tenant]
			if !ok {
				no = uint32(len(x.tenantNo))
				x.tenantNo[d.Tenant] = no
			}
			t = &lexTenant{no: no}
			x.tenants[d.Tenant] = t
		}
		doc := lexDoc{id: d.ID, n: an[i].n}
		nos = nos[:0]
		for term, tf := range an[i].tfs {
			no := x.term(term)
			nos = append(nos, no)
			x.bound[no] = raiseBound(x.bound[no], tf)
			x.addPosting(no, posting{doc: num, tf: x.packTF(tf)})
		}
		slices.Sort(nos)
		doc.terms = appendTerms(nil, nos)
		x.docs[num], x.tenantOf[num] = doc, t.no
		x.byID[d.ID] = num
		t.docs++
		for f, v := range doc.n {
			t.sum[f] += int64(v)
		}
	}
	return nil
}

// addPosting inserts p into term no's list, kept in doc order (an append
// for new docs, which get increasing numbers). Call with x.mu held.
func (x *LexicalIndex) addPosting(no uint32, p posting) {
	ps := x.postings[no]
	if k := len(ps); k == 0 || ps[k-1].doc < p.doc {
		x.postings[no] = append(ps, p)
		return
	}
	i, _ := slices.BinarySearchFunc(ps, p.doc, func(q posting, d uint32) int { return int(int64(q.doc) - int64(d)) })
	x.postings[no] = slices.Insert(ps, i, p)
}

// forget drops doc num's postings and length statistics; its number stays
// taken (the caller reuses or frees it). Call with x.mu held.
func (x *LexicalIndex) forget(num uint32) {
	d := &x.docs[num]
	for no := range d.terms.all() {
		ps := x.postings[no]
		i, found := slices.BinarySearchFunc(ps, num, func(q posting, n uint32) int { return int(int64(q.doc) - int64(n)) })
		if !found {
			continue
		}
		x.dropTF(ps[i].tf)
		if ps = slices.Delete(ps, i, i+1); len(ps) == 0 {
			delete(x.termNo, x.termName[no])
			x.termName[no], x.postings[no] = "", nil
			x.freeTerms = append(x.freeTerms, no)
		} else {
			x.postings[no] = ps
		}
	}
	for name, t := range x.tenants {
		if t.no != x.tenantOf[num] {
			continue
		}
		t.docs--
		for f, v := range d.n {
			t.sum[f] -= int64(v)
		}
		if t.docs == 0 {
			delete(x.tenants, name)
		}
		break
	}
	delete(x.byID, d.id)
	*d, x.tenantOf[num] = lexDoc{}, lexNoTenant
}

// Delete removes the docs with the given IDs; unknown IDs are ignored.
func (x *LexicalIndex) Delete(ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	x.version++
	for _, id := range ids {
		if num, ok := x.byID[id]; ok {
			x.forget(num)
			x.free = append(x.free, num)
		}
	}
	return nil
}

// setKey gives doc id the key its hits carry (Hit.key), and the doc the
// string id for its ID; an absent id is ignored. Upsert clears the key.
func (x *LexicalIndex) setKey(id string, key uint32) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if num, ok := x.byID[id]; ok {
		d := &x.docs[num]
		d.key = key
		if unsafe.StringData(d.id) != unsafe.StringData(id) {
			// One string for the ID, the caller's: a snapshot's load read
			// its own.
			delete(x.byID, id)
			x.byID[id], d.id = num, id
		}
	}
}

// Count returns the number of indexed docs, all tenants together.
func (x *LexicalIndex) Count() (uint64, error) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return uint64(len(x.byID)), nil
}

// Close releases the index. It may be called more than once.
func (x *LexicalIndex) Close() error { return nil }

// BM25F parameters (Robertson, Zaragoza and Taylor, "Simple BM25 extension
// to multiple weighted fields", 2004): term frequencies are length-
// normalised per field, weighted by the field boosts and summed before one
// saturation, so a term matched in several fields counts once, saturated.
const (
	bm25K1 = 1.2
	bm25B  = 0.75
)

// LexSet is a candidate set prepared for the lexical index: the member
// docs as a bitset, their count and average field lengths. It is valid
// until the index changes (Prepare again then; Search checks).
type LexSet struct {
	x       *LexicalIndex
	version uint64
	tenant  uint32
	all     bool     // every doc of the tenant
	bits    []uint64 // by doc number, when not all
	n       int
	avg     [maxLexFields]float64
	empty   bool
}

// Prepare builds the LexSet of a filter: its docs, count and average field
// lengths, as Search would compute them.
func (x *LexicalIndex) Prepare(f Filter) *LexSet {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.prepare(f)
}

// prepare is Prepare with x.mu held.
func (x *LexicalIndex) prepare(f Filter) *LexSet {
	s := &LexSet{x: x, version: x.version}
	t := x.tenants[f.Tenant]
	if t == nil || (f.IDs != nil && len(f.IDs) == 0) {
		s.empty = true
		return s
	}
	s.tenant = t.no
	if f.IDs == nil {
		s.all, s.n = true, t.docs
		for i, v := range t.sum {
			s.avg[i] = float64(v) / float64(t.docs)
		}
		return s
	}
	s.bits = make([]uint64, (len(x.docs)+63)/64)
	var sum [maxLexFields]int64
	for _, id := range f.IDs {
		num, ok := x.byID[id]
		if !ok || x.tenantOf[num] != t.no || s.bits[num/64]&(1<<(num%64)) != 0 {
			continue
		}
		s.bits[num/64] |= 1 << (num % 64)
		s.n++
		for i, v := range x.docs[num].n {
			sum[i] += int64(v)
		}
	}
	if s.n == 0 {
		s.empty = true
		return s
	}
	for i := range sum {
		s.avg[i] = float64(sum[i]) / float64(s.n)
	}
	return s
}

// has says doc num is in the set. Call with the index's mu held.
func (s *LexSet) has(num uint32) bool {
	if s.all {
		return s.x.tenantOf[num] == s.tenant
	}
	return int(num/64) < len(s.bits) && s.bits[num/64]&(1<<(num%64)) != 0
}

// Search returns at most limit docs of the candidate set f that match query,
// best first: score descending, then ID ascending, which within a tenant is
// (server, name) order (see DocID). A query without searchable terms (empty,
// stop words only) returns no hits.
//
// Scores are BM25F whose statistics (document count, document frequencies,
// average field lengths) are those of the candidate set alone, so no score
// depends on a card the caller cannot see — another tenant's or one outside
// the caller's scopes.
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
	if f.Tenant == "" {
		return nil, errors.New("lexical search: filter has no tenant")
	}
	return x.SearchSet(parts, nil, f, limit)
}

// SearchSet is SearchWeighted inside a prepared candidate set (from
// Prepare with f, or nil to prepare it here); a set prepared before the
// index changed is prepared again.
func (x *LexicalIndex) SearchSet(parts []WeightedText, set *LexSet, f Filter, limit int) ([]Hit, error) {
	return x.search(nil, parts, set, f, limit, true)
}

// search is SearchSet appending the hits to dst[:0]; without names, hits
// carry their matched fields as a mask only (Hit.mask; fieldNames names
// them).
func (x *LexicalIndex) search(dst []Hit, parts []WeightedText, set *LexSet, f Filter, limit int, names bool) ([]Hit, error) {
	if limit < 0 {
		return nil, fmt.Errorf("lexical search: negative limit %d", limit)
	}
	if limit == 0 || (f.IDs != nil && len(f.IDs) == 0) || len(x.fields) == 0 {
		return nil, nil
	}
	return x.searchTerms(dst, x.queryTerms(nil, parts), set, f, limit, names)
}

// queryTerms are a query's distinct analysed terms, in byte order, each
// with its query weight (summed over the texts in their order) and its
// weight in the coverage (the highest of a text holding it), appended to
// dst[:0]. Every LexicalIndex analyses with lexicalAnalyzer, so one index's
// terms serve another's search (searchTerms).
func (x *LexicalIndex) queryTerms(dst []queryTerm, parts []WeightedText) []queryTerm {
	terms := dst[:0]
	for _, p := range parts {
		if !(p.Weight > 0) {
			continue
		}
		for _, tok := range x.analyzer.Analyze([]byte(SplitIdentifiers(p.Text))) {
			i := slices.IndexFunc(terms, func(q queryTerm) bool { return string(q.term) == string(tok.Term) })
			if i < 0 {
				i = len(terms)
				terms = append(terms, queryTerm{term: tok.Term})
			}
			terms[i].qtf += p.Weight
			terms[i].cover = max(terms[i].cover, p.Weight)
		}
	}
	slices.SortFunc(terms, func(a, b queryTerm) int { return bytes.Compare(a.term, b.term) })
	return terms
}

// searchTerms is search of a query analysed by queryTerms. It reads less
// than every posting where it can (scorePruned), with the answers of the
// exhaustive walk (scoreAll), bit for bit.
func (x *LexicalIndex) searchTerms(dst []Hit, terms []queryTerm, set *LexSet, f Filter, limit int, names bool) ([]Hit, error) {
	return x.searchTermsBy(dst, terms, set, f, limit, names, lexAdaptive)
}

// searchTermsBy is searchTerms scoring as mode says (the tests compare
// the modes).
func (x *LexicalIndex) searchTermsBy(dst []Hit, terms []queryTerm, set *LexSet, f Filter, limit int, names bool, mode lexMode) ([]Hit, error) {
	if limit < 0 {
		return nil, fmt.Errorf("lexical search: negative limit %d", limit)
	}
	if limit == 0 || (f.IDs != nil && len(f.IDs) == 0) || len(x.fields) == 0 || len(terms) == 0 {
		return nil, nil
	}

	x.mu.RLock()
	defer x.mu.RUnlock()
	if set == nil || set.x != x || set.version != x.version {
		set = x.prepare(f)
	}
	if set.empty || set.n == 0 {
		return nil, nil
	}
	acc := getLexAcc(len(x.docs))
	defer putLexAcc(acc)
	top := lexTop{limit: limit, heap: acc.heap[:0], items: acc.top[:0]}
	var coverTotal, evidenceTotal float64
	if x.prunable(terms, set, limit, mode) {
		coverTotal, evidenceTotal, _ = x.scorePruned(acc, &top, terms, set, mode)
	} else {
		coverTotal, evidenceTotal = x.scoreAll(acc, &top, terms, set)
	}

	// The best limit, score descending then ID ascending.
	acc.heap, acc.top = top.heap, top.items
	winners := top.best(x.docs)
	hits := slices.Grow(dst[:0], len(winners))[:len(winners)]
	for i, w := range winners {
		hits[i] = Hit{ID: x.docs[w.num].id, key: x.docs[w.num].key, Score: w.score, mask: acc.fields[w.num],
			Coverage: acc.matched[w.num] / coverTotal, Evidence: acc.evidence[w.num] / evidenceTotal}
		if names {
			hits[i].Fields = x.fieldNames(hits[i].mask)
		}
	}
	return hits, nil
}

// scoreAll scores every candidate holding a query term and offers it to
// top, leaving its matched fields, coverage and evidence in acc; it returns
// the totals the last two are shares of. Call with x.mu held.
func (x *LexicalIndex) scoreAll(acc *lexAcc, top *lexTop, terms []queryTerm, set *LexSet) (coverTotal, evidenceTotal float64) {
	n := float64(set.n)
	// Per term: walk its postings once, keeping the candidates, with the
	// length-normalised, boosted frequency summed over fields in the fixed
	// field order (so the floating-point sums, and the scores, are the same
	// on every run); the candidates holding it are its exact document
	// frequency. Then add each holder's saturated, IDF-weighted share.
	for _, t := range terms {
		coverTotal += t.cover
	}
	for _, t := range terms {
		var ps []posting
		if no, ok := x.termNo[string(t.term)]; ok {
			ps = x.postings[no]
		}
		acc.held = x.holders(acc.held[:0], ps, set, acc, &lexBar{})
		df := float64(len(acc.held))
		idfOne := math.Log(1 + (n-df+0.5)/(df+0.5))
		evidenceTotal += t.cover * idfOne
		acc.credit(t.qtf*idfOne, t.cover, idfOne)
	}

	for _, num := range acc.touched {
		if s := acc.score[num]; s > 0 {
			top.offer(num, s)
		}
	}
	return coverTotal, evidenceTotal
}

// holders appends to buf the docs of postings ps in set that bar lets
// through, with their postingTF, and marks their matched fields in acc.
// Call with x.mu held.
func (x *LexicalIndex) holders(buf []lexHeld, ps []posting, set *LexSet, acc *lexAcc, bar *lexBar) []lexHeld {
	for _, p := range ps {
		if !bar.lets(p.doc) || !set.has(p.doc) {
			continue
		}
		tf, mask := x.postingTF(p.tf, &x.docs[p.doc], &set.avg)
		if tf > 0 {
			buf = append(buf, lexHeld{p.doc, tf})
			acc.fields[p.doc] |= mask
		}
	}
	return buf
}

// credit adds to the docs of acc.held (holders of a term) the term's
// saturated, IDF-weighted share (idf: its query weight times idfOne), its
// weight in the coverage and in the evidence.
func (acc *lexAcc) credit(idf, cover, idfOne float64) {
	for _, h := range acc.held {
		if !acc.seen[h.doc] {
			acc.seen[h.doc] = true
			acc.touched = append(acc.touched, h.doc)
		}
		acc.score[h.doc] += idf * h.tf / (bm25K1 + h.tf)
		acc.matched[h.doc] += cover
		acc.evidence[h.doc] += cover * idfOne
	}
}

// postingTF is a posting's length-normalised, boosted frequency summed
// over its fields in x.fields order (so the sum, and the score, is the same
// on every run), and the mask of those fields, in a candidate set of
// average field lengths avg. A packed posting's fields are found by their
// set bits, a field with frequency 0 costing nothing. Call with x.mu held.
func (x *LexicalIndex) postingTF(p lexTF, d *lexDoc, avg *[maxLexFields]float64) (tf float64, mask uint16) {
	if p&lexTFWide != 0 {
		for i, f := range x.wide[p&^lexTFWide][:len(x.fields)] {
			if f != 0 {
				tf, mask = x.fieldTF(tf, mask, i, uint32(f), d, avg)
			}
		}
		return tf, mask
	}
	for v := uint32(p); v != 0; {
		i := bits.TrailingZeros32(v) / lexTFBits
		f := v >> (lexTFBits * i) & lexTFMax
		v &^= lexTFMax << (lexTFBits * i)
		tf, mask = x.fieldTF(tf, mask, i, f, d, avg)
	}
	return tf, mask
}

// fieldTF adds field i's share of a posting of frequency f there to tf and
// mask (none when the set's average length of the field is 0).
func (x *LexicalIndex) fieldTF(tf float64, mask uint16, i int, f uint32, d *lexDoc, avg *[maxLexFields]float64) (float64, uint16) {
	if avg[i] == 0 {
		return tf, mask
	}
	norm := 1 - bm25B + bm25B*float64(d.n[i])/avg[i]
	return tf + x.fields[i].boost*float64(f)/norm, mask | 1<<i
}

// queryTerm is an analysed term of a query with its weights (search).
type queryTerm struct {
	term       []byte
	qtf, cover float64
}

// fieldNames lists the card fields of a mask of x.fields positions, sorted.
func (x *LexicalIndex) fieldNames(mask uint16) []string {
	out := make([]string, 0, 4)
	for i, fl := range x.fields {
		if mask&(1<<i) != 0 {
			out = append(out, fl.name)
		}
	}
	sort.Strings(out)
	return out
}

// lexAcc holds a search's per-doc accumulators, by doc number; only the
// touched entries are non-zero, and are zeroed again on release.
type lexAcc struct {
	score, matched, evidence []float64
	fields                   []uint16
	seen                     []bool
	touched                  []uint32

	// held, top and heap are the scratch of a search: one term's
	// holders, the best docs and their scores' heap (lexTop).
	held []lexHeld
	top  []lexScored
	heap []float64
	// The scratch of a pruned search (scorePruned).
	prune lexPruneScratch
}

// lexHeld is a candidate holding a term, with its boosted term frequency.
type lexHeld struct {
	doc uint32
	tf  float64
}

var lexAccPool sync.Pool

func getLexAcc(n int) *lexAcc {
	a, _ := lexAccPool.Get().(*lexAcc)
	if a == nil || len(a.score) < n {
		size := max(n, 64)
		return &lexAcc{score: make([]float64, size), matched: make([]float64, size), evidence: make([]float64, size),
			fields: make([]uint16, size), seen: make([]bool, size)}
	}
	return a
}

func putLexAcc(a *lexAcc) {
	for _, num := range a.touched {
		a.score[num], a.matched[num], a.evidence[num], a.fields[num], a.seen[num] = 0, 0, 0, 0, false
	}
	a.touched = a.touched[:0]
	clear(a.top) // the IDs it held
	a.held, a.top = a.held[:0], a.top[:0]
	a.prune.reset()
	lexAccPool.Put(a)
}

// lexTop keeps the best limit docs offered: score descending, then ID
// ascending. While offers come it orders scores only (a heap of the best
// limit, whose least is the bar), keeping the docs that reached the bar
// when offered and are not under it since; IDs are compared at the end
// (best), among the docs over the final bar and those tied at it. Exact:
// the final bar is the limit-th best score, and each doc at or over it was
// at or over the bar of its time, which only rises.
type lexTop struct {
	limit int
	heap  []float64   // a min-heap of the best limit scores offered
	items []lexScored // the docs that reached the bar when offered
	// trim is the length of items at which those under the bar are dropped.
	trim int
}

type lexScored struct {
	num   uint32
	score float64
	id    string // set by best
}

// offer offers a doc with its score.
func (t *lexTop) offer(num uint32, score float64) {
	h := t.heap
	switch {
	case len(h) < t.limit:
		h = append(h, score)
		for i := len(h) - 1; i > 0 && h[(i-1)/2] > h[i]; i = (i - 1) / 2 {
			h[(i-1)/2], h[i] = h[i], h[(i-1)/2]
		}
		t.heap = h
	case score < h[0]:
		return
	case score > h[0]:
		h[0] = score
		for i := 0; ; {
			least, l, r := i, 2*i+1, 2*i+2
			if l < len(h) && h[l] < h[least] {
				least = l
			}
			if r < len(h) && h[r] < h[least] {
				least = r
			}
			if least == i {
				break
			}
			h[i], h[least] = h[least], h[i]
			i = least
		}
	}
	t.items = append(t.items, lexScored{num: num, score: score})
	if len(t.items) >= max(t.trim, 2*t.limit) {
		// The heap is full: drop the docs under its bar.
		bar := t.heap[0]
		t.items = slices.DeleteFunc(t.items, func(s lexScored) bool { return s.score < bar })
		t.trim = 2 * len(t.items)
	}
}

// bar is the score a doc must reach to be kept, once limit docs were
// offered (full).
func (t *lexTop) bar() (score float64, full bool) {
	if len(t.heap) < t.limit {
		return 0, false
	}
	return t.heap[0], true
}

// best orders the best limit docs best first, in the kept docs' own array
// (t is spent), with their IDs from docs: those under the final bar are
// dropped, so IDs are compared among the best and those tied at the bar.
func (t *lexTop) best(docs []lexDoc) []lexScored {
	out := t.items
	if bar, full := t.bar(); full {
		out = slices.DeleteFunc(out, func(s lexScored) bool { return s.score < bar })
	}
	for i := range out {
		out[i].id = docs[out[i].num].id
	}
	slices.SortFunc(out, func(a, b lexScored) int {
		return cmp.Or(cmp.Compare(b.score, a.score), strings.Compare(a.id, b.id))
	})
	return out[:min(len(out), t.limit)]
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
