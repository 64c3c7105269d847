package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"

	"github.com/seed0cff8200/cardex/embed"
	"github.com/seed0cff8200/cardex/eval"
	"github.com/seed0cff8200/cardex/internal/ops/evalremote"
	"github.com/seed0cff8200/cardex/internal/telemetry/feedback"
	"github.com/seed0cff8200/cardex/retriever"
)

func evalCmd() *cobra.Command {
	var tlsf tlsClientFlags
	var (
		addr, token, out, misses, fusion, encoding, tenant string
		fromLog, examples                                  string
		topK, workers                                      int
		alpha, serverPrior, serverBoost, queryContext      float64
		decompose, noCollapse, strictAlternatives          bool
		split, noReformulate, warm, fitConfidence          bool
		warmFrom, warmTenant                               string
		hotPins                                            int
		warmGuard                                          bool
		noAbstention                                       bool
		ef                                                 embedderFlags
		timeout                                            time.Duration
	)
	cmd := &cobra.Command{
		Use:   "eval DIR | --from-log FEEDBACK.jsonl",
		Short: "Measure recall@K, MRR, nDCG@10 and token savings on a labelled dataset (tools.jsonl, queries.jsonl)",
		Long: `Loads a dataset folder (tools.jsonl and, optionally, queries.jsonl with expected_groups),
registers the tools as cards of one tenant (with the search examples of the folder's
examples.jsonl, or of --examples FILE, and also without them, side by side), runs every query in the lexical-only, semantic-only
and hybrid modes side by side, and prints a Markdown table of recall@1/3/5/10, MRR and nDCG@10
(a need is met when any tool of its group is retrieved) and the token savings of the shortlist
against shipping every tool definition up front, counted with a BPE tokenizer whose vocabulary
is built in. Queries that miss a need in the top K are written to --misses (JSON Lines), the
whole report to --out (JSON). Progress goes to stderr.

By default it runs in-process on a fresh embedded store in a temporary directory, with the
default configuration of 'cardex serve' (the --embedder flags choose another embedder). With --addr it registers the cards in tenant
eval-<dataset> of a running server (deleting that tenant's other cards) and asks
DiscoverTools; the API has no mode switch, so only the server's hybrid pipeline is measured.
Its discoveries are marked as an evaluation's: the server answers them like any other (same
authorization and limits) but keeps them out of its discovery and feedback logs and its discovery
metrics, and records each in its audit trail; it takes that mark only from a credential of role
admin (--token), or from anyone when it takes no credential at all. Calls the server's rate
limits refuse are made again after the delay it asks for.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if fromLog != "" {
				return cobra.NoArgs(cmd, args)
			}
			if fitConfidence {
				return cobra.MinimumNArgs(1)(cmd, args)
			}
			return cobra.ExactArgs(1)(cmd, args)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if fromLog != "" {
				return reviewFromLog(fromLog, cmd.OutOrStdout(), cmd.ErrOrStderr())
			}
			if fitConfidence {
				return runFitConfidence(cmd, args, &ef)
			}
			d, err := eval.Load(args[0])
			if err != nil {
				return err
			}
			switch examples {
			case "":
			case "none":
				d = d.WithoutExamples()
			default:
				if err := d.LoadExamples(examples); err != nil {
					return err
				}
			}
			tk, err := eval.NewBPE(encoding)
			if err != nil {
				return err
			}
			if warm || warmFrom != "" {
				if addr != "" {
					return fmt.Errorf("--warm and --warm-from run in-process (they replay outcomes into a fresh store); drop --addr")
				}
				if warm && warmFrom != "" {
					return fmt.Errorf("--warm splits the dataset's own queries; --warm-from replays another set's: give one")
				}
				if warm && len(d.Queries) < 2 {
					return fmt.Errorf("--warm needs labelled queries to split into training and test halves")
				}
				if len(d.Queries) == 0 {
					return fmt.Errorf("--warm-from needs labelled queries in %s to measure", args[0])
				}
			}
			var backend eval.Backend
			var ropts []retriever.Option
			var emb embed.Embedder
			if addr != "" {
				for _, name := range []string{"no-reformulate", "embedder", "embed-url", "embed-model", "embed-dim", "server-prior", "server-boost", "query-context", "decompose", "no-collapse", "fit-confidence"} {
					if cmd.Flags().Changed(name) {
						return fmt.Errorf("--%s is for in-process runs; with --addr the server's own configuration is measured", name)
					}
				}
				creds, err := tlsf.creds()
				if err != nil {
					return err
				}
				r, err := evalremote.Dial(addr, evalremote.Options{Token: token, Timeout: timeout, Creds: creds,
					Interceptors: []grpc.UnaryClientInterceptor{explainer(addr, "--token (CARDEX_TOKEN): a token of role admin", creds.Info().SecurityProtocol == "tls")}})
				if err != nil {
					return err
				}
				defer func() {
					if n, d := r.Waits.Count(); n > 0 {
						fmt.Fprintf(os.Stderr, "eval: waited out %d rate-limit refusals of the server (%s in all)\n", n, d.Round(time.Millisecond))
					}
				}()
				backend = r
			} else {
				emb, err = ef.build(cmd.Context(), newLogger("warn"))
				if err != nil {
					return err
				}
				if c, ok := emb.(io.Closer); ok {
					defer c.Close()
				}
				if cmd.Flags().Changed("server-prior") {
					ropts = append(ropts, retriever.WithServerPrior(serverPrior))
				}
				if cmd.Flags().Changed("server-boost") {
					ropts = append(ropts, retriever.WithServerBoost(serverBoost))
				}
				if cmd.Flags().Changed("query-context") {
					ropts = append(ropts, retriever.WithQueryContext(queryContext))
				}
				if decompose {
					ropts = append(ropts, retriever.WithDecompose(true))
				}
				if noCollapse {
					ropts = append(ropts, retriever.WithCollapse(false))
				}
				backend = eval.NewInProcess(emb, ropts...)
				if warm || warmFrom != "" {
					o := eval.Options{TopK: topK, Fusion: fusion, Tenant: tenant, Workers: workers, NoReformulate: noReformulate,
						Alpha: alpha, AlphaSet: cmd.Flags().Changed("alpha")}
					test, lessons, what, err := warmLessons(d, warm, warmFrom, warmTenant)
					if err != nil {
						return err
					}
					var guardSet []eval.Query
					if warmGuard {
						if guardSet, err = labelledOf(d, warm, warmFrom); err != nil {
							return err
						}
					}
					return runWarm(cmd, test, lessons, what, emb, ropts, o, split, hotPins, guardSet)
				}
			}
			defer backend.Close()
			o := eval.Options{TopK: topK, Fusion: fusion, Tenant: tenant, Tokenizer: tk, Workers: workers, NoReformulate: noReformulate,
				StrictAlternatives: strictAlternatives}
			if cmd.Flags().Changed("alpha") {
				o.Alpha, o.AlphaSet = alpha, true
			}
			total := len(d.Queries) * len(backend.Modes())
			fmt.Fprintf(os.Stderr, "eval %s: %d tools, %d queries, %d discoveries (%s)\n",
				d.Name, len(d.Tools), len(d.Queries), total, backend.Describe())
			var without *eval.Report
			if d.Examples != nil && len(d.Queries) > 0 {
				// The same run without the examples first, on a backend
				// of its own (an in-process one registers once).
				fmt.Fprintf(os.Stderr, "without search examples:\n")
				wb := backend
				if addr == "" {
					wb = eval.NewInProcess(emb, ropts...)
					defer wb.Close()
				}
				p := newEvalProgress(os.Stderr, "discoveries")
				o.Progress = p.update
				without, _, err = eval.Run(cmd.Context(), d.WithoutExamples(), wb, o)
				p.finish()
				if err != nil {
					return err
				}
				fmt.Fprintf(os.Stderr, "with search examples (%s):\n", d.ExamplesFile)
			}
			p := newEvalProgress(os.Stderr, "discoveries")
			o.Progress = p.update
			rep, ms, err := eval.Run(cmd.Context(), d, backend, o)
			p.finish()
			if err != nil {
				return err
			}
			rep.WithoutExamples = without
			if r, ok := backend.(*evalremote.Remote); ok && r.Removed > 0 {
				rep.Notes = append(rep.Notes, fmt.Sprintf("%d stale cards of tenant %s were deleted from the server", r.Removed, rep.Tenant))
			}
			if _, inProcess := backend.(*eval.InProcess); inProcess && !noAbstention && len(d.Queries) > 0 {
				emb, err := ef.build(cmd.Context(), newLogger("warn"))
				if err != nil {
					return err
				}
				ab := eval.NewInProcess(emb, ropts...)
				rep.Abstention, err = eval.RunAbstention(cmd.Context(), d, ab, retriever.DefaultMinConfidence)
				ab.Close()
				if c, ok := emb.(io.Closer); ok {
					c.Close()
				}
				if err != nil {
					rep.Notes = append(rep.Notes, "abstention not measured: "+err.Error())
				}
			}
			if err := rep.WriteMarkdown(os.Stdout, split); err != nil {
				return err
			}
			out = strings.ReplaceAll(out, "{dataset}", d.Name)
			misses = strings.ReplaceAll(misses, "{dataset}", d.Name)
			if out != "" {
				if err := writeFile(out, rep.WriteJSON); err != nil {
					return err
				}
				fmt.Fprintf(os.Stderr, "report: %s\n", out)
			}
			if misses != "" {
				if err := writeFile(misses, func(w io.Writer) error { return eval.WriteMisses(w, ms) }); err != nil {
					return err
				}
				fmt.Fprintf(os.Stderr, "misses: %s (%d queries)\n", misses, len(ms))
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&addr, "addr", "", "run against the cardex server at this address (default: in-process on a temporary embedded store)")
	f.StringVar(&token, "catalog-token", os.Getenv("CARDEX_CATALOG_TOKEN"), "with --addr: the same as --token (env CARDEX_CATALOG_TOKEN)")
	f.StringVar(&token, "token", envOr("CARDEX_TOKEN", os.Getenv("CARDEX_CATALOG_TOKEN")), "with --addr: a service token of role admin, if the server asks for one: eval writes the dataset's cards and discovers, marked as an evaluation (env CARDEX_TOKEN)")
	tlsf.register(cmd)
	f.DurationVar(&timeout, "timeout", 30*time.Second, "per-call timeout with --addr")
	f.StringVar(&tenant, "tenant", "", "tenant to register the cards under (default eval-<dataset>)")
	f.IntVar(&topK, "top-k", eval.DefaultTopK, fmt.Sprintf("shortlist depth at which a need counts as missed (1..%d; metrics always look at the top 10)", retriever.MaxTopK))
	f.StringVar(&out, "out", filepath.Join(evalDir, "eval-{dataset}.json"), "JSON report file ({dataset} is replaced; empty: none)")
	f.StringVar(&misses, "misses", filepath.Join(evalDir, "eval-{dataset}-misses.jsonl"), "missed queries, JSON Lines ({dataset} is replaced; empty: none)")
	f.BoolVar(&split, "split", false, "table rows per subset: all, single-need and multi-need queries")
	f.StringVar(&fusion, "fusion", "", "relative (default; relative-score fusion with --alpha) or rrf (reciprocal rank fusion, k = 60)")
	f.Float64Var(&alpha, "alpha", retriever.DefaultAlpha, "semantic weight for --fusion relative (0..1)")
	f.StringVar(&encoding, "encoding", eval.DefaultEncoding, "BPE vocabulary for token counts: "+strings.Join(eval.Encodings, " or "))
	f.IntVar(&workers, "workers", 0, "concurrent discoveries (default: one per CPU)")
	f.StringVar(&examples, "examples", "", "search examples to register on the cards ({\"name\", \"examples\"} a line; default: the dataset's examples.jsonl when it has one; none: no examples). With examples, the report shows every metric without and with them")
	f.StringVar(&fromLog, "from-log", "", "instead of evaluating: turn the misses recorded in a feedback log (DATA_DIR/feedback.jsonl) into queries.jsonl rows on stdout, for a person to review")
	f.Float64Var(&serverPrior, "server-prior", retriever.DefaultServerPrior, "in-process: weight of a server's best tool as evidence for its other tools (0: off)")
	f.Float64Var(&serverBoost, "server-boost", retriever.DefaultServerBoost, "in-process: weight of server-entry matches (servers.jsonl) as evidence for a server's tools (0: off)")
	f.Float64Var(&queryContext, "query-context", retriever.DefaultQueryContext, "in-process: weight of the query in each intent's ranking (0: intents ranked alone)")
	f.BoolVar(&decompose, "decompose", false, "in-process: split a query-only request into its parts (sentences, \"then\", \"and\") and rank them like intents")
	f.BoolVar(&noCollapse, "no-collapse", false, "in-process: do not collapse near-duplicate tools into one slot")
	f.BoolVar(&strictAlternatives, "strict-alternatives", false, "score a slot by its tool alone, not by the near-duplicates it names as alternatives")
	f.BoolVar(&warm, "warm", false, "cold vs warm: split the queries in two fixed halves, replay the outcomes of one (learned phrasings, co-usage), measure the other")
	f.StringVar(&warmFrom, "warm-from", "", "cold vs warm: replay the outcomes of another labelled set of the same catalogue (a folder with queries.jsonl) or of a real feedback log (FEEDBACK.jsonl), then measure this dataset's queries")
	f.IntVar(&hotPins, "hot-pins", 3, "with --warm or --warm-from: also measure with the replay's N most used tools pinned first in every answer (what serve --auto-pin-hot does with the ones used often enough; 0: not)")
	f.BoolVar(&warmGuard, "warm-guard", false, "with --warm or --warm-from DIR: also measure the replay sent through the guard of serve --labelled-queries, the replayed queries as the labelled set (slow: every change is evaluated in two shadows)")
	f.StringVar(&warmTenant, "warm-tenant", "", "with --warm-from FEEDBACK.jsonl: replay only this tenant's outcomes (needed when the log holds several)")
	f.BoolVar(&fitConfidence, "fit-confidence", false, "instead of evaluating: fit the confidence model (logistic, each dataset weighted equally) on the labelled datasets DIR... with the current embedder, and print it with its calibration")
	f.BoolVar(&noAbstention, "no-abstention", false, "in-process: skip the out-of-catalogue (abstention) experiment")
	f.BoolVar(&noReformulate, "no-reformulate", false, "do not reformulate low-confidence queries (the service does by default), to measure what that does")
	ef.register(cmd)
	return cmd
}

// evalDir holds the reports of runs that name no file: in the system's
// temporary directory, so that a run from a clone leaves nothing behind.
var evalDir = filepath.Join(os.TempDir(), "cardex-eval")

// writeFile writes through fn to path (creating its directory), atomically
// enough for a report: a temporary file renamed into place.
func writeFile(path string, fn func(io.Writer) error) error {
	if dir := filepath.Dir(path); dir != "." {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".eval-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := fn(tmp); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// evalProgress reports n of total on w: a redrawn bar when w is a terminal,
// otherwise a plain line every 10% (and at most every 5 seconds apart
// beyond that), so logs of a CI run stay readable.
type evalProgress struct {
	w        io.Writer
	what     string
	tty      bool
	start    time.Time
	lastDraw time.Time
	lastPct  int
	drawn    bool
}

func newEvalProgress(f *os.File, what string) *evalProgress {
	tty := false
	if st, err := f.Stat(); err == nil {
		tty = st.Mode()&os.ModeCharDevice != 0
	}
	return &evalProgress{w: f, what: what, tty: tty, start: time.Now(), lastPct: -1}
}

func (p *evalProgress) update(done, total int) {
	if total <= 0 {
		return
	}
	now := time.Now()
	pct := done * 100 / total
	if p.tty {
		if done != total && now.Sub(p.lastDraw) < 100*time.Millisecond {
			return
		}
		const width = 30
		fill := done * width / total
		fmt.Fprintf(p.w, "\r[%s%s] %d/%d %s %3d%% %.1fs", strings.Repeat("#", fill), strings.Repeat(".", width-fill),
			done, total, p.what, pct, now.Sub(p.start).Seconds())
		p.lastDraw, p.drawn = now, true
		return
	}
	if pct/10 == p.lastPct/10 && now.Sub(p.lastDraw) < 5*time.Second && done != total {
		return
	}
	if pct == p.lastPct && done != total {
		return
	}
	fmt.Fprintf(p.w, "%d/%d %s (%d%%, %.1fs)\n", done, total, p.what, pct, now.Sub(p.start).Seconds())
	p.lastDraw, p.lastPct = now, pct
}

func (p *evalProgress) finish() {
	if p.tty && p.drawn {
		fmt.Fprintln(p.w)
	}
}

// reviewFromLog writes recorded misses as queries.jsonl rows to stdout.
func reviewFromLog(path string, stdout, stderr io.Writer) error {
	events, err := feedback.ReadEvents(path)
	if err != nil {
		return err
	}
	rows, skipped := feedback.ReviewQueries(events)
	enc := json.NewEncoder(stdout)
	enc.SetEscapeHTML(false)
	for _, r := range rows {
		if err := enc.Encode(r); err != nil {
			return err
		}
	}
	fmt.Fprintf(stderr, "%d events, %d queries to review", len(events), len(rows))
	if skipped > 0 {
		fmt.Fprintf(stderr, ", %d misses skipped (their queries were logged hashed or not at all)", skipped)
	}
	fmt.Fprintln(stderr, "; rows without expected tools need a reviewer to name them")
	return nil
}

// runFitConfidence fits the confidence model on labelled datasets and prints
// it with the calibration of the current and the fitted model.
func runFitConfidence(cmd *cobra.Command, dirs []string, ef *embedderFlags) error {
	emb, err := ef.build(cmd.Context(), newLogger("warn"))
	if err != nil {
		return err
	}
	if c, ok := emb.(io.Closer); ok {
		defer c.Close()
	}
	var sets [][]eval.ConfidenceSample
	var names []string
	for _, dir := range dirs {
		d, err := eval.Load(dir)
		if err != nil {
			return err
		}
		if len(d.Queries) == 0 {
			return fmt.Errorf("%s: no labelled queries to fit on", dir)
		}
		cat, err := eval.NewCatalog(d, "eval-"+d.Name)
		if err != nil {
			return err
		}
		b := eval.NewInProcess(emb)
		if err := b.Register(cmd.Context(), cat); err != nil {
			b.Close()
			return err
		}
		fmt.Fprintf(os.Stderr, "fit-confidence: %s: %d queries\n", d.Name, len(d.Queries))
		s, err := eval.ConfidenceSamples(cmd.Context(), d, b, cat, eval.MetricDepth)
		b.Close()
		if err != nil {
			return err
		}
		sets = append(sets, s)
		names = append(names, d.Name)
	}
	m, err := eval.FitConfidence(sets)
	if err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	fmt.Fprintf(out, "Fitted on %s with %s (each dataset weighted equally):\n\n", strings.Join(names, ", "), emb.Model())
	fmt.Fprintf(out, "retriever.ConfidenceModel{Bias: %.3f, Evidence: %.3f, Cosine: %.3f, Fused: %.3f, InvPosition: %.3f}\n\n",
		m.Bias, m.Evidence, m.Cosine, m.Fused, m.InvPosition)
	d := retriever.DefaultConfidenceModel
	fmt.Fprintf(out, "Built-in default: {Bias: %.3f, Evidence: %.3f, Cosine: %.3f, Fused: %.3f, InvPosition: %.3f}\n\n",
		d.Bias, d.Evidence, d.Cosine, d.Fused, d.InvPosition)
	for i, set := range sets {
		for _, mm := range []struct {
			name  string
			model retriever.ConfidenceModel
		}{{"default", d}, {"fitted", m}} {
			rel := eval.Calibration(mm.model, set)
			fmt.Fprintf(out, "%s, %s model: %d ranked tools, expected calibration error %.3f\n\n", names[i], mm.name, len(set), rel.ECE)
			fmt.Fprintln(out, "| confidence | tools | mean confidence | share relevant |\n|---|---:|---:|---:|")
			for _, b := range rel.Bins {
				fmt.Fprintf(out, "| %.2f–%.2f | %d | %.3f | %.3f |\n", b.Lo, b.Hi, b.Samples, b.Predicted, b.Observed)
			}
			fmt.Fprintln(out)
		}
	}
	return nil
}
