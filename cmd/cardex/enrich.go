package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"sigs.k8s.io/yaml"

	"github.com/seed0cff8200/cardex/cards"
	"github.com/seed0cff8200/cardex/embed/apiclient"
	"github.com/seed0cff8200/cardex/internal/codec/apiconv"
	"github.com/seed0cff8200/cardex/internal/postgres/leader"
	"github.com/seed0cff8200/cardex/internal/sources/enrich"
	"github.com/seed0cff8200/cardex/internal/telemetry/metrics"
	pb "github.com/seed0cff8200/cardex/proto/cardex/v1"
)

// llmFlags choose the chat model that writes search examples; enrich and
// import --enrich share them.
type llmFlags struct {
	url, model, cacheDir string
	stream, noCache      bool
	timeout              time.Duration
	retries              int
	phrases, concurrency int
}

func (f *llmFlags) register(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.StringVar(&f.url, "llm-url", os.Getenv("CARDEX_LLM_URL"),
		"base URL of an OpenAI-compatible chat server, e.g. https://api.openai.com/v1 or http://localhost:11434/v1 (env CARDEX_LLM_URL); the API key is read from CARDEX_LLM_API_KEY or OPENAI_API_KEY")
	fs.StringVar(&f.model, "llm-model", os.Getenv("CARDEX_LLM_MODEL"), "the chat model, e.g. gpt-4o-mini or llama3.1 (env CARDEX_LLM_MODEL)")
	fs.BoolVar(&f.stream, "llm-stream", false, "ask for streamed answers (server-sent events)")
	fs.DurationVar(&f.timeout, "llm-timeout", enrich.DefaultChatTimeout, "timeout of one model answer (retried on timeouts, 429 and 5xx)")
	fs.IntVar(&f.retries, "llm-retries", apiclient.DefaultMaxRetries, "retries of one model request after a timeout, 429 or 5xx (0: none)")
	fs.IntVar(&f.phrases, "phrases", enrich.DefaultPhrases, fmt.Sprintf("search phrases per card (at most %d)", enrich.MaxPhrases))
	fs.IntVar(&f.concurrency, "concurrency", 4, "cards enriched at once")
	fs.StringVar(&f.cacheDir, "cache-dir", os.Getenv("CARDEX_ENRICH_CACHE_DIR"),
		"keep the model's answers here, keyed by model, prompt version and card text, so a rerun costs no model call (env CARDEX_ENRICH_CACHE_DIR; default: the user cache directory's cardex/enrich)")
	fs.BoolVar(&f.noCache, "no-cache", false, "neither read nor write the answer cache")
}

// check refuses missing or bad flags before anything is done.
func (f *llmFlags) check() error {
	switch {
	case f.url == "" || f.model == "":
		return usageError("--llm-url and --llm-model are required (or CARDEX_LLM_URL and CARDEX_LLM_MODEL): the OpenAI-compatible chat server that writes the phrases, e.g. --llm-url http://localhost:11434/v1 --llm-model llama3.1")
	case f.phrases < 1 || f.phrases > enrich.MaxPhrases:
		return usageError("--phrases %d: want 1..%d", f.phrases, enrich.MaxPhrases)
	case f.concurrency < 1 || f.concurrency > 64:
		return usageError("--concurrency %d: want 1..64", f.concurrency)
	case f.timeout <= 0:
		return usageError("--llm-timeout %s: want a positive duration", f.timeout)
	case f.retries < 0:
		return usageError("--llm-retries %d is negative", f.retries)
	}
	return nil
}

// build makes the enricher: chat client and cache.
func (f *llmFlags) build(log *slog.Logger) (*enrich.Enricher, string, error) {
	retries := f.retries
	if retries == 0 {
		retries = -1 // apiclient: 0 is the default, negative is none
	}
	chat, err := enrich.NewChat(enrich.ChatConfig{
		BaseURL: f.url, Model: f.model, APIKey: enrich.KeyFromEnv(os.Getenv),
		Stream: f.stream, Timeout: f.timeout, MaxRetries: retries, Logger: log,
	})
	if err != nil {
		return nil, "", usageError("--llm-url/--llm-model: %v", err)
	}
	var cache *enrich.Cache
	dir := ""
	if !f.noCache {
		dir = f.cacheDir
		if dir == "" {
			base, err := os.UserCacheDir()
			if err != nil {
				return nil, "", fmt.Errorf("no cache directory (%v): give --cache-dir or --no-cache", err)
			}
			dir = filepath.Join(base, "cardex", "enrich")
		}
		if cache, err = enrich.OpenCache(dir); err != nil {
			return nil, "", err
		}
	}
	e, err := enrich.NewEnricher(chat, cache, f.phrases, log)
	if err != nil {
		return nil, "", err
	}
	return e, dir, nil
}

func enrichCmd() *cobra.Command {
	cf := clientFlags{yaml: true}
	var lf llmFlags
	var tenant, server string
	var missing, stale, all, dryRun bool
	cmd := &cobra.Command{
		Use:   "enrich --tenant T [--server S] [NAME...] --llm-url URL --llm-model MODEL [--missing|--stale|--all] [--dry-run]",
		Short: "Write search examples for cards with a language model (requests each tool serves: searched, never shown to an agent)",
		Long: `Asks an OpenAI-compatible chat server (OpenAI, Ollama, vLLM, llama.cpp server, LM Studio) to write
search phrases for each selected card with a fixed, versioned prompt (` + enrich.PromptVersion + `), validates and
sanitises the answer, and writes the phrases as the card's search_examples through the catalogue API,
with the card's version: a card changed meanwhile is re-read and redone, never overwritten.

Selection: --missing (cards without examples), --stale (a model's examples written from text the card
no longer has), --all (also examples by another model or prompt version); the default is --missing
--stale. A person's examples are never replaced, revoked cards are left alone, and cards whose
examples this model and prompt already wrote from their present text are skipped: so an interrupted
run resumes where it stopped, and the answer cache makes a rerun cost no model call.

Progress goes to stderr, results to stdout. --dry-run -o yaml shows the phrases for review without
writing them.`,
		RunE: func(cmd *cobra.Command, names []string) error {
			if err := lf.check(); err != nil {
				return err
			}
			sel := enrich.Select(0)
			if missing {
				sel |= enrich.SelectMissing
			}
			if stale {
				sel |= enrich.SelectStale
			}
			if all {
				sel |= enrich.SelectAll
			}
			for i, n := range names {
				s, name, ok := strings.Cut(n, "/")
				if !ok {
					continue
				}
				if server != "" && s != server {
					return usageError("%s: the cards of one run are of one server (--server %s)", n, server)
				}
				server, names[i] = s, name
			}
			if len(names) > 0 && server == "" {
				return usageError("name the server of %s: SERVER/NAME, or --server", names[0])
			}
			log := newLogger("warn")
			e, cacheDir, err := lf.build(log)
			if err != nil {
				return err
			}
			conn, _, done, err := cf.connect(cmd)
			if err != nil {
				return err
			}
			defer done()
			ctx, stop := signal.NotifyContext(cf.withToken(cmd.Context()), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return runEnrich(ctx, cmd, conn, cf, e, cacheDir, enrich.Options{
				Tenant: tenant, Server: server, Names: names, Select: sel, Concurrency: lf.concurrency, DryRun: dryRun, Logger: log,
			})
		},
	}
	cf.register(cmd)
	lf.register(cmd)
	f := cmd.Flags()
	f.StringVar(&tenant, "tenant", os.Getenv("CARDEX_TENANT"), "tenant (env CARDEX_TENANT)")
	addCheck(cmd, func() error { return requireTenant(tenant) })
	f.StringVar(&server, "server", "", "only this server's cards (or write SERVER/NAME)")
	f.BoolVar(&missing, "missing", false, "cards without examples")
	f.BoolVar(&stale, "stale", false, "cards whose model-written examples are stale (the card's text changed)")
	f.BoolVar(&all, "all", false, "every card, also those with examples by another model or prompt version (never a person's)")
	f.BoolVar(&dryRun, "dry-run", false, "ask the model and show the phrases, write nothing")
	return cmd
}

// runEnrich runs the enrichment on a server's catalogue and reports it:
// progress on stderr, the outcome per card on stdout.
func runEnrich(ctx context.Context, cmd *cobra.Command, conn *grpc.ClientConn, cf clientFlags, e *enrich.Enricher, cacheDir string, opt enrich.Options) error {
	cat := grpcEnrichCatalog{grpcCatalog: grpcCatalog{c: pb.NewCatalogServiceClient(conn)}, timeout: cf.timeout}
	p := newProgress(cmd.ErrOrStderr(), "enrich")
	opt.Progress = p.update
	fmt.Fprintf(cmd.ErrOrStderr(), "enrich: model %s, prompt %s, cache %s\n", e.Model(), enrich.PromptVersion, orNone(cacheDir))
	rep, err := enrich.Run(ctx, cat, e, opt)
	interrupted := err != nil && ctx.Err() != nil
	if err != nil && !interrupted {
		return err
	}
	if perr := printEnrichReport(cf.output, rep); perr != nil {
		return perr
	}
	if interrupted {
		return fmt.Errorf("interrupted after %d cards: run the same command again to continue (done cards are skipped, answered ones come from the cache)", len(rep.Items))
	}
	if n := rep.Count(enrich.Failed); n > 0 {
		return fmt.Errorf("%d of %d cards failed (see the table); run again to retry them", n, len(rep.Items))
	}
	return nil
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

func printEnrichReport(output string, rep enrich.Report) error {
	if rep.Items == nil {
		rep.Items = []enrich.Item{}
	}
	switch output {
	case "json":
		return printPlainJSON(rep)
	case "yaml":
		b, err := yaml.Marshal(rep)
		if err != nil {
			return err
		}
		_, err = os.Stdout.Write(b)
		return err
	}
	rows := make([][]string, 0, len(rep.Items))
	for _, it := range rep.Items {
		note := ""
		switch {
		case it.Error != "":
			note = cards.Cut(it.Error, 100)
		case len(it.Phrases) > 0:
			note = cards.Cut(it.Phrases[0], 60)
			if it.Cached {
				note += " (cached)"
			}
		case it.Outcome == enrich.KeptPerson:
			note = "a person's examples are kept"
		}
		if len(it.Rejected) > 0 && it.Error == "" {
			note += fmt.Sprintf(" [%d refused]", len(it.Rejected))
		}
		rows = append(rows, []string{it.Key.Server, it.Key.Name, it.Outcome, strconv.FormatInt(it.Version, 10), strconv.Itoa(len(it.Phrases)), note})
	}
	if err := table([]string{"SERVER", "NAME", "OUTCOME", "VERSION", "EXAMPLES", "FIRST EXAMPLE / ERROR"}, rows); err != nil {
		return err
	}
	fmt.Printf("\n%d written, %d unchanged, %d kept a person's, %d failed", rep.Count(enrich.Written), rep.Count(enrich.Unchanged), rep.Count(enrich.KeptPerson), rep.Count(enrich.Failed))
	if n := rep.Count(enrich.DryRun); n > 0 {
		fmt.Printf(", %d not written (dry run)", n)
	}
	fmt.Printf("; skipped: %d current, %d a person's, %d revoked, %d not selected; model calls %d, cache hits %d\n",
		rep.Skipped["current"], rep.Skipped["person"], rep.Skipped["revoked"], rep.Skipped["not selected"], rep.Calls, rep.CacheHits)
	return nil
}

// grpcEnrichCatalog is the catalogue of a running server, as enrichment
// reads and writes it; every call has the command's --timeout.
type grpcEnrichCatalog struct {
	grpcCatalog
	timeout time.Duration
}

func (g grpcEnrichCatalog) List(ctx context.Context, tenant, server string) ([]cards.Card, error) {
	ctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	return g.grpcCatalog.List(ctx, tenant, server)
}

func (g grpcEnrichCatalog) Get(ctx context.Context, k cards.Key) (cards.Card, error) {
	ctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	resp, err := g.c.GetCard(ctx, &pb.GetCardRequest{Tenant: k.Tenant, Server: k.Server, Name: k.Name})
	if err != nil {
		return cards.Card{}, err
	}
	return apiconv.CardFromProto(resp.Card), nil
}

func (g grpcEnrichCatalog) Put(ctx context.Context, c cards.Card) (cards.PutResult, error) {
	ctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	resp, err := g.c.PutCards(ctx, &pb.PutCardsRequest{Cards: []*pb.Card{apiconv.CardToProto(&c, true)}})
	if status.Code(err) == codes.Aborted {
		return cards.PutResult{}, fmt.Errorf("%w: %s", cards.ErrConflict, status.Convert(err).Message())
	}
	if err != nil {
		return cards.PutResult{}, err
	}
	if len(resp.Results) != 1 {
		return cards.PutResult{}, errors.New("the server answered a put of one card with another number of results")
	}
	r := resp.Results[0]
	return cards.PutResult{Key: c.Key(), Version: r.Version, Outcome: cards.Outcome(r.Outcome), ExamplesKept: r.SearchExamplesKept}, nil
}

func (g grpcEnrichCatalog) Server(ctx context.Context, tenant, name string) (*cards.ServerInfo, error) {
	ctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	si, err := g.GetServer(ctx, tenant, name)
	if errors.Is(err, cards.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &si, nil
}

// enrichAfterImport is import --enrich: once the import is written, the
// namespace's cards without current examples are enriched.
func enrichAfterImport(cmd *cobra.Command, f *importFlags) error {
	if !f.enrich {
		return nil
	}
	if f.dryRun {
		fmt.Fprintln(cmd.ErrOrStderr(), "enrich: nothing asked in a dry run (try 'cardex enrich --dry-run' once the cards are written)")
		return nil
	}
	log := newLogger("warn")
	e, cacheDir, err := f.llm.build(log)
	if err != nil {
		return err
	}
	conn, _, done, err := f.cf.connect(cmd)
	if err != nil {
		return err
	}
	defer done()
	ctx, stop := signal.NotifyContext(f.cf.withToken(cmd.Context()), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return runEnrich(ctx, cmd, conn, f.cf, e, cacheDir, enrich.Options{
		Tenant: f.tenant, Server: f.server, Select: enrich.SelectDefault, Concurrency: f.llm.concurrency, Logger: log,
	})
}

// serveEnrichFlags turn on the service's enrichment worker (serve
// --enrich-url ...): new and changed cards get search examples in the
// background.
type serveEnrichFlags struct {
	url, model string
	perMinute  int
	timeout    time.Duration
}

func (f *serveEnrichFlags) register(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.StringVar(&f.url, "enrich-url", os.Getenv("CARDEX_ENRICH_URL"),
		"enrich new and changed cards in the background with this OpenAI-compatible chat server, e.g. http://localhost:11434/v1 (env CARDEX_ENRICH_URL; the API key is read from CARDEX_LLM_API_KEY or OPENAI_API_KEY); with PostgreSQL, one replica does it")
	fs.StringVar(&f.model, "enrich-model", os.Getenv("CARDEX_ENRICH_MODEL"), "the chat model of --enrich-url, e.g. llama3.1 (env CARDEX_ENRICH_MODEL)")
	fs.IntVar(&f.perMinute, "enrich-rate", enrich.DefaultWorkerRate, "at most this many cards enriched a minute")
	fs.DurationVar(&f.timeout, "enrich-timeout", enrich.DefaultChatTimeout, "timeout of one model answer (retried on timeouts, 429 and 5xx)")
}

// start starts the worker when --enrich-url is given (nil otherwise). Its
// answers are cached in DATA_DIR/enrich-cache; with PostgreSQL, an advisory
// lock lets one replica work.
func (f *serveEnrichFlags) start(ctx context.Context, store cards.Store, sf *storeFlags, dataDir string, met *metrics.Metrics, log *slog.Logger) (*enrich.Worker, error) {
	if f.url == "" && f.model == "" {
		return nil, nil
	}
	if f.url == "" || f.model == "" {
		return nil, usageError("--enrich-url and --enrich-model go together")
	}
	if f.perMinute < 1 {
		return nil, usageError("--enrich-rate %d: want at least 1 card a minute", f.perMinute)
	}
	key := enrich.KeyFromEnv(os.Getenv)
	chat, err := enrich.NewChat(enrich.ChatConfig{BaseURL: f.url, Model: f.model, APIKey: key, Timeout: f.timeout, Logger: log})
	if err != nil {
		return nil, usageError("--enrich-url/--enrich-model: %v", err)
	}
	cache, err := enrich.OpenCache(filepath.Join(dataDir, "enrich-cache"))
	if err != nil {
		return nil, err
	}
	e, err := enrich.NewEnricher(chat, cache, 0, log)
	if err != nil {
		return nil, err
	}
	var lead enrich.Leader = enrich.Solo{}
	if sf.pg != nil {
		lead = leader.New(sf.pg.Pool().Config().ConnConfig, "enrichment "+sf.pg.Schema(), 0)
	}
	w, err := enrich.NewWorker(enrich.WorkerConfig{Store: store, Enricher: e, Leader: lead, PerMinute: f.perMinute, Logger: log})
	if err != nil {
		return nil, err
	}
	met.WatchEnrichment(func() metrics.EnrichmentStatus {
		s := w.Status()
		return metrics.EnrichmentStatus{Leader: s.Leader, Backlog: s.Backlog, Written: s.Written, Unchanged: s.Unchanged,
			KeptPerson: s.KeptPerson, Failed: s.Failed, Calls: s.Calls, CacheHits: s.CacheHits}
	})
	go w.Run(ctx)
	log.Info("enrichment worker", "model", f.model, "endpoint", chat.Endpoint(), "api_key", key != "", "prompt", enrich.PromptVersion,
		"per_minute", f.perMinute, "leader_election", sf.pg != nil)
	return w, nil
}
