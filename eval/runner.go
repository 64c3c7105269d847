package eval

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

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
	// Fusion, Alpha and AlphaSet are passed to every discovery.
	Fusion   string
	Alpha    float64
	AlphaSet bool
	// NoReformulate turns off the reformulation of low-confidence queries
	// (on by default in the service), to measure what it does.
	NoReformulate bool
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
	for _, m := range modes {
		rep.Modes = append(rep.Modes, string(m))
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
	results := make([][]result, len(d.Queries))
	for i := range results {
		results[i] = make([]result, len(modes))
	}
	cut := 0
	texts := make([]string, len(d.Queries))
	for i, q := range d.Queries {
		texts[i] = q.Query
		if utf8.RuneCountInString(q.Query) > retriever.MaxQueryLen {
			texts[i] = string([]rune(q.Query)[:retriever.MaxQueryLen])
			cut++
		}
	}
	if cut > 0 {
		rep.Notes = append(rep.Notes, fmt.Sprintf("%d queries were longer than %d characters and were cut to that limit", cut, retriever.MaxQueryLen))
	}
	if len(cat.SchemasDropped) > 0 {
		rep.Notes = append(rep.Notes, fmt.Sprintf("input schemas left off their cards (they break the card rules; still counted in token savings): %s", strings.Join(cat.SchemasDropped, "; ")))
	}

	total := len(d.Queries) * len(modes)
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
				qi, mi := j/len(modes), j%len(modes)
				s := Search{Tenant: tenant, Query: texts[qi], TopK: depth, Mode: modes[mi],
					Fusion: o.Fusion, Alpha: o.Alpha, AlphaSet: o.AlphaSet, NoReformulate: o.NoReformulate}
				ts := time.Now()
				keys, err := b.Discover(runCtx, s)
				lat := time.Since(ts)
				if err != nil {
					errOnce.Do(func() {
						firstErr = fmt.Errorf("query %s (%s): %w", d.Queries[qi].ID, modes[mi], err)
						cancel()
					})
					done <- struct{}{}
					continue
				}
				ranked := make([]string, 0, len(keys))
				for _, k := range keys {
					label := cat.Label(k[0], k[1])
					if label == "" { // not one of ours: never a hit
						label = k[0] + "/" + k[1] + " (unknown)"
					}
					ranked = append(ranked, label)
				}
				results[qi][mi] = result{ranked: ranked, latency: lat}
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
		per[qi] = make([]Metrics, len(modes))
		byMode := make(map[string]ModeMiss, len(modes))
		missed := false
		for mi, m := range modes {
			ranked := results[qi][mi].ranked
			per[qi][mi] = Score(needs, ranked)
			top := ranked[:min(topK, len(ranked))]
			mm := ModeMiss{Returned: append([]string{}, top...), Missed: [][]string{}, Found: NeedRanks(needs, top)}
			for i, r := range mm.Found {
				if r == 0 {
					mm.Missed = append(mm.Missed, needs[i])
				}
			}
			missed = missed || len(mm.Missed) > 0
			byMode[string(m)] = mm
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
		for mi, m := range modes {
			ms := make([]Metrics, len(idx))
			var lat time.Duration
			for i, qi := range idx {
				ms[i] = per[qi][mi]
				lat += results[qi][mi].latency
			}
			sub.Modes = append(sub.Modes, ModeResult{Mode: string(m), Metrics: Mean(ms),
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
