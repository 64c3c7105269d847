package server_test

import (
	"slices"
	"testing"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	rpb "google.golang.org/grpc/reflection/grpc_reflection_v1"

	pb "github.com/seed0cff8200/cardex/proto/cardex/v1"
)

func TestHealth(t *testing.T) {
	// With a catalog token too: health needs none.
	e := newEnv(t, envOptions{token: "t0ken"})
	hc := healthpb.NewHealthClient(e.conn)
	for _, svc := range []string{"", pb.DiscoveryService_ServiceDesc.ServiceName, pb.CatalogService_ServiceDesc.ServiceName} {
		res, err := hc.Check(rpcCtx(t), &healthpb.HealthCheckRequest{Service: svc})
		if err != nil {
			t.Fatalf("Check(%q): %v", svc, err)
		}
		if res.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("Check(%q) = %s, want SERVING", svc, res.GetStatus())
		}
	}
}

func TestReflection(t *testing.T) {
	e := newEnv(t, envOptions{token: "t0ken"})
	stream, err := rpb.NewServerReflectionClient(e.conn).ServerReflectionInfo(rpcCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	ask := func(req *rpb.ServerReflectionRequest) *rpb.ServerReflectionResponse {
		t.Helper()
		if err := stream.Send(req); err != nil {
			t.Fatal(err)
		}
		res, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if e := res.GetErrorResponse(); e != nil {
			t.Fatalf("reflection error: %v", e)
		}
		return res
	}
	res := ask(&rpb.ServerReflectionRequest{MessageRequest: &rpb.ServerReflectionRequest_ListServices{}})
	var services []string
	for _, s := range res.GetListServicesResponse().GetService() {
		services = append(services, s.GetName())
	}
	for _, want := range []string{"cardex.v1.DiscoveryService", "cardex.v1.CatalogService", "grpc.health.v1.Health"} {
		if !slices.Contains(services, want) {
			t.Errorf("ListServices = %q, missing %s", services, want)
		}
	}
	// A client such as grpcurl can fetch the descriptors.
	for _, sym := range []string{"cardex.v1.DiscoveryService", "cardex.v1.DiscoverToolsRequest"} {
		res := ask(&rpb.ServerReflectionRequest{MessageRequest: &rpb.ServerReflectionRequest_FileContainingSymbol{FileContainingSymbol: sym}})
		if len(res.GetFileDescriptorResponse().GetFileDescriptorProto()) == 0 {
			t.Errorf("no file descriptor for %s", sym)
		}
	}
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
}
