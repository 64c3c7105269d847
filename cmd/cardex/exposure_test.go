package main

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"

	"github.com/seed0cff8200/cardex/internal/access/tokens"
	"github.com/seed0cff8200/cardex/internal/testkit/pgtest"
	"github.com/seed0cff8200/cardex/internal/testkit/testpki"
)

// served is a running `cardex serve`.
type served struct {
	cmd    *exec.Cmd
	addr   string // as logged
	dial   string // a loopback address to reach it
	mu     sync.Mutex
	stderr strings.Builder
	exited chan error
}

func (s *served) log() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stderr.String()
}

// serve starts `cardex serve ARGS` and waits until it listens or exits.
func serve(t *testing.T, bin string, args ...string) *served {
	t.Helper()
	// No HTTP listener unless asked for: a fixed port would collide.
	s := &served{cmd: exec.Command(bin, append([]string{"serve", "--http-listen", ""}, args...)...), exited: make(chan error, 1)}
	s.cmd.Env = append(os.Environ(), "CARDEX_CATALOG_TOKEN=", "CARDEX_SERVICE_TOKENS=", "CARDEX_AGENT_TOKENS=")
	stderr, err := s.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			s.mu.Lock()
			s.stderr.WriteString(sc.Text() + "\n")
			s.mu.Unlock()
			if m := addrRE.FindStringSubmatch(sc.Text()); m != nil {
				found <- m[1]
			}
		}
		s.exited <- s.cmd.Wait()
	}()
	select {
	case s.addr = <-found:
	case err := <-s.exited:
		s.exited <- err
		return s
	case <-time.After(60 * time.Second):
		s.cmd.Process.Kill()
		t.Fatalf("serve did not start within 60s:\n%s", s.log())
	}
	_, port, _ := net.SplitHostPort(s.addr)
	s.dial = net.JoinHostPort("127.0.0.1", port)
	t.Cleanup(func() { s.stop(t) })
	return s
}

func (s *served) stop(t *testing.T) {
	if s.cmd.ProcessState != nil {
		return
	}
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(15 * time.Second):
		s.cmd.Process.Kill()
		<-s.exited
		t.Error("serve did not stop within 15s of SIGTERM")
	}
}

// exitedWith waits for a serve that must not start and returns its log.
func (s *served) exitedWith(t *testing.T) string {
	t.Helper()
	select {
	case err := <-s.exited:
		if err == nil {
			t.Errorf("serve exited 0; want a failure")
		}
		return s.log()
	case <-time.After(60 * time.Second):
		s.cmd.Process.Kill()
		t.Fatalf("serve still running; want a refusal:\n%s", s.log())
	}
	return ""
}

func healthWarnings(t *testing.T, addr string, opts ...grpc.DialOption) []string {
	t.Helper()
	if opts == nil {
		opts = []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	}
	conn, err := grpc.NewClient(addr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	var md metadata.MD
	if _, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Header(&md)); err != nil {
		t.Fatalf("health: %v", err)
	}
	return md.Get("cardex-warning")
}

// TestServeRefusesExposure: a newcomer who exposes the service by accident
// gets a refusal, not an open door (the review's finding 1).
func TestServeRefusesExposure(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildBinary(t)

	// No credential configured, every interface: refused, with what to do.
	for _, listen := range []string{"0.0.0.0:0", ":0"} {
		s := serve(t, bin, "--data-dir", t.TempDir(), "--listen", listen)
		log := s.exitedWith(t)
		for _, want := range []string{"refusing to listen", "DiscoveryService, CatalogService accept calls without a credential", "--service-tokens", "--insecure"} {
			if !strings.Contains(log, want) {
				t.Errorf("--listen %s: log lacks %q:\n%s", listen, want, log)
			}
		}
	}
	// A catalog token alone leaves DiscoveryService open: refused too.
	s := serve(t, bin, "--data-dir", t.TempDir(), "--listen", "0.0.0.0:0", "--catalog-token-file", writeTemp(t, "catalog-token", "a-catalog-token-0123456789"))
	if log := s.exitedWith(t); !strings.Contains(log, "DiscoveryService accept calls without a credential") {
		t.Errorf("catalog token only: %s", log)
	}

	// --insecure starts, and says so at start and in health checks.
	s = serve(t, bin, "--data-dir", t.TempDir(), "--listen", "0.0.0.0:0", "--insecure")
	if s.addr == "" {
		t.Fatalf("--insecure did not start:\n%s", s.log())
	}
	if !strings.Contains(s.log(), "level=WARN msg=\"insecure (--insecure)") {
		t.Errorf("no start-up warning:\n%s", s.log())
	}
	if w := healthWarnings(t, s.dial); len(w) != 2 || !strings.Contains(strings.Join(w, "\n"), "insecure (--insecure): DiscoveryService, CatalogService accept calls without a credential") {
		t.Errorf("health warnings %q", w)
	}
	s.stop(t)

	// Loopback without credentials: the README's tour, and it says so.
	s = serve(t, bin, "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0")
	if !strings.Contains(s.log(), "listening on loopback only") {
		t.Errorf("loopback start does not say so:\n%s", s.log())
	}
	if w := healthWarnings(t, s.dial); len(w) != 0 {
		t.Errorf("loopback health warnings %q", w)
	}
	s.stop(t)
}

func writeTemp(t *testing.T, name, content string) string {
	t.Helper()
	return writeFileIn(t, t.TempDir(), name, content)
}

// writeFileIn writes content to dir/name (mode 0600) and returns its path.
func writeFileIn(t testing.TB, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestServeExposedWithTokensAndTLS: with service tokens and TLS, serve
// listens on every interface, and the CLI reaches it with --token and
// --tls-ca.
func TestServeExposedWithTokensAndTLS(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildBinary(t)
	const admin, discover = "an-admin-token-0123456789", "a-discover-token-0123456789"
	tokens := writeTemp(t, "tokens.yaml", fmt.Sprintf("tokens:\n  - {name: ops, role: admin, token_sha256: %s}\n"+
		"  - {name: support-bot, role: discover, token_sha256: %s, caller: {tenant: acme, scopes: [support:read, orders:read]}}\n",
		tokens.HashToken(admin), tokens.HashToken(discover)))

	// Tokens without TLS: starts, with a warning that credentials travel in clear.
	s := serve(t, bin, "--data-dir", t.TempDir(), "--listen", "0.0.0.0:0", "--service-tokens", tokens)
	if s.addr == "" {
		t.Fatalf("did not start:\n%s", s.log())
	}
	if w := healthWarnings(t, s.dial); len(w) != 1 || !strings.Contains(w[0], "without TLS") {
		t.Errorf("health warnings %q", w)
	}
	s.stop(t)

	p := testpki.New(t)
	data := t.TempDir()
	s = serve(t, bin, "--data-dir", data, "--listen", "0.0.0.0:0", "--service-tokens", tokens, "--tls-cert", p.ServerCert, "--tls-key", p.ServerKey)
	if s.addr == "" {
		t.Fatalf("did not start:\n%s", s.log())
	}
	tlsFlags := []string{"--tls-ca", p.CA}
	// Health checks need no token, but TLS like every client.
	if out, code := run(t, bin, s.dial, append([]string{"health"}, tlsFlags...)...); code != 0 || out != "SERVING\n" {
		t.Errorf("health over TLS: exit %d, %q", code, out)
	}
	if _, code := run(t, bin, s.dial, "health", "--timeout", "1s"); code == 0 {
		t.Error("a plaintext health check was answered")
	}
	out, code := run(t, bin, s.dial, append([]string{"cards", "apply", "-f", "../../examples/", "--token", admin}, tlsFlags...)...)
	if code != 0 || !strings.Contains(out, "58 created") {
		t.Fatalf("apply with the admin token over TLS: exit %d\n%s", code, out)
	}
	if _, code := run(t, bin, s.dial, "cards", "apply", "-f", "../../examples/", "--token", admin); code == 0 {
		t.Error("a plaintext client was answered")
	}
	if _, code := run(t, bin, s.dial, append([]string{"cards", "apply", "-f", "../../examples/"}, tlsFlags...)...); code == 0 {
		t.Error("apply without a token was accepted")
	}
	// The bound token's caller, whatever --scopes claims (--tenant may repeat the binding's).
	out, code = run(t, bin, s.dial, append([]string{"discover", "refund the customer", "--token", discover, "--tenant", "acme", "-o", "json"}, tlsFlags...)...)
	if code != 0 || !strings.Contains(out, `"candidate_count"`) {
		t.Fatalf("discover with the bound token: exit %d\n%s", code, out)
	}
	if _, code := run(t, bin, s.dial, append([]string{"discover", "refund", "--token", discover, "--tenant", "acme", "--scopes", "*"}, tlsFlags...)...); code == 0 {
		t.Error("the bound token widened to scopes *")
	}
	// A bound token names the tenant: --tenant may be left out.
	out, code = run(t, bin, s.dial, append([]string{"discover", "refund the customer", "--token", discover, "-o", "json"}, tlsFlags...)...)
	if code != 0 || !strings.Contains(out, `"candidate_count"`) {
		t.Fatalf("discover with the bound token and no --tenant: exit %d\n%s", code, out)
	}
	// An unbound one does not: the server says what is missing.
	if _, stderr, code := runErr(t, bin, s.dial, append([]string{"discover", "refund", "--token", admin}, tlsFlags...)...); code == 0 || !strings.Contains(stderr, "caller.tenant") {
		t.Errorf("discover with an unbound token and no --tenant: exit %d, %q", code, stderr)
	}
	trail, err := os.ReadFile(filepath.Join(data, "audit-trail.jsonl"))
	if err != nil || strings.Count(string(trail), `"type":"catalog_write","method":"PutCards"`) != 58 ||
		!strings.Contains(string(trail), `"method":"PutServers"`) || !strings.Contains(string(trail), `"principal":"ops"`) {
		t.Errorf("audit trail: %v\n%.2000s", err, trail)
	}
}

// TestServeTokensFromDatabase: replicas started with --service-tokens-db
// accept the tokens `cardex token new --database-url` adds, and count as
// protected, so they may listen on every interface.
func TestServeTokensFromDatabase(t *testing.T) {
	url := pgtest.URL(t)
	schema := pgtest.NewSchemaName()
	pgtest.Open(t, pgtest.Options{URL: url, Schema: schema}) // migrated; dropped at the end
	bin := buildBinary(t)
	db := []string{"--database-url", url, "--database-schema", schema}

	cmd := exec.Command(bin, append([]string{"token", "new", "--name", "ops", "--role", "admin"}, db...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil || !strings.Contains(string(out), "added ops (role admin) to service_tokens") {
		t.Fatalf("token new --database-url: %v\n%s%s", err, out, stderr.String())
	}
	_, token, ok := strings.Cut(strings.TrimSpace(stderr.String()), "keeps only its hash): ")
	if !ok || len(token) < 40 {
		t.Fatalf("no token on stderr: %q", stderr.String())
	}

	s := serve(t, bin, append([]string{"--store", "postgres", "--data-dir", t.TempDir(), "--listen", "0.0.0.0:0", "--http-listen", "", "--service-tokens-db"}, db...)...)
	if s.addr == "" {
		t.Fatalf("serve --service-tokens-db did not start:\n%s", s.log())
	}
	waitServing(t, s.dial)
	if out, code := run(t, bin, s.dial, "cards", "apply", "-f", "../../examples/", "--token", token); code != 0 || !strings.Contains(out, "58 created") {
		t.Fatalf("apply with the database's admin token: exit %d\n%s", code, out)
	}
	if _, code := run(t, bin, s.dial, "discover", "refund", "--tenant", "acme", "--scopes", "*"); code == 0 {
		t.Error("discover without a token was answered")
	}
	if out, code := run(t, bin, "", append([]string{"token", "delete", "ops"}, db...)...); code != 0 || !strings.Contains(out, "deleted ops") {
		t.Errorf("token delete: exit %d\n%s", code, out)
	}
}

// waitServing waits until the health service answers SERVING (a postgres
// replica turns SERVING once its schema is current).
func waitServing(t *testing.T, addr string) {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		res, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
		cancel()
		if err == nil && res.GetStatus() == healthpb.HealthCheckResponse_SERVING {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not SERVING within 60s: %v %v", res, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
