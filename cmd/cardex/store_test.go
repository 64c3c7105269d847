package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/seed0cff8200/cardex/internal/testkit/pgtest"
	"github.com/seed0cff8200/cardex/migrations"
)

// TestPostgresServe: `cardex serve --store postgres` on a database whose
// schema is not migrated listens but reports NOT_SERVING, answers discovery
// Unavailable and /readyz 503; `cardex migrate up` makes it SERVING without
// a restart; then the tour works on it. While the database is unreachable
// the catalog service is NOT_SERVING and /readyz 503, and discovery answers
// degraded.
func TestPostgresServe(t *testing.T) {
	url := pgtest.URL(t)
	schema := pgtest.NewSchemaName()
	pgtest.Open(t, pgtest.Options{URL: url, Schema: schema, NoMigrate: true}) // dropped at the end
	bin := buildBinary(t)
	db := []string{"--database-url", url, "--database-schema", schema}

	if out, code := run(t, bin, "", append([]string{"migrate", "status"}, db...)...); code != 3 || !strings.Contains(out, "pending") {
		t.Errorf("migrate status on an empty schema: exit %d\n%s", code, out)
	}

	proxy, proxied := pgtest.NewProxy(t, url)
	cmd := exec.Command(bin, "serve", "--store", "postgres", "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0",
		"--database-url", proxied, "--database-schema", schema)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			t.Error("serve did not stop within 15s of SIGTERM")
		}
	})
	found := make(chan string, 1)
	foundHTTP := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if m := httpRE.FindStringSubmatch(sc.Text()); m != nil {
				foundHTTP <- m[1]
			}
			if m := addrRE.FindStringSubmatch(sc.Text()); m != nil {
				found <- m[1]
			}
		}
	}()
	var addr, httpAddr string
	select {
	case addr = <-found:
		httpAddr = <-foundHTTP
	case <-time.After(30 * time.Second):
		t.Fatal("server did not start within 30s")
	}
	readyz := func() (int, string) {
		resp, err := http.Get("http://" + httpAddr + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	hc := healthpb.NewHealthClient(conn)
	healthOf := func(svc string) healthpb.HealthCheckResponse_ServingStatus {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		res, err := hc.Check(ctx, &healthpb.HealthCheckRequest{Service: svc})
		if err != nil {
			t.Fatalf("health: %v", err)
		}
		return res.GetStatus()
	}
	health := func() healthpb.HealthCheckResponse_ServingStatus { return healthOf("cardex.v1.DiscoveryService") }
	if st := health(); st != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Errorf("health before migrate = %s, want NOT_SERVING", st)
	}
	if _, code := run(t, bin, addr, "cards", "apply", "-f", "../../examples/"); code == 0 {
		t.Error("cards apply before migrate succeeded")
	}
	// Discovery too is Unavailable, not an empty shortlist.
	if out, stderr, code := runErr(t, bin, addr, "discover", "restart a service", "--tenant", "acme", "--scopes", "*"); code != 1 ||
		!strings.Contains(stderr, "not serving yet") || out != "" {
		t.Errorf("discover before migrate: exit %d, stdout %q, stderr %q", code, out, stderr)
	}
	if code, body := readyz(); code != http.StatusServiceUnavailable || !strings.Contains(body, "not ready") {
		t.Errorf("/readyz before migrate: %d %q", code, body)
	}
	if out, code := run(t, bin, "", "health", "--addr", addr); code != 1 || out != "NOT_SERVING\n" {
		t.Errorf("cardex health before migrate: exit %d %q", code, out)
	}

	sql, err := fs.Glob(migrations.FS, "*.sql")
	if err != nil || len(sql) == 0 {
		t.Fatalf("migrations: %v %v", sql, err)
	}
	out, code := run(t, bin, "", append([]string{"migrate", "up"}, db...)...)
	if code != 0 || !strings.Contains(out, fmt.Sprintf("applied %d migration(s)", len(sql))) {
		t.Fatalf("migrate up: exit %d\n%s", code, out)
	}
	if out, code := run(t, bin, "", append([]string{"migrate", "up"}, db...)...); code != 0 || !strings.Contains(out, "nothing to apply") {
		t.Errorf("second migrate up: exit %d\n%s", code, out)
	}
	if out, code := run(t, bin, "", append([]string{"migrate", "status"}, db...)...); code != 0 || strings.Contains(out, "pending") {
		t.Errorf("migrate status after up: exit %d\n%s", code, out)
	}
	deadline := time.Now().Add(15 * time.Second)
	for health() != healthpb.HealthCheckResponse_SERVING {
		if time.Now().After(deadline) {
			t.Fatal("not SERVING within 15s of migrate up")
		}
		time.Sleep(100 * time.Millisecond)
	}

	if out, code := run(t, bin, addr, "cards", "apply", "-f", "../../examples/"); code != 0 || !strings.Contains(out, "58 created") {
		t.Fatalf("cards apply: exit %d\n%s", code, out)
	}
	out, code = run(t, bin, addr, "discover", "customer wants their money back for order 1234",
		"--tenant", "acme", "--scopes", "support:read,support:write,orders:read,billing:read")
	if code != 0 || !strings.Contains(out, "billing/request_refund_approval") || !strings.Contains(out, "semantic #1") ||
		!strings.Contains(out, "of 18 authorized tools") {
		t.Errorf("discover: exit %d\n%s", code, out)
	}
	if code, body := readyz(); code != http.StatusOK || body != "ready\n" {
		t.Errorf("/readyz: %d %q", code, body)
	}

	// The database goes away: catalog NOT_SERVING, discovery SERVING and degraded.
	proxy.Cut()
	deadline = time.Now().Add(15 * time.Second)
	for healthOf("cardex.v1.CatalogService") != healthpb.HealthCheckResponse_NOT_SERVING {
		if time.Now().After(deadline) {
			t.Fatal("the catalog service stayed SERVING with the database unreachable")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if st := health(); st != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("discovery health with the database down = %s, want SERVING (degraded)", st)
	}
	if code, body := readyz(); code != http.StatusServiceUnavailable {
		t.Errorf("/readyz with the database down: %d %q", code, body)
	}
	out, code = run(t, bin, addr, "discover", "customer wants their money back for order 1234", "--tenant", "acme", "--scopes", "*")
	if code != 0 || !strings.Contains(out, "degraded: part of the search was unavailable") || !strings.Contains(out, "billing/") {
		t.Errorf("discover with the database down: exit %d\n%s", code, out)
	}
	proxy.Restore()
	deadline = time.Now().Add(15 * time.Second)
	for healthOf("cardex.v1.CatalogService") != healthpb.HealthCheckResponse_SERVING {
		if time.Now().After(deadline) {
			t.Fatal("the catalog service did not come back")
		}
		time.Sleep(100 * time.Millisecond)
	}
}
