package server

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	pb "github.com/seed0cff8200/cardex/proto/cardex/v1"
)

// State is whether a replica can serve, for the gRPC health statuses, the
// HTTP /healthz and /readyz, and the discovery calls:
//
//   - until the store's schema is current (PostgreSQL: `cardex migrate up`),
//     every service is NOT_SERVING, /readyz answers 503, and the discovery
//     and execution calls answer Unavailable (the replica's view is empty, so
//     any other answer would be wrong);
//   - while the store does not answer (the database is down), the catalog
//     service is NOT_SERVING and /readyz answers 503, but discovery goes on
//     from the replica's memory (degraded) and stays SERVING.
//
// Safe for concurrent use. A nil *State is always ready.
type State struct {
	mu     sync.Mutex
	schema error // why the schema is not current; nil once it is
	store  error // why the store does not answer; nil while it does
	gs     *grpc.Server
	hs     *health.Server
}

// NewState starts with the schema current (schema nil) or not.
func NewState(schema error) *State { return &State{schema: schema} }

// Bind makes the state drive the health statuses of the server's services.
func (s *State) Bind(gs *grpc.Server, hs *health.Server) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gs, s.hs = gs, hs
	s.applyLocked()
}

// SetSchema records that the schema is current (nil) or why it is not.
func (s *State) SetSchema(err error) { s.set(&s.schema, err) }

// SetStore records that the store answers (nil) or why it does not.
func (s *State) SetStore(err error) { s.set(&s.store, err) }

func (s *State) set(field *error, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	*field = err
	s.applyLocked()
}

// Serving is nil when the discovery calls can be answered: the schema is
// current.
func (s *State) Serving() error {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.schema
}

// Ready is nil when the replica is ready: the schema is current and the
// store answers.
func (s *State) Ready() error {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.schema != nil {
		return s.schema
	}
	return s.store
}

func (s *State) applyLocked() {
	if s.hs == nil {
		return
	}
	SetServing(s.gs, s.hs, s.schema == nil)
	if s.schema == nil && s.store != nil {
		s.hs.SetServingStatus(pb.CatalogService_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_NOT_SERVING)
	}
}

// servingOnly answers the discovery and execution calls Unavailable until
// the schema is current (the catalog calls answer Unavailable by themselves:
// the store refuses them).
func servingOnly(s *State) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, next grpc.UnaryHandler) (any, error) {
		if m := info.FullMethod; strings.HasPrefix(m, discoveryPrefix) || strings.HasPrefix(m, executionPrefix) {
			if err := s.Serving(); err != nil {
				return nil, status.Errorf(codes.Unavailable, "not serving yet: %v", err)
			}
		}
		return next(ctx, req)
	}
}

// HTTP answers GET /healthz (200 while the process runs) and GET /readyz
// (200 when Ready, 503 with the reason otherwise).
func (s *State) HTTP() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if err := s.Ready(); err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintf(w, "not ready: %v\n", err)
			return
		}
		fmt.Fprintln(w, "ready")
	})
	return mux
}
