package server

import (
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// SetServing sets the health status of the server as a whole ("") and of
// every service registered on gs (health and reflection aside) to SERVING
// or NOT_SERVING: a replica whose database schema is not current reports
// NOT_SERVING until it is.
func SetServing(gs *grpc.Server, hs *health.Server, serving bool) {
	st := healthpb.HealthCheckResponse_NOT_SERVING
	if serving {
		st = healthpb.HealthCheckResponse_SERVING
	}
	hs.SetServingStatus("", st)
	for name := range gs.GetServiceInfo() {
		switch name {
		case healthpb.Health_ServiceDesc.ServiceName, "grpc.reflection.v1.ServerReflection", "grpc.reflection.v1alpha.ServerReflection":
			continue
		}
		hs.SetServingStatus(name, st)
	}
}
