package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/seed0cff8200/cardex/cards/synth"
	"github.com/seed0cff8200/cardex/internal/codec/apiconv"
	"github.com/seed0cff8200/cardex/internal/testkit/pgtest"
	pb "github.com/seed0cff8200/cardex/proto/cardex/v1"
)

// nginxBinary finds nginx (Debian's, which scripts/test installs): skipped
// without it, except in CI, where it fails.
func nginxBinary(t *testing.T) string {
	t.Helper()
	for _, p := range []string{os.Getenv("CARDEX_NGINX"), "/usr/sbin/nginx"} {
		if p != "" {
			if _, err := os.Stat(p); err == nil {
				return p
			}
		}
	}
	if p, err := exec.LookPath("nginx"); err == nil {
		return p
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("CI=true: nginx not found (scripts/test installs Debian's nginx-light; or set CARDEX_NGINX)")
	}
	t.Skip("nginx not found (apt-get install nginx-light, or set CARDEX_NGINX)")
	return ""
}

func freePort(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// nginxConfig is deploy/nginx/cardex.conf as documented, with the replica
// lines between its "# replicas" markers and its listen ports replaced.
func nginxConfig(t testing.TB, dir, grpcListen, httpListen string, grpcReplicas, httpReplicas []string) string {
	t.Helper()
	doc, err := os.ReadFile("../../deploy/nginx/cardex.conf")
	if err != nil {
		t.Fatal(err)
	}
	blocks := [][]string{grpcReplicas, httpReplicas}
	parts := strings.Split(string(doc), "    # replicas\n")
	if len(parts) != 5 {
		t.Fatalf("deploy/nginx/cardex.conf: want two upstream blocks with their replicas between \"# replicas\" markers, found %d markers", len(parts)-1)
	}
	var b strings.Builder
	for i, p := range parts {
		switch i {
		case 1, 3:
			for _, addr := range blocks[i/2] {
				fmt.Fprintf(&b, "    server %s max_fails=1 fail_timeout=10s;\n", addr)
			}
		default:
			b.WriteString(p)
		}
	}
	conf := strings.Replace(b.String(), "listen 50051 http2;", "listen "+grpcListen+" http2;", 1)
	conf = strings.Replace(conf, "listen 8080;", "listen "+httpListen+";", 1)
	user := ""
	if os.Geteuid() == 0 {
		user = "user root;"
	}
	main := fmt.Sprintf(`%s
daemon off;
worker_processes 1;
pid %[2]s/nginx.pid;
error_log %[2]s/error.log warn;
events { worker_connections 256; }
http {
    access_log off;
    client_body_temp_path %[2]s/body;
    proxy_temp_path %[2]s/proxy;
    fastcgi_temp_path %[2]s/fastcgi;
    uwsgi_temp_path %[2]s/uwsgi;
    scgi_temp_path %[2]s/scgi;
    client_body_buffer_size 1m;
    client_max_body_size 16m;
%s
}
`, user, dir, conf)
	path := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(path, []byte(main), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestResidencyBehindNginx runs the documented nginx configuration on
// loopback in front of three replicas with tenant residency on one
// PostgreSQL (PGlite): each tenant ends up held by exactly one replica, and
// when one replica is killed, its tenants are served by the others, with
// no request lost by a client that retries once.
func TestResidencyBehindNginx(t *testing.T) {
	if testing.Short() {
		t.Skip("runs nginx, three replicas and PostgreSQL")
	}
	nginx := nginxBinary(t)
	url := pgtest.URL(t)
	schema := pgtest.NewSchemaName()
	bin := buildBinary(t)
	db := []string{"--database-url", url, "--database-schema", schema}
	if out, err := exec.Command(bin, append([]string{"migrate", "up"}, db...)...).CombinedOutput(); err != nil {
		t.Fatalf("migrate up: %v\n%s", err, out)
	}
	t.Cleanup(func() { pgtest.Exec(t, url, "DROP SCHEMA IF EXISTS "+schema+" CASCADE") })

	type replica struct {
		s              *served
		grpc, httpAddr string
	}
	var replicas []*replica
	var grpcAddrs, httpAddrs []string
	for range 3 {
		r := &replica{grpc: freePort(t), httpAddr: freePort(t)}
		r.s = serve(t, bin, append([]string{"--store", "postgres", "--listen", r.grpc, "--http-listen", r.httpAddr,
			"--data-dir", t.TempDir(), "--memory-budget", "256MiB", "--sync-interval", "500ms", "--rate-limit", "0", "--console=false"}, db...)...)
		if r.s.addr == "" {
			t.Fatalf("replica did not start:\n%s", r.s.log())
		}
		replicas = append(replicas, r)
		grpcAddrs, httpAddrs = append(grpcAddrs, r.grpc), append(httpAddrs, r.httpAddr)
	}
	dir := t.TempDir()
	proxyGRPC, proxyHTTP := freePort(t), freePort(t)
	conf := nginxConfig(t, dir, proxyGRPC, proxyHTTP, grpcAddrs, httpAddrs)
	if out, err := exec.Command(nginx, "-t", "-c", conf).CombinedOutput(); err != nil {
		t.Fatalf("nginx -t: %v\n%s", err, out)
	}
	ng := startNginx(t, nginx, conf)
	t.Cleanup(func() { stopNginx(ng) })
	for i := 0; ; i++ {
		if c, err := net.Dial("tcp", proxyGRPC); err == nil {
			c.Close()
			break
		}
		if i == 100 {
			log, _ := os.ReadFile(filepath.Join(dir, "error.log"))
			t.Fatalf("nginx did not listen:\n%s", log)
		}
		time.Sleep(50 * time.Millisecond)
	}

	conn, err := grpc.NewClient(proxyGRPC, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	cat, disc := pb.NewCatalogServiceClient(conn), pb.NewDiscoveryServiceClient(conn)
	routed := func(tenant string) context.Context {
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		t.Cleanup(cancel)
		return metadata.AppendToOutgoingContext(ctx, apiconv.TenantHeader, tenant)
	}

	// Tenants of skewed sizes, written through the proxy.
	var tenants []string
	for i := range 12 {
		tenant := fmt.Sprintf("tenant%02d", i)
		tenants = append(tenants, tenant)
		req := &pb.PutCardsRequest{}
		for _, c := range synth.Catalogue(60/(i+1)+2, int64(i+1), tenant) {
			req.Cards = append(req.Cards, apiconv.CardToProto(&c, true))
		}
		if _, err := cat.PutCards(routed(tenant), req); err != nil {
			t.Fatalf("PutCards %s: %v", tenant, err)
		}
	}
	// discoverAll asks once for every tenant through the proxy, retrying a
	// failed call once, and returns the calls that failed twice.
	discoverAll := func() (failed []string) {
		for _, tenant := range tenants {
			req := &pb.DiscoverToolsRequest{Caller: &pb.Caller{Tenant: tenant, Subject: "proxy-test", Scopes: []string{"*"}}, Query: "list the overdue invoices"}
			var res *pb.DiscoverToolsResponse
			var err error
			for try := 0; try < 2; try++ {
				if res, err = disc.DiscoverTools(routed(tenant), req); err == nil {
					break
				}
				if c := status.Code(err); c != codes.Unavailable && c != codes.Internal && c != codes.Unknown {
					break
				}
				time.Sleep(200 * time.Millisecond)
			}
			switch {
			case err != nil:
				failed = append(failed, tenant+": "+err.Error())
			case len(res.GetTools()) == 0:
				failed = append(failed, tenant+": an empty shortlist")
			}
		}
		return failed
	}
	for round := range 2 {
		if failed := discoverAll(); len(failed) > 0 {
			t.Fatalf("round %d through nginx: %q", round, failed)
		}
	}
	held := func(r *replica) (tenants, loads float64) {
		fams := scrapeMetrics(t, "http://"+r.httpAddr+"/metrics")
		return metricValue(fams, "cardex_resident_tenants"), metricValue(fams, "cardex_tenant_loads_total")
	}
	var sumHeld, sumLoads float64
	most := replicas[0]
	var mostHeld float64
	for i, r := range replicas {
		h, l := held(r)
		t.Logf("replica %d holds %v tenants (%v loads)", i, h, l)
		sumHeld += h
		sumLoads += l
		if h > mostHeld {
			most, mostHeld = r, h
		}
	}
	if sumHeld != float64(len(tenants)) || sumLoads != float64(len(tenants)) {
		t.Fatalf("the replicas hold %v tenants after %v loads; want each of the %d tenants held by exactly one replica", sumHeld, sumLoads, len(tenants))
	}
	if mostHeld == float64(len(tenants)) {
		t.Fatalf("one replica holds every tenant: nginx did not spread them")
	}

	// Kill the replica holding the most tenants: its tenants move to the
	// others, and a client that retries once loses nothing.
	most.s.cmd.Process.Signal(syscall.SIGKILL)
	<-most.s.exited
	most.s.exited <- nil
	if failed := discoverAll(); len(failed) > 0 {
		t.Fatalf("after killing a replica: %d requests failed after one retry: %q", len(failed), failed)
	}
	sumHeld = 0
	for _, r := range replicas {
		if r == most {
			continue
		}
		h, _ := held(r)
		sumHeld += h
	}
	if sumHeld != float64(len(tenants)) {
		t.Errorf("after the kill the two replicas left hold %v tenants; want all %d", sumHeld, len(tenants))
	}
}

// startNginx runs nginx with conf in a process group of its own, so that
// stopNginx leaves none of its workers behind.
func startNginx(t testing.TB, nginx, conf string) *exec.Cmd {
	t.Helper()
	ng := exec.Command(nginx, "-c", conf)
	ng.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := ng.Start(); err != nil {
		t.Fatal(err)
	}
	return ng
}

// stopNginx asks nginx to stop (SIGTERM: the master ends its workers) and
// kills its process group if it has not within 5 s.
func stopNginx(ng *exec.Cmd) {
	ng.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { ng.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
	}
	syscall.Kill(-ng.Process.Pid, syscall.SIGKILL)
	<-done
}
