package eval

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strings"
)

// Report is the outcome of one evaluation run.
type Report struct {
	Dataset string   `json:"dataset"`
	Dir     string   `json:"dir"`
	Backend string   `json:"backend"`
	Tenant  string   `json:"tenant"`
	Tools   int      `json:"tools"`
	Queries int      `json:"queries"`
	TopK    int      `json:"top_k"`
	Fusion  string   `json:"fusion"`
	Alpha   *float64 `json:"alpha,omitempty"`
	// NoReformulate: low-confidence queries were not reformulated.
	NoReformulate bool `json:"no_reformulate,omitempty"`
	// Examples says which search examples the cards carried ("" for
	// none): the file, and how many tools and phrases.
	Examples string `json:"examples,omitempty"`
	// WithoutExamples is the same evaluation with cards that carry no
	// search examples, when both were run (the report itself is the run
	// with them).
	WithoutExamples *Report  `json:"without_examples,omitempty"`
	Modes           []string `json:"modes"`
	// Conditions are what discoveries were given of each query: "query",
	// and "intents" / "query+intents" on datasets with intents.
	Conditions []string `json:"conditions"`
	// Subsets: "all", and "single" / "multi" (one need / several) when the
	// dataset has both kinds.
	Subsets        []Subset     `json:"subsets"`
	Tokens         *TokenReport `json:"tokens,omitempty"`
	TokensNote     string       `json:"tokens_note,omitempty"`
	SchemasDropped []string     `json:"schemas_dropped,omitempty"`
	Notes          []string     `json:"notes,omitempty"`
	// Abstention is the out-of-catalogue experiment (RunAbstention), one
	// report per condition, when it was run.
	Abstention []AbstentionReport `json:"abstention,omitempty"`
	Timing     Timing             `json:"timing"`
}

// Subset is the mean metrics of a set of queries, per mode.
type Subset struct {
	Name        string       `json:"name"`
	Description string       `json:"description"`
	Queries     int          `json:"queries"`
	Modes       []ModeResult `json:"modes"`
}

// ModeResult is one mode's mean metrics over a subset.
type ModeResult struct {
	Mode string `json:"mode"`
	// Condition is what the discoveries were given (see Condition).
	Condition string `json:"condition"`
	Metrics
	// MeanLatencyMS is the mean wall time of one discovery as the runner
	// saw it (with concurrent workers, so an upper bound of the unloaded
	// latency).
	MeanLatencyMS float64 `json:"mean_latency_ms"`
}

// Timing is where the run's time went, in seconds.
type Timing struct {
	RegisterSeconds float64 `json:"register_seconds"`
	QuerySeconds    float64 `json:"query_seconds"`
	TokenSeconds    float64 `json:"token_seconds"`
	TotalSeconds    float64 `json:"total_seconds"`
}

// Miss is a query that some mode did not fully answer within the top K.
type Miss struct {
	ID       string     `json:"id"`
	Query    string     `json:"query"`
	Expected [][]string `json:"expected_groups"`
	// Modes holds every mode run, missed or not, so they can be compared.
	Modes map[string]ModeMiss `json:"modes"`
}

// ModeMiss is what one mode returned for a missed query.
type ModeMiss struct {
	// Missed are the needs with no member in Returned.
	Missed [][]string `json:"missed"`
	// Found is the 1-based rank at which each need was met, 0 if not.
	Found []int `json:"found"`
	// Returned is the top K, best first.
	Returned []string `json:"returned"`
}

// Subset returns the named subset, or nil.
func (r *Report) Subset(name string) *Subset {
	for i := range r.Subsets {
		if r.Subsets[i].Name == name {
			return &r.Subsets[i]
		}
	}
	return nil
}

// WriteJSON writes the report as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(r)
}

// WriteMisses writes one JSON object a line per missed query.
func WriteMisses(w io.Writer, misses []Miss) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	for i := range misses {
		if err := enc.Encode(&misses[i]); err != nil {
			return err
		}
	}
	return nil
}

// WriteMarkdown writes the report as Markdown: a heading, the metrics table
// (every query; with split, one block of rows per subset), the single-need
// recall@5 line when the dataset mixes single- and multi-need queries and
// split is off, and the token savings.
// Recall5 is the recall@5 of one subset, condition and mode (NaN when the
// report has no such row).
func (r *Report) Recall5(subset, condition, mode string) float64 {
	if s := r.Subset(subset); s != nil {
		for _, m := range s.Modes {
			if m.Condition == condition && m.Mode == mode {
				return m.Recall5
			}
		}
	}
	return math.NaN()
}

func (r *Report) WriteMarkdown(w io.Writer, split bool) error {
	var b strings.Builder
	fmt.Fprintf(&b, "## %s: %d tools, %d queries\n\n", r.Dataset, r.Tools, r.Queries)
	fusion := r.Fusion
	if r.Alpha != nil {
		fusion += fmt.Sprintf(" (alpha %.2f)", *r.Alpha)
	}
	if r.NoReformulate {
		fusion += "; low-confidence reformulation off"
	}
	fmt.Fprintf(&b, "%s; tenant %s; fusion %s; misses judged at top %d.\n\n", r.Backend, r.Tenant, fusion, r.TopK)
	if r.Examples != "" {
		fmt.Fprintf(&b, "Search examples: %s.\n\n", r.Examples)
	}
	if r.WithoutExamples != nil {
		r.writeExamplesComparison(&b)
		b.WriteString("With search examples:\n\n")
	}
	if len(r.Subsets) > 0 {
		conds := len(r.Conditions) > 1
		if conds {
			b.WriteString("| queries | given | mode | recall@1 | recall@3 | recall@5 | recall@10 | MRR | nDCG@10 | ms/query |\n")
			b.WriteString("|---|---|---|---:|---:|---:|---:|---:|---:|---:|\n")
		} else {
			b.WriteString("| queries | mode | recall@1 | recall@3 | recall@5 | recall@10 | MRR | nDCG@10 | ms/query |\n")
			b.WriteString("|---|---|---:|---:|---:|---:|---:|---:|---:|\n")
		}
		for _, s := range r.Subsets {
			if !split && s.Name != "all" {
				continue
			}
			for _, m := range s.Modes {
				given := ""
				if conds {
					given = " " + m.Condition + " |"
				}
				fmt.Fprintf(&b, "| %s (%d) |%s %s | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f | %.1f |\n",
					s.Name, s.Queries, given, m.Mode, m.Recall1, m.Recall3, m.Recall5, m.Recall10, m.MRR, m.NDCG10, m.MeanLatencyMS)
			}
		}
		if single := r.Subset("single"); single != nil && !split {
			var parts []string
			for _, m := range single.Modes {
				if m.Condition == "" || m.Condition == string(CondQuery) {
					parts = append(parts, fmt.Sprintf("%s %.3f", m.Mode, m.Recall5))
				}
			}
			fmt.Fprintf(&b, "\nSingle-need queries (%d): recall@5 %s (all subsets: --split).\n", single.Queries, strings.Join(parts, ", "))
		}
	} else {
		b.WriteString("No labelled queries: retrieval quality not measured.\n")
	}
	b.WriteString("\n")
	if t := r.Tokens; t != nil {
		fmt.Fprintf(&b, "Token savings (%s, %d tools, %d with input schemas): the whole catalogue shipped up front is %d tokens (%.0f a tool; the service's bytes/4 estimate says %d).\n\n",
			t.Encoding, t.Tools, t.ToolsWithSchema, t.CatalogTokens, t.MeanToolTokens, t.ApproxCatalogTokens)
		b.WriteString("| shortlist | tokens | whole catalogue | saved | smaller by | from |\n|---|---:|---:|---:|---:|---|\n")
		for _, s := range t.Shortlists {
			fmt.Fprintf(&b, "| top %d | %.0f | %d | %.1f%% | %.0f× | %s |\n", s.K, s.Tokens, t.CatalogTokens, 100*s.Saved, s.Factor, s.Source)
		}
		b.WriteString("\n")
	} else if r.TokensNote != "" {
		fmt.Fprintf(&b, "Token savings: %s.\n\n", r.TokensNote)
	}
	for _, a := range r.Abstention {
		fmt.Fprintf(&b, "Abstention (given %s): half the servers or tools removed, %d tools kept; %d in-catalogue and %d out-of-catalogue queries. Each threshold is the requests' min_confidence (default %.2f): a query abstains when its answer is empty.\n\n",
			a.Condition, a.ToolsKept, a.InCatalogue, a.OutOfCatalogue, a.Default)
		b.WriteString("| min confidence | abstention precision | abstention recall | in-catalogue abstained | in-catalogue recall@5 | tools left for out-of-catalogue (top 5) |\n|---:|---:|---:|---:|---:|---:|\n")
		for _, row := range a.Rows {
			mark := ""
			if row.Threshold == a.Default {
				mark = " (default)"
			}
			fmt.Fprintf(&b, "| %.2f%s | %.3f | %.3f | %d | %.3f | %.2f |\n", row.Threshold, mark, row.Precision, row.Recall, row.FalseAbstentions, row.InRecall5, row.OutTools)
		}
		b.WriteString("\n")
	}
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "Note: %s.\n", n)
	}
	fmt.Fprintf(&b, "Time: %.1f s (register %.1f s, %d×%d discoveries %.1f s, tokens %.1f s).\n",
		r.Timing.TotalSeconds, r.Timing.RegisterSeconds, r.Queries, len(r.Modes)*max(1, len(r.Conditions)), r.Timing.QuerySeconds, r.Timing.TokenSeconds)
	_, err := io.WriteString(w, b.String())
	return err
}

// writeExamplesComparison writes every query's metrics without and with
// search examples side by side, per condition and mode, and the
// single-need recall@5 the same way.
func (r *Report) writeExamplesComparison(b *strings.Builder) {
	base := r.WithoutExamples
	b.WriteString("Without → with search examples (every query):\n\n")
	b.WriteString("| given | mode | recall@1 | recall@5 | recall@10 | MRR | nDCG@10 |\n|---|---|---|---|---|---|---|\n")
	cell := func(x, y float64) string { return fmt.Sprintf("%.3f → %.3f", x, y) }
	rows := func(name string, line func(m, w ModeResult)) {
		with, without := r.Subset(name), base.Subset(name)
		if with == nil || without == nil {
			return
		}
		for _, m := range with.Modes {
			for _, w := range without.Modes {
				if w.Mode == m.Mode && w.Condition == m.Condition {
					line(m, w)
				}
			}
		}
	}
	rows("all", func(m, w ModeResult) {
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s | %s |\n", cmp.Or(m.Condition, string(CondQuery)), m.Mode,
			cell(w.Recall1, m.Recall1), cell(w.Recall5, m.Recall5), cell(w.Recall10, m.Recall10), cell(w.MRR, m.MRR), cell(w.NDCG10, m.NDCG10))
	})
	var parts []string
	rows("single", func(m, w ModeResult) {
		if m.Condition == "" || m.Condition == string(CondQuery) {
			parts = append(parts, fmt.Sprintf("%s %s", m.Mode, cell(w.Recall5, m.Recall5)))
		}
	})
	if len(parts) > 0 {
		fmt.Fprintf(b, "\nSingle-need queries (%d): recall@5 %s.\n", r.Subset("single").Queries, strings.Join(parts, ", "))
	}
	b.WriteString("\n")
}
