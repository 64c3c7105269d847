package server

import (
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"

	pb "github.com/seed0cff8200/cardex/proto/cardex/v1"
)

// NewWrapped is New with the DiscoveryService handed to wrap first: the
// same interceptors, codec and transport in front of a handler of the
// test's (BenchmarkGRPC's diagnostics).
func NewWrapped(cfg Config, wrap func(pb.DiscoveryServiceServer) pb.DiscoveryServiceServer) (*grpc.Server, *health.Server) {
	return newServer(cfg, wrap)
}
