package eval

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/seed0cff8200/cardex/cards"
	"github.com/seed0cff8200/cardex/retriever"
)

// DefaultTopK is the shortlist depth misses are judged at.
const DefaultTopK = 10

// Options configure Run.
type Options struct {
	// TopK is the shortlist depth at which needs count as missed and that
	// the misses list (1..retriever.MaxTopK; 0 → DefaultTopK). Results are
	// always requested at least MetricDepth deep, so every metric is
	// defined whatever TopK is.
	TopK int
	// Modes to run; nil → every mode the backend can run.
	Modes []retriever.Mode
	// Conditions are what each discovery is given of a query; nil → the
	// query alone, and also the intents alone and the query with its
	// intents when the dataset has intents.
	Conditions []Condition
	// Fusion, Alpha and AlphaSet are passed to every discovery.
	Fusion   string
	Alpha    float64
	AlphaSet bool
	// NoReformulate turns off the reformulation of low-confidence queries
	// (on by default in the service), to measure what it does.
	NoReformulate bool
	// NoCompanions turns the companion step off (companions are brought
	// only where outcomes taught co-usage: see Warm).
	NoCompanions bool
	// StrictAlternatives scores a shortlist slot by its tool alone; by
	// default a need is also met by a near-duplicate the slot names as its
	// alternative (a model sees its name and can describe it).
	StrictAlternatives bool
	// Tenant the cards are registered under; "" → "eval-" + dataset name.
	Tenant string
	// Tokenizer counts token savings; nil → no token report.
	Tokenizer Tokenizer
	// Workers run queries concurrently; 0 → GOMAXPROCS.
	Workers int
	// Progress, if set, is called from one goroutine after each discovery
	// with the number done and the total.
	Progress func(done, total int)
}

// Condition is what a discovery is given of a labelled query.
type Condition string

// The conditions.
const (
	// CondQuery: the query text alone.
	CondQuery Condition = "query"
	// CondIntents: the query's intents alone (the query where it has none).
	CondIntents Condition = "intents"
	// CondQueryIntents: the query and its intents, as one request.
	CondQueryIntents Condition = "query+intents"
)

// Conditions lists every condition in a fixed order.
func Conditions() []Condition { return []Condition{CondQuery, CondIntents, CondQueryIntents} }

// ParseCondition checks a condition name.
func ParseCondition(s string) (Condition, error) {
	for _, c := range Conditions() {
		if string(c) == s {
			return c, nil
		}
	}
	return "", fmt.Errorf("condition %q is not one of query, intents, query+intents", s)
}

// search is the discovery of query q under condition c.
func (c Condition) search(q *Query, text string) (string, []string) {
	if len(q.Intents) == 0 {
		return text, nil
	}
	switch c {
	case CondIntents:
		return "", q.Intents
	case CondQueryIntents:
		return text, q.Intents
	}
	return text, nil
}

// Run evaluates a dataset on a backend: it registers the tools as cards,
// runs every query in every mode, scores the results, and counts token
// savings. The backend is not closed.
func Run(ctx context.Context, d *Dataset, b Backend, o Options) (*Report, []Miss, error) {
	start := time.Now()
	topK := o.TopK
	if topK == 0 {
		topK = DefaultTopK
	}
	if topK < 1 || topK > retriever.MaxTopK {
		return nil, nil, fmt.Errorf("top-k %d: it must be between 1 and %d", topK, retriever.MaxTopK)
	}
	depth := max(topK, MetricDepth)
	modes := o.Modes
	if modes == nil {
		modes = b.Modes()
	}
	for _, m := range modes {
		if !hasMode(b.Modes(), m) {
			return nil, nil, fmt.Errorf("mode %q: %s runs only %v", m, b.Describe(), b.Modes())
		}
	}
	if len(modes) == 0 {
		return nil, nil, errors.New("no modes to run")
	}
	conds := o.Conditions
	if conds == nil {
		conds = []Condition{CondQuery}
		if d.HasIntents() {
			conds = Conditions()
		}
	}
	if len(conds) == 0 || conds[0] != CondQuery && !slices.Contains(conds, CondQuery) {
		conds = append([]Condition{CondQuery}, conds...)
	}
	tenant := o.Tenant
	if tenant == "" {
		tenant = "eval-" + d.Name
	}
	if !cards.ValidName(tenant) {
		return nil, nil, fmt.Errorf("tenant %q must match [A-Za-z0-9_.-]{1,128}; name one", tenant)
	}

	rep := &Report{
		Dataset: d.Name, Dir: d.Dir, Backend: b.Describe(), Tenant: tenant,
		Tools: len(d.Tools), Queries: len(d.Queries), TopK: topK, Fusion: fusionName(o.Fusion),
		NoReformulate: o.NoReformulate,
	}
	if d.Examples != nil {
		tools, phrases := 0, 0
		for _, ex := range d.Examples {
			if len(ex) > 0 {
				tools++
				phrases += len(ex)
			}
		}
		rep.Examples = fmt.Sprintf("%s (%d tools, %d phrases)", d.ExamplesFile, tools, phrases)
	}
	for _, m := range modes {
		rep.Modes = append(rep.Modes, string(m))
	}
	for _, c := range conds {
		rep.Conditions = append(rep.Conditions, string(c))
	}
	if o.Fusion == retriever.FusionRelative {
		alpha := retriever.DefaultAlpha
		if o.AlphaSet {
			alpha = o.Alpha
		}
		rep.Alpha = &alpha
	}

	cat, err := NewCatalog(d, tenant)
	if err != nil {
		return nil, nil, err
	}
	rep.SchemasDropped = cat.SchemasDropped
	t0 := time.Now()
	if err := b.Register(ctx, cat); err != nil {
		return nil, nil, err
	}
	rep.Timing.RegisterSeconds = time.Since(t0).Seconds()

	// Every (query, mode) pair is one job.
	type result struct {
		ranked  []string
		latency time.Duration
	}
	// runs are the (condition, mode) pairs, condition-major.
	var runs []run
	for _, c := range conds {
		for _, m := range modes {
			runs = append(runs, run{c, m})
		}
	}
	results := make([][]result, len(d.Queries))
	for i := range results {
		results[i] = make([]result, len(runs))
	}
	cut := 0
	texts := make([]string, len(d.Queries))
	for i, q := range d.Queries {
		if texts[i] = cutQuery(q.Query); texts[i] != q.Query {
			cut++
		}
	}
	if cut > 0 {
		rep.Notes = append(rep.Notes, fmt.Sprintf("%d queries were longer than %d characters and were cut to that limit", cut, retriever.MaxQueryLen))
	}
	if len(cat.SchemasDropped) > 0 {
		rep.Notes = append(rep.Notes, fmt.Sprintf("input schemas left off their cards (they break the card rules; still counted in token savings): %s", strings.Join(cat.SchemasDropped, "; ")))
	}

	total := len(d.Queries) * len(runs)
	workers := o.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	jobs := make(chan int)
	done := make(chan struct{}, workers)
	var (
		wg       sync.WaitGroup
		errOnce  sync.Once
		firstErr error
	)
	t0 = time.Now()
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				qi, ri := j/len(runs), j%len(runs)
				text, intents := runs[ri].cond.search(&d.Queries[qi], texts[qi])
				s := Search{Tenant: tenant, Query: text, Intents: intents, TopK: depth, Mode: runs[ri].mode,
					Fusion: o.Fusion, Alpha: o.Alpha, AlphaSet: o.AlphaSet, NoReformulate: o.NoReformulate,
					NoCompanions: o.NoCompanions}
				ts := time.Now()
				keys, err := b.Discover(runCtx, s)
				lat := time.Since(ts)
				if err != nil {
					errOnce.Do(func() {
						firstErr = fmt.Errorf("query %s (%s, %s): %w", d.Queries[qi].ID, runs[ri].cond, runs[ri].mode, err)
						cancel()
					})
					done <- struct{}{}
					continue
				}
				ranked := make([]string, 0, len(keys))
				needs := d.Queries[qi].Needs()
				for _, f := range keys {
					ranked = append(ranked, slotLabel(cat, f, needs, !o.StrictAlternatives))
				}
				results[qi][ri] = result{ranked: ranked, latency: lat}
				done <- struct{}{}
			}
		}()
	}
	go func() {
		defer close(jobs)
		for j := range total {
			select {
			case jobs <- j:
			case <-runCtx.Done():
				return
			}
		}
	}()
	go func() { wg.Wait(); close(done) }()
	n := 0
	for range done {
		n++
		if o.Progress != nil {
			o.Progress(n, total)
		}
	}
	if firstErr != nil {
		return nil, nil, firstErr
	}
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	rep.Timing.QuerySeconds = time.Since(t0).Seconds()

	// Score; a query is a miss when some mode left a need out of its top K.
	per := make([][]Metrics, len(d.Queries))
	var misses []Miss
	for qi := range d.Queries {
		q := &d.Queries[qi]
		needs := q.Needs()
		per[qi] = make([]Metrics, len(runs))
		byMode := make(map[string]ModeMiss, len(runs))
		missed := false
		for ri, ru := range runs {
			ranked := results[qi][ri].ranked
			per[qi][ri] = Score(needs, ranked)
			top := ranked[:min(topK, len(ranked))]
			mm := ModeMiss{Returned: append([]string{}, top...), Missed: [][]string{}, Found: NeedRanks(needs, top)}
			for i, r := range mm.Found {
				if r == 0 {
					mm.Missed = append(mm.Missed, needs[i])
				}
			}
			missed = missed || len(mm.Missed) > 0
			byMode[ru.key()] = mm
		}
		if missed {
			misses = append(misses, Miss{ID: q.ID, Query: q.Query, Expected: needs, Modes: byMode})
		}
	}

	// Subsets: all, then by number of needs.
	subsets := []struct {
		name, desc string
		keep       func(*Query) bool
	}{
		{"all", "every query", func(*Query) bool { return true }},
		{"single", "queries with one need (one expected tool or group)", func(q *Query) bool { return len(q.Needs()) == 1 }},
		{"multi", "queries with two or more needs", func(q *Query) bool { return len(q.Needs()) > 1 }},
	}
	for _, s := range subsets {
		var idx []int
		for qi := range d.Queries {
			if s.keep(&d.Queries[qi]) {
				idx = append(idx, qi)
			}
		}
		if len(idx) == 0 || (s.name != "all" && len(idx) == len(d.Queries)) {
			continue
		}
		sub := Subset{Name: s.name, Description: s.desc, Queries: len(idx)}
		for ri, ru := range runs {
			ms := make([]Metrics, len(idx))
			var lat time.Duration
			for i, qi := range idx {
				ms[i] = per[qi][ri]
				lat += results[qi][ri].latency
			}
			sub.Modes = append(sub.Modes, ModeResult{Mode: string(ru.mode), Condition: string(ru.cond), Metrics: Mean(ms),
				MeanLatencyMS: lat.Seconds() * 1000 / float64(len(idx))})
		}
		rep.Subsets = append(rep.Subsets, sub)
	}

	// Token savings.
	t0 = time.Now()
	switch {
	case o.Tokenizer == nil:
		rep.TokensNote = "not counted (no tokenizer)"
	case !d.HasSchemas():
		rep.TokensNote = "not counted: no tool of this dataset has an input schema"
	default:
		tr, err := CountCatalog(d, o.Tokenizer)
		if err != nil {
			return nil, nil, err
		}
		// The query condition's hybrid run (or its last mode).
		mi := len(modes) - 1
		for i, m := range modes {
			if m == retriever.ModeHybrid {
				mi = i
			}
		}
		var lists [][]string
		for qi := range d.Queries {
			lists = append(lists, results[qi][mi].ranked)
		}
		tr.addShortlists(lists, string(modes[mi]))
		rep.Tokens = tr
	}
	rep.Timing.TokenSeconds = time.Since(t0).Seconds()
	rep.Timing.TotalSeconds = time.Since(start).Seconds()
	return rep, misses, nil
}

// slotLabel is the label a shortlist slot is scored as: its tool's, or,
// when alternatives count, the first of the tool and its named
// alternatives that meets one of the needs.
func slotLabel(cat *Catalog, f Found, needs [][]string, alternatives bool) string {
	label := func(k [2]string) string {
		if l := cat.Label(k[0], k[1]); l != "" {
			return l
		}
		return k[0] + "/" + k[1] + " (unknown)" // not one of ours: never a hit
	}
	primary := label(f.Key)
	if !alternatives || inAny(needs, primary) {
		return primary
	}
	for _, a := range f.Alternatives {
		if l := label(a); inAny(needs, l) {
			return l
		}
	}
	return primary
}

// run is one (condition, mode) pair of an evaluation.
type run struct {
	cond Condition
	mode retriever.Mode
}

// key names a (condition, mode) run in the misses file: the mode for the
// query condition, "condition/mode" otherwise.
func (r run) key() string {
	if r.cond == CondQuery {
		return string(r.mode)
	}
	return string(r.cond) + "/" + string(r.mode)
}

func hasMode(ms []retriever.Mode, m retriever.Mode) bool {
	for _, x := range ms {
		if x == m {
			return true
		}
	}
	return false
}

func fusionName(f string) string {
	if f == "" {
		return retriever.DefaultFusion
	}
	return strings.ToLower(f)
}
