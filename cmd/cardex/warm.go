package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/seed0cff8200/cardex/cards"
	"github.com/seed0cff8200/cardex/embed"
	"github.com/seed0cff8200/cardex/eval"
	"github.com/seed0cff8200/cardex/internal/telemetry/feedback"
	"github.com/seed0cff8200/cardex/retriever"
)

// warmPhase is one state an evaluation with learning is measured in.
type warmPhase struct {
	name                  string
	phrasings, companions bool // which lessons are replayed
	cold                  bool // nothing replayed
	pins                  bool // the hot tools pinned too
	guarded               bool // through the guard, the training queries its labelled set
}

// warmPhases are the states --warm and --warm-from measure: cold, each
// lesson alone, and both.
var warmPhases = []warmPhase{
	{name: "cold", cold: true},
	{name: "warm: learned phrasings", phrasings: true},
	{name: "warm: companions", companions: true},
	{name: "warm: phrasings + companions", phrasings: true, companions: true},
	{name: "warm: both + top pins", phrasings: true, companions: true, pins: true},
	{name: "warm: both, guarded", phrasings: true, companions: true, guarded: true},
}

// guardedBy sends a replay's lessons through the service's guard, with the
// training queries as the tenant's labelled set (what a tenant's reviewed
// `cardex eval --from-log` rows are); held counts what it held back.
func guardedBy(train []eval.Query, tenant string, emb embed.Embedder, ropts []retriever.Option, held *int) func(*retriever.Retriever, cards.Store) (eval.Learning, func() error) {
	return func(r *retriever.Retriever, st cards.Store) (eval.Learning, func() error) {
		var set []feedback.LabelledQuery
		for _, q := range train {
			lq := feedback.LabelledQuery{ID: q.ID, Tenant: tenant, Query: q.Query, Intents: q.Intents}
			for _, n := range q.Needs() {
				lq.Expected = append(lq.Expected, n[0])
			}
			set = append(set, lq)
		}
		g := feedback.NewGuard(feedback.GuardConfig{Target: r, Store: st, Embedder: emb, Options: ropts,
			Sets: map[string][]feedback.LabelledQuery{tenant: set}})
		return g, func() error {
			err := g.Close()
			*held = len(g.Held())
			return err
		}
	}
}

// hotLabels are the labels of the lessons' n most used tools (each
// lesson's tools, its session or its phrasings' tools, count one use), and
// how many of them `cardex serve --auto-pin-hot` would pin (the thresholds
// of feedback.IsCandidate). The measurement pins all n, thresholds or not,
// to show what pinning the hottest tools does to an answer.
func hotLabels(lessons []eval.Lesson, n int) ([]string, int) {
	hot := feedback.NewHot()
	now := time.Now()
	for _, l := range lessons {
		used := l.Used
		if len(used) == 0 {
			for _, p := range l.Phrasings {
				used = append(used, p.Label)
			}
		}
		for _, label := range used {
			hot.Add("eval", "", feedback.Tool{Name: label}, now)
		}
	}
	var out []string
	top := hot.Tenant("eval", now)
	for _, t := range top[:min(n, len(top))] {
		out = append(out, t.Name)
	}
	return out, len(feedback.Candidates(top, n))
}

// warmLessons returns the queries to measure and the lessons to replay:
// with --warm the dataset's two halves; with --warm-from a folder, the
// other set's queries (every query of d measured); with --warm-from a
// file, a feedback log's outcomes.
func warmLessons(d *eval.Dataset, halves bool, from, tenant string) (*eval.Dataset, []eval.Lesson, string, error) {
	test := *d
	if halves {
		train, measured := eval.SplitQueries(d.Queries)
		test.Queries = measured
		return &test, eval.QueryLessons(train), fmt.Sprintf("the outcomes of %d training queries (the other half) replayed", len(train)), nil
	}
	st, err := os.Stat(from)
	if err != nil {
		return nil, nil, "", fmt.Errorf("--warm-from: %w", err)
	}
	if st.IsDir() {
		other, err := eval.Load(from)
		if err != nil {
			return nil, nil, "", fmt.Errorf("--warm-from: %w", err)
		}
		if len(other.Queries) == 0 {
			return nil, nil, "", fmt.Errorf("--warm-from %s: no labelled queries to replay", from)
		}
		labels := map[string]bool{}
		for _, t := range d.Tools {
			labels[t.Name] = true
		}
		for _, q := range other.Queries {
			for _, n := range q.Needs() {
				if !labels[n[0]] {
					return nil, nil, "", fmt.Errorf("--warm-from %s: query %s needs %q, which %s does not have (the sets must share a catalogue)", from, q.ID, n[0], d.Name)
				}
			}
		}
		return &test, eval.QueryLessons(other.Queries), fmt.Sprintf("the outcomes of %d queries of %s replayed", len(other.Queries), from), nil
	}
	events, err := feedback.ReadEvents(from)
	if err != nil {
		return nil, nil, "", fmt.Errorf("--warm-from: %w", err)
	}
	lessons, what, err := logLessons(d, events, tenant)
	if err != nil {
		return nil, nil, "", fmt.Errorf("--warm-from %s: %w", from, err)
	}
	return &test, lessons, what + " of " + from + " replayed", nil
}

// labelledOf is the labelled set the guard of a --warm-guard replay holds:
// the replayed queries (the training half, or the other set's).
func labelledOf(d *eval.Dataset, halves bool, from string) ([]eval.Query, error) {
	if halves {
		train, _ := eval.SplitQueries(d.Queries)
		return train, nil
	}
	if st, err := os.Stat(from); err != nil || !st.IsDir() {
		return nil, fmt.Errorf("--warm-guard needs labelled queries to guard with: --warm, or --warm-from a folder")
	}
	other, err := eval.Load(from)
	if err != nil {
		return nil, err
	}
	return other.Queries, nil
}

// logLessons turns a feedback log's outcomes into lessons over d's
// catalogue: each used tool learns the outcome's query (when the log kept
// it in clear), and the tools of each session (or turn) are its co-usage,
// grouped as the service groups them. Tools d does not have are left out
// and counted.
func logLessons(d *eval.Dataset, events []feedback.Event, tenant string) ([]eval.Lesson, string, error) {
	cat, err := eval.NewCatalog(d, "eval")
	if err != nil {
		return nil, "", err
	}
	tenants := map[string]bool{}
	var kept []feedback.Event
	for _, e := range events {
		if e.Type != feedback.TypeOutcome || e.Tool == nil || (tenant != "" && e.Tenant != tenant) {
			continue
		}
		tenants[e.Tenant] = true
		kept = append(kept, e)
	}
	if len(tenants) > 1 {
		var ts []string
		for t := range tenants {
			ts = append(ts, t)
		}
		return nil, "", fmt.Errorf("outcomes of %d tenants (%s): name one with --warm-tenant", len(ts), strings.Join(ts, ", "))
	}
	if len(kept) == 0 {
		return nil, "", fmt.Errorf("no outcome naming a used tool")
	}
	var lessons []eval.Lesson
	unknown, hashed := 0, 0
	for _, e := range kept {
		label := cat.Label(e.Tool.Server, e.Tool.Name)
		switch {
		case label == "":
			unknown++
		case e.Query == "":
			hashed++
		default:
			lessons = append(lessons, eval.Lesson{Source: "outcome of discovery " + e.DiscoveryID, Phrasings: []eval.Phrasing{{Label: label, Text: e.Query}}})
		}
	}
	sessions := 0
	for _, u := range feedback.CoUsesFromEvents(kept) {
		l := eval.Lesson{Source: "a session of the log"}
		for _, k := range u.Tools {
			if label := cat.Label(k.Server, k.Name); label != "" {
				l.Used = append(l.Used, label)
			}
		}
		if len(l.Used) >= 2 {
			lessons = append(lessons, l)
			sessions++
		}
	}
	what := fmt.Sprintf("%d outcomes (%d sessions of two or more tools)", len(kept), sessions)
	if unknown > 0 {
		what += fmt.Sprintf("; %d naming tools this catalogue lacks were left out", unknown)
	}
	if hashed > 0 {
		what += fmt.Sprintf("; %d taught no phrasing (their queries were logged hashed)", hashed)
	}
	return lessons, what, nil
}

// runWarm measures the dataset's queries cold and after replaying the
// lessons (learned phrasings, co-usage, both), then prints the hybrid
// recall@5 of every phase side by side.
func runWarm(cmd *cobra.Command, d *eval.Dataset, lessons []eval.Lesson, what string, emb embed.Embedder, ropts []retriever.Option, o eval.Options, split bool, pins int, guardSet []eval.Query) error {
	fmt.Fprintf(os.Stderr, "eval %s: %s, %d queries measured\n", d.Name, what, len(d.Queries))
	hot, qualify := hotLabels(lessons, pins)
	var reps []*eval.Report
	var phases []warmPhase
	for _, ph := range warmPhases {
		if ph.pins && pins == 0 || ph.guarded && guardSet == nil {
			continue
		}
		phases = append(phases, ph)
	}
	held := 0
	for _, ph := range phases {
		b := eval.NewInProcess(emb, ropts...)
		var backend eval.Backend = b
		var w *eval.Warm
		if !ph.cold {
			w = eval.NewWarm(b, lessons)
			w.NoPhrasings, w.NoCompanions = !ph.phrasings, !ph.companions
			if ph.pins {
				w.Pins = hot
			}
			if ph.guarded {
				tenant := o.Tenant
				if tenant == "" {
					tenant = "eval-" + d.Name
				}
				w.Through = guardedBy(guardSet, tenant, emb, ropts, &held)
			}
			backend = w
		}
		rep, _, err := eval.Run(cmd.Context(), d, backend, o)
		backend.Close()
		if err != nil {
			return err
		}
		fmt.Printf("### %s: %d queries", ph.name, len(d.Queries))
		if w != nil {
			fmt.Printf(", after %s (%d learned phrasings, %d sessions of co-usage)", what, w.Learned, w.CoUses)
		}
		if ph.guarded {
			fmt.Printf("; through the guard with those %d queries as the labelled set: %d changes held back", len(guardSet), held)
		}
		if ph.pins {
			fmt.Printf("; pinned first in every answer, the %d most used: %s (%d of them used often enough for --auto-pin-hot)", len(hot), strings.Join(hot, ", "), qualify)
		}
		fmt.Print("\n\n")
		if err := rep.WriteMarkdown(os.Stdout, split); err != nil {
			return err
		}
		fmt.Println()
		reps = append(reps, rep)
	}
	return writeWarmSummary(os.Stdout, phases, reps)
}

// writeWarmSummary prints the hybrid recall@5 of each phase per subset
// and condition.
func writeWarmSummary(w io.Writer, phases []warmPhase, reps []*eval.Report) error {
	var b strings.Builder
	b.WriteString("### Summary: hybrid recall@5\n\n| queries | given |")
	for _, ph := range phases {
		b.WriteString(" " + ph.name + " |")
	}
	b.WriteString("\n|---|---|" + strings.Repeat("---:|", len(reps)) + "\n")
	for _, s := range reps[0].Subsets {
		for _, m := range s.Modes {
			if m.Mode != string(retriever.ModeHybrid) {
				continue
			}
			fmt.Fprintf(&b, "| %s (%d) | %s |", s.Name, s.Queries, m.Condition)
			for _, r := range reps {
				fmt.Fprintf(&b, " %.3f |", r.Recall5(s.Name, m.Condition, m.Mode))
			}
			b.WriteString("\n")
		}
	}
	b.WriteString("\n")
	_, err := io.WriteString(w, b.String())
	return err
}
