// Package server wires the gRPC API to the store and the retriever.
package server

import (
	"context"
	"log/slog"
	"runtime"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/status"

	"github.com/seed0cff8200/cardex/cards"
	"github.com/seed0cff8200/cardex/internal/access/audittrail"
	"github.com/seed0cff8200/cardex/internal/access/auth"
	"github.com/seed0cff8200/cardex/internal/access/ratelimit"
	"github.com/seed0cff8200/cardex/internal/access/tokens"
	"github.com/seed0cff8200/cardex/internal/telemetry/discoverylog"
	"github.com/seed0cff8200/cardex/internal/telemetry/feedback"
	"github.com/seed0cff8200/cardex/internal/telemetry/metrics"
	pb "github.com/seed0cff8200/cardex/proto/cardex/v1"
	"github.com/seed0cff8200/cardex/retriever"
)

// MaxMessageBytes bounds a request (a PutCards batch of up to 1,000 cards).
const MaxMessageBytes = 64 << 20

// StreamWorkers is how many goroutines wait for calls to run (grpc's
// stream workers): a call that finds them all busy gets a goroutine of its
// own. Sized for the calls in flight, not the cores: with one worker per
// core, 32 concurrent callers had nearly every call start a goroutine whose
// stack grew again in the lexical analyser (3.4% of the CPU in
// runtime.newstack at 1,000 cards, 0.8% with 64). Idle, each holds its
// grown stack (tens of KiB).
const StreamWorkers = 64

// Config is what New needs.
type Config struct {
	Store     cards.Store
	Retriever *retriever.Retriever
	// DiscoveryLog may be nil (no logging).
	DiscoveryLog *discoverylog.Log
	// Feedback may be nil (ReportOutcome then answers Unavailable).
	Feedback *feedback.Recorder
	// AutoPins, when > 0, pins up to that many of each caller's hot tools
	// (Feedback's counts, feedback.Hot) to discoveries that name no
	// always_load of their own; 0 leaves pins to the callers.
	AutoPins int
	Logger   *slog.Logger
	// CatalogToken, when set, is required as "authorization: Bearer TOKEN"
	// metadata on every CatalogService call.
	CatalogToken string
	// Execution, when set, is registered as the ExecutionService (it
	// authenticates its callers itself, by agent token).
	Execution pb.ExecutionServiceServer
	// State, when set, drives the health statuses and holds the discovery
	// and execution calls until the schema is current (nil: always ready).
	State *State

	// Auth authenticates DiscoveryService and CatalogService calls (nil:
	// no credential configured, both services open but for CatalogToken).
	Auth *auth.Authenticator
	// AgentTokens authenticate ExecutionService calls in the interceptor
	// too (rate limits are per agent).
	AgentTokens *tokens.Table
	// Limiter applies rate and concurrency limits (nil: none).
	Limiter *ratelimit.Limiter
	// Trail records catalogue writes and security decisions (nil: none).
	Trail *audittrail.Trail
	// RPCTimeout bounds every call except CallTool on the server side,
	// whatever deadline the client set (0: none).
	RPCTimeout time.Duration
	// Warnings go into every health check answer, as "cardex-warning"
	// header metadata (e.g. an insecure, exposed listener).
	Warnings []string
	// ServerOptions are added to the gRPC server's own (TLS credentials,
	// stream limits).
	ServerOptions []grpc.ServerOption
	// Metrics, when set, counts requests by method and code and records
	// every discovery (nil: no metrics).
	Metrics *metrics.Metrics
}

// New builds a gRPC server with DiscoveryService, CatalogService, health
// and reflection registered.
func New(cfg Config) (*grpc.Server, *health.Server) { return newServer(cfg, nil) }

// newServer is New with the DiscoveryService handed to wrap first, when
// wrap is set (the benchmarks' diagnostics: the same server with a handler
// of theirs in front).
func newServer(cfg Config, wrap func(pb.DiscoveryServiceServer) pb.DiscoveryServiceServer) (*grpc.Server, *health.Server) {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	authn := cfg.Auth
	if authn == nil {
		authn = &auth.Authenticator{}
	}
	if cfg.CatalogToken != "" {
		toks := &auth.Tokens{}
		if authn.Tokens != nil {
			cp := *authn.Tokens
			toks = &cp
		}
		toks.AddToken("catalog-token", auth.RoleCatalog, cfg.CatalogToken)
		authn = &auth.Authenticator{Tokens: toks, JWT: authn.JWT, DB: authn.DB}
	}
	codec := newUTF8Codec()
	g := &guard{auth: authn, agents: cfg.AgentTokens, lim: cfg.Limiter, trail: cfg.Trail, timeout: cfg.RPCTimeout, log: log,
		refusals: ratelimit.New(ratelimit.Config{CallRate: MaxRefusalsAudited})}
	opts := append([]grpc.ServerOption{
		// Handlers run on a pool of long-lived goroutines whose stacks
		// stay grown, instead of a fresh goroutine per RPC growing its
		// stack again in the lexical analyser; past the pool, grpc starts
		// a goroutine as before.
		grpc.NumStreamWorkers(uint32(max(StreamWorkers, runtime.GOMAXPROCS(0)))),
		grpc.MaxRecvMsgSize(MaxMessageBytes),
		grpc.ForceServerCodecV2(codec),
		grpc.ChainUnaryInterceptor(cfg.Metrics.UnaryInterceptor(), codec.unary, accessLog(log), g.unary, servingOnly(cfg.State)),
		grpc.ChainStreamInterceptor(codec.stream),
	}, cfg.ServerOptions...)
	gs := grpc.NewServer(opts...)
	var disc pb.DiscoveryServiceServer = &discovery{ret: cfg.Retriever, dlog: cfg.DiscoveryLog, fb: cfg.Feedback, trail: cfg.Trail, log: log, metrics: cfg.Metrics,
		autoPins: cfg.AutoPins}
	if wrap != nil {
		disc = wrap(disc)
	}
	pb.RegisterDiscoveryServiceServer(gs, disc)
	pb.RegisterCatalogServiceServer(gs, &catalog{store: cfg.Store, ret: cfg.Retriever, trail: cfg.Trail, log: log})
	hs := health.NewServer()
	healthpb.RegisterHealthServer(gs, &healthDetails{Server: hs, warnings: cfg.Warnings})
	for _, name := range []string{"", pb.DiscoveryService_ServiceDesc.ServiceName, pb.CatalogService_ServiceDesc.ServiceName} {
		hs.SetServingStatus(name, healthpb.HealthCheckResponse_SERVING)
	}
	if cfg.Execution != nil {
		pb.RegisterExecutionServiceServer(gs, cfg.Execution)
		hs.SetServingStatus(pb.ExecutionService_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	}
	reflection.Register(gs)
	cfg.State.Bind(gs, hs)
	return gs, hs
}

// accessLog logs each call's method, code and latency at debug level. It
// never logs request bodies: queries and card contents stay out of logs.
func accessLog(log *slog.Logger) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, next grpc.UnaryHandler) (any, error) {
		if !log.Enabled(ctx, slog.LevelDebug) {
			// Not even the attributes: boxed, they cost allocations a call.
			return next(ctx, req)
		}
		start := time.Now()
		resp, err := next(ctx, req)
		log.LogAttrs(ctx, slog.LevelDebug, "rpc", slog.String("method", info.FullMethod), slog.String("code", status.Code(err).String()),
			slog.Duration("took", time.Since(start)))
		return resp, err
	}
}

// healthDetails is the health service with the server's warnings in the
// header metadata of every answer ("cardex-warning"), so that a probe or
// `grpcurl -v` shows an insecure deployment.
type healthDetails struct {
	*health.Server
	warnings []string
}

func (h *healthDetails) md() metadata.MD {
	md := metadata.MD{}
	for _, w := range h.warnings {
		md.Append("cardex-warning", w)
	}
	return md
}

func (h *healthDetails) Check(ctx context.Context, req *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	if len(h.warnings) > 0 {
		_ = grpc.SetHeader(ctx, h.md())
	}
	return h.Server.Check(ctx, req)
}

func (h *healthDetails) Watch(req *healthpb.HealthCheckRequest, stream healthpb.Health_WatchServer) error {
	if len(h.warnings) > 0 {
		_ = stream.SetHeader(h.md())
	}
	return h.Server.Watch(req, stream)
}
