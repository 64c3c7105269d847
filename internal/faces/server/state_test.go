package server_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/seed0cff8200/cardex/cards"
	"github.com/seed0cff8200/cardex/internal/faces/server"
	pb "github.com/seed0cff8200/cardex/proto/cardex/v1"
)

// TestState: until the schema is current, discovery answers Unavailable
// (never an empty shortlist) and every service is NOT_SERVING; while the
// store does not answer, only the catalog service is NOT_SERVING; /readyz
// follows both.
func TestState(t *testing.T) {
	st := server.NewState(errors.New("3 migration(s) pending: run `cardex migrate up`"))
	e := newEnv(t, envOptions{state: st, cards: []cards.Card{{Tenant: "acme", Server: "s", Name: "restart_service", Summary: "Restart a service."}}})
	hc := healthpb.NewHealthClient(e.conn)
	health := func(svc string) healthpb.HealthCheckResponse_ServingStatus {
		res, err := hc.Check(rpcCtx(t), &healthpb.HealthCheckRequest{Service: svc})
		if err != nil {
			t.Fatal(err)
		}
		return res.GetStatus()
	}
	web := httptest.NewServer(st.HTTP())
	defer web.Close()
	get := func(path string) (int, string) {
		resp, err := http.Get(web.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	caller := &pb.Caller{Tenant: "acme", Scopes: []string{"*"}}
	discover := func() error {
		_, err := e.disc.DiscoverTools(rpcCtx(t), &pb.DiscoverToolsRequest{Caller: caller, Query: "restart a service"})
		return err
	}
	disc, cat := pb.DiscoveryService_ServiceDesc.ServiceName, pb.CatalogService_ServiceDesc.ServiceName

	err := discover()
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "not serving yet: 3 migration(s) pending") {
		t.Fatalf("DiscoverTools before the schema: %v", err)
	}
	if _, err := e.disc.DescribeTool(rpcCtx(t), &pb.DescribeToolRequest{Caller: caller, Name: "restart_service"}); status.Code(err) != codes.Unavailable {
		t.Fatalf("DescribeTool before the schema: %v", err)
	}
	for _, svc := range []string{"", disc, cat} {
		if got := health(svc); got != healthpb.HealthCheckResponse_NOT_SERVING {
			t.Errorf("health %q before the schema = %s", svc, got)
		}
	}
	if code, body := get("/readyz"); code != 503 || !strings.Contains(body, "not ready: 3 migration(s) pending") {
		t.Errorf("/readyz before the schema: %d %q", code, body)
	}
	if code, body := get("/healthz"); code != 200 || body != "ok\n" {
		t.Errorf("/healthz: %d %q", code, body)
	}

	st.SetSchema(nil)
	if err := discover(); err != nil {
		t.Fatalf("DiscoverTools once serving: %v", err)
	}
	for _, svc := range []string{"", disc, cat} {
		if got := health(svc); got != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("health %q = %s", svc, got)
		}
	}
	if code, _ := get("/readyz"); code != 200 {
		t.Errorf("/readyz once serving: %d", code)
	}

	st.SetStore(errors.New("connection refused"))
	if got := health(cat); got != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Errorf("catalog health with the store down = %s", got)
	}
	if got := health(disc); got != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("discovery health with the store down = %s (it answers, degraded)", got)
	}
	if err := discover(); err != nil {
		t.Errorf("DiscoverTools with the store down: %v", err)
	}
	if code, body := get("/readyz"); code != 503 || !strings.Contains(body, "connection refused") {
		t.Errorf("/readyz with the store down: %d %q", code, body)
	}
	st.SetStore(nil)
	if got := health(cat); got != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("catalog health after the store is back = %s", got)
	}
}
