package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/seed0cff8200/cardex/internal/access/audittrail"
	"github.com/seed0cff8200/cardex/internal/faces/agents"
	"github.com/seed0cff8200/cardex/internal/faces/console"
	"github.com/seed0cff8200/cardex/internal/faces/hostguard"
	"github.com/seed0cff8200/cardex/internal/faces/httpjson"
	"github.com/seed0cff8200/cardex/internal/faces/server"
	"github.com/seed0cff8200/cardex/internal/ops/buildinfo"
	"github.com/seed0cff8200/cardex/internal/postgres/pglog"
	"github.com/seed0cff8200/cardex/internal/telemetry/discoverylog"
	"github.com/seed0cff8200/cardex/internal/telemetry/feedback"
	"github.com/seed0cff8200/cardex/internal/telemetry/metrics"
	"github.com/seed0cff8200/cardex/retriever"
)

func serveCmd() *cobra.Command {
	var (
		dataDir, listen, queryLog, logLevel, tokenFile string
		grace, syncEvery                               time.Duration
	)
	var httpListen, httpHosts, agentTokens, upstreamsFile string
	var mcpStateless, consoleOn, httpJSON bool
	var consoleEvalDir string
	var logFormat string
	var metricsTenants int
	var autoPins int
	var labelled string
	var ef embedderFlags     // --embedder and --embed-*, shared with reindex
	var sf storeFlags        // --store, --database-url, --database-schema
	var rf residencyFlags    // --tenants, --shard, --memory-budget
	var enf serveEnrichFlags // --enrich-url, --enrich-model (enrich.go)

	var sec securityFlags // --service-tokens, --insecure, --tls-*, --jwt-*, rate limits
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the gRPC service: embedded store by default (no external service), or PostgreSQL (--store postgres)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, err := newFormatLogger(logLevel, logFormat)
			if err != nil {
				return err
			}
			if autoPins < 0 || autoPins > feedback.MaxPins {
				return usageError("--auto-pin-hot %d: use 0 (off) up to %d", autoPins, feedback.MaxPins)
			}
			if metricsTenants < -1 || metricsTenants > metrics.MaxTenantsLimit {
				return usageError("--metrics-tenants %d: use -1 (none) up to %d", metricsTenants, metrics.MaxTenantsLimit)
			}
			mode, err := discoverylog.ParseQueryMode(queryLog)
			if err != nil {
				return err
			}
			token := os.Getenv("CARDEX_CATALOG_TOKEN")
			if tokenFile != "" {
				b, err := os.ReadFile(tokenFile)
				if err != nil {
					return fmt.Errorf("--catalog-token-file: %w", err)
				}
				token = strings.TrimSpace(string(b))
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			secu, err := sec.build(ctx, log, token)
			if err != nil {
				return err
			}

			if err := os.MkdirAll(dataDir, 0o700); err != nil {
				return fmt.Errorf("data directory: %w", err)
			}
			store, err := sf.open(dataDir, log)
			if err != nil {
				return err
			}
			defer store.Close()
			if err := sec.openDB(ctx, secu, &sf, log); err != nil {
				return err
			}
			emb, err := ef.build(ctx, log)
			if err != nil {
				return err
			}
			met := metrics.New(metrics.Options{MaxTenants: metricsTenants})
			opts := sf.retrieverOptions(emb, dataDir)
			resOpt, resident, err := rf.option(met)
			if err != nil {
				return err
			}
			if resident {
				opts = append(opts, resOpt)
			}
			ret, err := retriever.New(ctx, store, emb, log, opts...)
			if err != nil {
				return err
			}
			defer ret.Close()
			met.WatchResidency(ret)
			key, err := discoverylog.LoadOrCreateKey(filepath.Join(dataDir, "log-key"))
			if err != nil {
				return fmt.Errorf("discovery log key: %w", err)
			}
			dlog, err := discoverylog.Open(filepath.Join(dataDir, "discoveries.jsonl"), mode, key)
			if err != nil {
				return fmt.Errorf("discovery log: %w", err)
			}
			fbc := feedback.Config{
				Path:        filepath.Join(dataDir, "feedback.jsonl"),
				LearnedPath: filepath.Join(dataDir, "learned.jsonl"),
				Hash:        dlog.Hash,
				RawQueries:  mode == discoverylog.QueryRaw,
				Learner:     ret,
				CoUse:       ret,
				Store:       store, // imports a learned.jsonl of an earlier version once
				Logger:      log,
			}
			if sf.pg != nil {
				// The fleet's discoveries and outcomes also go to the
				// discoveries and outcomes tables.
				pgw := pglog.New(sf.pg.Pool(), sf.pg.Schema(), log)
				defer pgw.Close()
				dlog.AddSink(pgw)
				fbc.Sink = pgw
			}
			// Closed before its sink (deferred after it): Close writes the
			// queued entries, which reach the sink too.
			defer func() {
				if err := dlog.Close(); err != nil {
					log.Warn("discovery log close", "err", err)
				}
				if n := dlog.Dropped(); n > 0 {
					log.Warn("discovery log entries dropped: the writer could not keep up", "dropped", n, "queue", discoverylog.QueueLen)
				}
			}()
			met.DiscoveryLogDropped(dlog.Dropped)
			fbc.Metrics = met
			if autoPins > 0 {
				// Automatic pins start from the uses the log already holds.
				events, err := feedback.ReadEvents(fbc.Path)
				if err != nil && !errors.Is(err, os.ErrNotExist) {
					log.Warn("automatic pins: the feedback log is read up to a bad entry", "err", err)
				}
				fbc.Hot = feedback.HotFromEvents(events)
				log.Info("automatic pins of hot tools", "per_caller", autoPins, "outcomes_counted", len(events))
			}
			enricher, err := enf.start(ctx, store, &sf, dataDir, met, log)
			if err != nil {
				return err
			}
			var guard *feedback.Guard
			if labelled != "" {
				// Lessons of tenants with a labelled set are evaluated in a
				// shadow before they take effect (closed after the recorder,
				// whose last sessions it evaluates, before the retriever).
				sets, err := feedback.LoadLabelled(labelled)
				if err != nil {
					return fmt.Errorf("--labelled-queries: %w", err)
				}
				guard = feedback.NewGuard(feedback.GuardConfig{Target: ret, Store: store, Embedder: emb, Sets: sets, Logger: log})
				defer guard.Close()
				fbc.Learner, fbc.CoUse = guard, guard
				log.Info("learned changes are evaluated first for the tenants with labelled queries", "tenants", len(sets), "file", labelled)
			}
			fb, err := feedback.New(ctx, fbc)
			if err != nil {
				return fmt.Errorf("feedback log: %w", err)
			}
			defer fb.Close()

			trail, err := audittrail.Open(filepath.Join(dataDir, "audit-trail.jsonl"), key)
			if err != nil {
				return fmt.Errorf("audit trail: %w", err)
			}
			defer trail.Close()
			hosts, err := hostguard.Parse(httpHosts)
			if err != nil {
				return usageError("--http-allowed-hosts: %v", err)
			}
			var web http.Handler
			if consoleOn && httpListen != "" {
				if web, err = console.New(console.Config{Store: store, Retriever: ret, Auth: secu.auth, Limiter: secu.limiter, Trail: trail,
					FeedbackLog: fbc.Path, EvalDir: consoleEvalDir, GRPCAddr: listen, GRPCTLS: secu.tls != nil, Enrichment: enricher, Logger: log, Hosts: hosts, AutoPins: autoPins, Guard: guardOf(guard)}); err != nil {
					return err
				}
			}
			agentSurfaces, err := agents.Open(agents.Config{Retriever: ret, Logger: log, Version: buildinfo.Version(), DataDir: dataDir, Key: key,
				TokenFile: agentTokens, UpstreamsFile: upstreamsFile, HTTPListen: httpListen, MCPStateless: mcpStateless,
				Health: sf.state.HTTP(), Serving: sf.state.Serving, TLS: secu.tls, Limiter: secu.limiter, Metrics: met.Handler(), Console: web, Hosts: hosts})
			if err != nil {
				return err
			}
			defer agentSurfaces.Close()

			lis, err := net.Listen("tcp", listen)
			if err != nil {
				return err
			}
			_, anonymous := agentSurfaces.Tokens().Anonymous()
			warnings, err := secu.check(lis.Addr(), agentSurfaces.Addr(), anonymous, web != nil, httpJSON, sec.insecure, log)
			if err != nil {
				lis.Close()
				return err
			}
			// In postgres mode, State keeps health NOT_SERVING until the schema is current.
			gs, hs := server.New(server.Config{Store: store, Retriever: ret, DiscoveryLog: dlog, Feedback: fb, Logger: log, Execution: agentSurfaces.Execution(),
				State: sf.state, Auth: secu.auth, AgentTokens: agentSurfaces.Tokens(), Limiter: secu.limiter, Trail: trail,
				RPCTimeout: sec.rpcTimeout, Warnings: warnings, ServerOptions: secu.opts, Metrics: met, AutoPins: autoPins})
			if httpJSON && agentSurfaces.Addr() != "" {
				served, err := httpjson.Register(agentSurfaces, gs, server.MaxMessageBytes)
				if err != nil {
					lis.Close()
					return err
				}
				log.Info("HTTP/JSON API", "addr", agentSurfaces.Addr(), "services", strings.Join(served, ", "), "openapi", httpjson.OpenAPIPath)
			}
			errc := make(chan error, 1)
			go func() { errc <- gs.Serve(lis) }()
			agentSurfaces.Serve()
			go agentSurfaces.CheckSQLRoles(ctx) // logs what an SQL upstream's role may do beyond reading
			sf.start(ctx, ret, emb, syncEvery, log)
			go met.FollowCatalog(ctx, ret, store, syncEvery, log)
			log.Info("cardex serving", "addr", lis.Addr().String(), "store", sf.kind, "data_dir", dataDir,
				"cards", ret.Len(), "query_log", string(mode), "catalog_token", token != "", "service_tokens", secu.auth.Tokens.Len(),
				"jwt", secu.auth.JWT != nil, "tls", secu.tls != nil, "mtls", secu.mtls, "console", web != nil, "version", buildinfo.Version())

			select {
			case err := <-errc:
				return err
			case err := <-agentSurfaces.Err():
				return err
			case <-ctx.Done():
			}
			log.Info("shutting down", "grace", grace)
			mcpCtx, mcpCancel := context.WithTimeout(context.Background(), grace)
			if err := agentSurfaces.Shutdown(mcpCtx); err != nil {
				log.Warn("grace period over for /mcp; closed open connections", "err", err)
			}
			mcpCancel()
			hs.Shutdown()
			done := make(chan struct{})
			go func() { gs.GracefulStop(); close(done) }()
			select {
			case <-done:
			case <-time.After(grace):
				log.Warn("grace period over; closing open connections")
				gs.Stop()
			}
			if err := <-errc; err != nil && !errors.Is(err, context.Canceled) {
				log.Debug("serve returned", "err", err)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&dataDir, "data-dir", envOr("CARDEX_DATA_DIR", "./cardex-data"), "embedded store directory (env CARDEX_DATA_DIR)")
	f.StringVar(&listen, "listen", envOr("CARDEX_LISTEN", "127.0.0.1:50051"), "gRPC listen address (env CARDEX_LISTEN)")
	f.StringVar(&queryLog, "query-log", "raw", "how queries are recorded in the discovery log: raw, hash or off")
	f.StringVar(&labelled, "labelled-queries", "", "reviewed rows of cardex eval --from-log (JSON Lines with tenant, query, expected): a learned change that lowers recall@5 on its tenant's rows is held back (evaluated in a shadow first; shown on the console's usage page)")
	f.IntVar(&autoPins, "auto-pin-hot", 0, fmt.Sprintf("pin up to this many of each caller's most used tools (from reported outcomes; its own, then its tenant's) to discoveries that name no always_load; 0: off, at most %d", feedback.MaxPins))
	f.StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	f.StringVar(&logFormat, "log-format", envOr("CARDEX_LOG_FORMAT", logText), "log format on stderr: text or json (env CARDEX_LOG_FORMAT)")
	f.IntVar(&metricsTenants, "metrics-tenants", metrics.DefaultMaxTenants, "at most this many tenants get series of their own at /metrics (the first ones with authorized cards); the others are counted as tenant \"(other)\"; -1: none, at most 10000")
	f.StringVar(&tokenFile, "catalog-token-file", "", "file holding the token that CatalogService callers must present (or set the token itself in CARDEX_CATALOG_TOKEN)")
	f.DurationVar(&grace, "shutdown-grace", 10*time.Second, "how long in-flight calls may finish on SIGINT/SIGTERM")
	f.DurationVar(&syncEvery, "sync-interval", 5*time.Second, "how often the search indexes re-check the store's change sequence")
	f.StringVar(&httpListen, "http-listen", envOr("CARDEX_HTTP_LISTEN", "127.0.0.1:8080"), "HTTP listen address of the MCP front at /mcp; empty: none (env CARDEX_HTTP_LISTEN)")
	f.StringVar(&httpHosts, "http-allowed-hosts", os.Getenv("CARDEX_HTTP_ALLOWED_HOSTS"), "host names a loopback HTTP listener answers besides loopback ones, comma-separated (a local proxy's); it refuses every other Host, against DNS rebinding, and a form of the console must come from one of them (env CARDEX_HTTP_ALLOWED_HOSTS)")
	f.StringVar(&agentTokens, "agent-tokens", os.Getenv("CARDEX_AGENT_TOKENS"), "token file mapping agents' bearer tokens to tenant, subject and scopes, for /mcp and ExecutionService (env CARDEX_AGENT_TOKENS)")
	f.StringVar(&upstreamsFile, "upstreams", os.Getenv("CARDEX_UPSTREAMS"), "upstreams file: the MCP servers call_tool forwards to, with their credentials (env CARDEX_UPSTREAMS)")
	f.BoolVar(&mcpStateless, "mcp-stateless", os.Getenv("CARDEX_MCP_STATELESS") == "true", "serve /mcp without sessions, for replicas behind a load balancer without session affinity: clients see list changes at their next tools/list (env CARDEX_MCP_STATELESS=true)")
	f.BoolVar(&consoleOn, "console", os.Getenv("CARDEX_CONSOLE") != "false", "serve the web console at /console/ on the HTTP listener (env CARDEX_CONSOLE=false: off)")
	f.BoolVar(&httpJSON, "http-json", os.Getenv("CARDEX_HTTP_JSON") != "false", "serve every RPC as JSON over HTTP (the Connect protocol: POST /cardex.v1.SERVICE/METHOD) and the OpenAPI document at /openapi.json on the HTTP listener, with the gRPC API's credentials and limits (env CARDEX_HTTP_JSON=false: off)")
	f.StringVar(&consoleEvalDir, "console-eval-dir", os.Getenv("CARDEX_CONSOLE_EVAL_DIR"), "directory of cardex eval report files (*.json) the console's evaluation page lists (env CARDEX_CONSOLE_EVAL_DIR)")
	ef.register(cmd)
	sf.register(cmd)
	rf.register(cmd)
	sec.register(cmd)
	enf.register(cmd)
	return cmd
}

// syncLoop re-checks the store's change sequence periodically, so a write
// whose in-process index update failed still becomes discoverable.
func syncLoop(ctx context.Context, ret *retriever.Retriever, every time.Duration, log *slog.Logger) {
	if every <= 0 {
		return
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := ret.Sync(ctx); err != nil && ctx.Err() == nil {
				log.Warn("periodic sync failed", "err", err)
			}
		}
	}
}

// guardOf is the guard for the console, nil when there is none (a nil
// *Guard in the interface would not be nil).
func guardOf(g *feedback.Guard) interface{ Held() []feedback.Held } {
	if g == nil {
		return nil
	}
	return g
}
