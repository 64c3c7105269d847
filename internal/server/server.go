// Package server wires the gRPC API to the store and the retriever.
package server

import (
	"context"
	"crypto/subtle"
	"log/slog"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/status"

	"github.com/seed0cff8200/cardex/cards"
	"github.com/seed0cff8200/cardex/internal/discoverylog"
	"github.com/seed0cff8200/cardex/internal/feedback"
	"github.com/seed0cff8200/cardex/internal/metrics"
	pb "github.com/seed0cff8200/cardex/proto/cardex/v1"
	"github.com/seed0cff8200/cardex/retriever"
)

// MaxMessageBytes bounds a request (a PutCards batch of up to 1,000 cards).
const MaxMessageBytes = 64 << 20

// Config is what New needs.
type Config struct {
	Store     cards.Store
	Retriever *retriever.Retriever
	// DiscoveryLog may be nil (no logging).
	DiscoveryLog *discoverylog.Log
	// Feedback may be nil (ReportOutcome then answers Unavailable).
	Feedback *feedback.Recorder
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
	// Metrics, when set, counts requests by method and code and records
	// every discovery (nil: no metrics).
	Metrics *metrics.Metrics
}

// New builds a gRPC server with DiscoveryService, CatalogService, health
// and reflection registered.
func New(cfg Config) (*grpc.Server, *health.Server) {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	gs := grpc.NewServer(
		grpc.MaxRecvMsgSize(MaxMessageBytes),
		grpc.ChainUnaryInterceptor(cfg.Metrics.UnaryInterceptor(), accessLog(log), catalogAuth(cfg.CatalogToken), servingOnly(cfg.State)),
	)
	pb.RegisterDiscoveryServiceServer(gs, &discovery{ret: cfg.Retriever, dlog: cfg.DiscoveryLog, fb: cfg.Feedback, log: log, metrics: cfg.Metrics})
	pb.RegisterCatalogServiceServer(gs, &catalog{store: cfg.Store, ret: cfg.Retriever, log: log})
	hs := health.NewServer()
	healthpb.RegisterHealthServer(gs, hs)
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
		start := time.Now()
		resp, err := next(ctx, req)
		log.Debug("rpc", "method", info.FullMethod, "code", status.Code(err).String(), "took", time.Since(start))
		return resp, err
	}
}

func catalogAuth(token string) grpc.UnaryServerInterceptor {
	prefix := "/" + pb.CatalogService_ServiceDesc.ServiceName + "/"
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, next grpc.UnaryHandler) (any, error) {
		if token != "" && strings.HasPrefix(info.FullMethod, prefix) {
			md, _ := metadata.FromIncomingContext(ctx)
			got := ""
			if v := md.Get("authorization"); len(v) > 0 && len(v[0]) > 7 && strings.EqualFold(v[0][:7], "bearer ") {
				got = v[0][7:]
			}
			if subtle.ConstantTimeCompare([]byte(got), []byte(token)) != 1 {
				return nil, status.Error(codes.Unauthenticated, "CatalogService needs the catalog token: authorization: Bearer TOKEN")
			}
		}
		return next(ctx, req)
	}
}
