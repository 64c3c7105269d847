// Package agents wires the agent-facing surfaces of `cardex serve`: the MCP
// front at /mcp on an HTTP listener, and the gRPC ExecutionService behind
// `cardex tools`. Both identify callers by bearer token (the agent token
// file) and share one gateway, upstream registry and audit log.
package agents

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"time"

	"github.com/seed0cff8200/cardex/cards"
	"github.com/seed0cff8200/cardex/internal/access/ratelimit"
	"github.com/seed0cff8200/cardex/internal/access/tokens"
	"github.com/seed0cff8200/cardex/internal/execution/gateway"
	"github.com/seed0cff8200/cardex/internal/execution/rest"
	"github.com/seed0cff8200/cardex/internal/execution/sqlquery"
	"github.com/seed0cff8200/cardex/internal/execution/upstream"
	"github.com/seed0cff8200/cardex/internal/faces/hostguard"
	"github.com/seed0cff8200/cardex/internal/faces/mcpfront"
	"github.com/seed0cff8200/cardex/internal/faces/tlsguard"
	pb "github.com/seed0cff8200/cardex/proto/cardex/v1"
	"github.com/seed0cff8200/cardex/retriever"
)

// Config is what Open needs.
type Config struct {
	Retriever *retriever.Retriever
	Logger    *slog.Logger
	Version   string
	// DataDir holds the audit log (audit.jsonl).
	DataDir string
	// Key keys the subject pseudonym in the audit log.
	Key []byte
	// TokenFile maps bearer tokens to callers. Empty: no agent surface
	// accepts a call (every request is Unauthenticated).
	TokenFile string
	// UpstreamsFile registers the upstreams: MCP servers and REST APIs.
	// Empty: nothing can be called.
	UpstreamsFile string
	// HTTPListen is the address of the HTTP listener (/mcp, /healthz,
	// /readyz); empty: no listener. Without a TokenFile it serves no /mcp.
	HTTPListen string
	// MCPStateless serves /mcp without sessions (see mcpfront.Config).
	MCPStateless bool
	// Health, when set, answers /healthz and /readyz on the HTTP listener.
	Health http.Handler
	// Metrics, when set, answers /metrics on the HTTP listener.
	Metrics http.Handler
	// Serving, when set, holds /mcp (503) until it returns nil: until the
	// replica's view of the catalogue can be trusted.
	Serving func() error
	// TLS, when set, serves the HTTP listener over TLS (and mutual TLS when
	// it asks for client certificates).
	TLS *tls.Config
	// Limiter rate-limits /mcp per agent (429 with Retry-After).
	Limiter *ratelimit.Limiter
	// Console, when set, is the web console, served under /console/.
	Console http.Handler
	// Hosts are the Host names the HTTP listener answers besides loopback
	// ones: every surface on it refuses any other (hostguard).
	Hosts hostguard.Policy
}

// Surfaces are the running agent surfaces.
type Surfaces struct {
	log      *slog.Logger
	gw       *gateway.Gateway
	tokens   *tokens.Table
	registry *upstream.Registry
	sql      *sqlquery.Pools
	rest     *rest.Executor
	audit    *upstream.Audit
	http     *http.Server
	mux      *http.ServeMux
	front    *mcpfront.Front
	lis      net.Listener
	errc     chan error
}

// Open loads the token and upstreams files, opens the audit log and, when
// HTTPListen is set, listens for /mcp (Serve starts answering).
func Open(cfg Config) (*Surfaces, error) {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Surfaces{log: log, tokens: &tokens.Table{}, errc: make(chan error, 1)}
	if cfg.TokenFile != "" {
		t, err := tokens.Load(cfg.TokenFile)
		if err != nil {
			return nil, fmt.Errorf("agent token file: %w", err)
		}
		s.tokens = t
	}
	var ucfg upstream.Config
	if cfg.UpstreamsFile != "" {
		c, err := upstream.LoadConfig(cfg.UpstreamsFile)
		if err != nil {
			return nil, fmt.Errorf("upstreams: %w", err)
		}
		ucfg = c
	}
	reg, err := upstream.NewRegistry(ucfg, cfg.Version, log)
	if err != nil {
		return nil, err
	}
	s.registry = reg
	audit, err := upstream.OpenAudit(filepath.Join(cfg.DataDir, "audit.jsonl"), cfg.Key)
	if err != nil {
		reg.Close()
		return nil, fmt.Errorf("audit log: %w", err)
	}
	s.audit = audit
	s.sql = sqlquery.New(ucfg, log) // the SQL entries of the same file
	s.rest = rest.New(ucfg, cfg.Version, log)
	s.gw = &gateway.Gateway{Retriever: cfg.Retriever, Upstreams: reg, Audit: audit, Log: log, SQL: s.sql,
		Executors: map[cards.Kind]gateway.Executor{cards.KindRESTOperation: s.rest}}
	if cfg.HTTPListen != "" {
		lis, err := net.Listen("tcp", cfg.HTTPListen)
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("--http-listen: %w (choose another address, or --http-listen '' for no HTTP listener)", err)
		}
		// TLS when configured; a client of the other protocol is told
		// which to use.
		lis = tlsguard.Listener(lis, cfg.TLS, log)
		s.lis = lis
		mux := http.NewServeMux()
		if cfg.Health != nil {
			mux.Handle("/healthz", cfg.Health)
			mux.Handle("/readyz", cfg.Health)
		}
		if cfg.Metrics != nil {
			mux.Handle("/metrics", cfg.Metrics)
		}
		if cfg.Console != nil {
			mux.Handle("/console/", cfg.Console)
		}
		if cfg.TokenFile != "" {
			s.front = mcpfront.NewHandler(mcpfront.Config{Gateway: s.gw, Tokens: s.tokens, Logger: log, Version: cfg.Version, Stateless: cfg.MCPStateless,
				HostChecked: true})
			mux.Handle(mcpfront.Path, cfg.Limiter.HTTP(s.agent, gateway.CallTool, whenServing(cfg.Serving, s.front)))
		} else {
			// Without a token file every request would be refused.
			log.Info("MCP front off: no agent token file (--agent-tokens)")
		}
		s.mux = mux
		// One Host check in front of every surface of the listener (those
		// mounted on the mux later, such as the HTTP/JSON API, included).
		s.http = &http.Server{Handler: cfg.Hosts.Handler(mux), ReadHeaderTimeout: 10 * time.Second}
	}
	_, anon := s.tokens.Anonymous()
	log.Info("agent surfaces", "http", s.Addr(), "mcp", cfg.TokenFile != "" && s.lis != nil, "tokens", s.tokens.Len(), "anonymous", anon, "upstreams", reg.Len())
	return s, nil
}

// whenServing answers 503 while serving says why not.
func whenServing(serving func() error, h http.Handler) http.Handler {
	if serving == nil {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := serving(); err != nil {
			http.Error(w, "not serving yet: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// Addr is the HTTP listener's address ("" when there is none).
func (s *Surfaces) Addr() string {
	if s.lis == nil {
		return ""
	}
	return s.lis.Addr().String()
}

// Handle serves h at pattern on the HTTP listener (call before Serve; no-op
// without a listener).
func (s *Surfaces) Handle(pattern string, h http.Handler) {
	if s.mux != nil {
		s.mux.Handle(pattern, h)
	}
}

// Tokens is the agent token table.
func (s *Surfaces) Tokens() *tokens.Table { return s.tokens }

// agent identifies an /mcp request's agent for the rate limits.
func (s *Surfaces) agent(r *http.Request) (caller, tenant string, ok bool) {
	id, ok := s.tokens.Authenticate(r.Header.Get("Authorization"))
	return ratelimit.CallerKey(id.Tenant, id.Subject), id.Tenant, ok
}

// Gateway is the shared gateway.
func (s *Surfaces) Gateway() *gateway.Gateway { return s.gw }

// Execution is the gRPC ExecutionService to register.
func (s *Surfaces) Execution() pb.ExecutionServiceServer {
	return &execution{gw: s.gw, tokens: s.tokens, log: s.log}
}

// Serve answers /mcp in the background; Err reports a listener failure.
func (s *Surfaces) Serve() {
	if s.http == nil {
		return
	}
	go func() {
		if err := s.http.Serve(s.lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.errc <- fmt.Errorf("/mcp listener: %w", err)
		}
	}()
}

// CheckSQLRoles checks the role of every SQL upstream and logs what it may
// do beyond reading, with what to revoke (sqlquery.CheckRole). Run it in
// the background at start: a database may be slow or down.
func (s *Surfaces) CheckSQLRoles(ctx context.Context) map[string][]sqlquery.RoleFinding {
	return s.sql.CheckRoles(ctx)
}

// Err delivers a failure of the /mcp listener.
func (s *Surfaces) Err() <-chan error { return s.errc }

// Shutdown stops accepting /mcp requests and waits for in-flight ones until
// ctx ends, then closes the sessions (ending their streams) and what is left.
func (s *Surfaces) Shutdown(ctx context.Context) error {
	if s.http == nil {
		return nil
	}
	done := make(chan error, 1)
	go func() { done <- s.http.Shutdown(ctx) }()
	if s.front != nil {
		s.front.Drain(ctx)
	}
	err := <-done
	if err != nil {
		s.http.Close()
	}
	return err
}

// Close closes the upstream sessions and the audit log.
func (s *Surfaces) Close() error {
	var errs []error
	if s.front != nil {
		s.front.Close()
	}
	if s.http != nil {
		errs = append(errs, s.http.Close())
	} else if s.lis != nil {
		errs = append(errs, s.lis.Close())
	}
	if s.registry != nil {
		errs = append(errs, s.registry.Close())
	}
	if s.sql != nil {
		s.sql.Close()
	}
	if s.rest != nil {
		s.rest.Close()
	}
	if s.audit != nil {
		errs = append(errs, s.audit.Close())
	}
	return errors.Join(errs...)
}
