package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// These tests run the real binary the way the README's tour does: serve on
// the embedded store, apply the example catalogue, discover, describe,
// authorize, stop with SIGTERM and start again on the same data directory.

// buildBinary builds the binary with flags once per test run (a build
// takes about 20 s on a loaded machine; the package's tests need the same
// binary over and over); removeBinaries (TestMain) deletes them.
func buildBinary(t testing.TB, flags ...string) string {
	t.Helper()
	v, _ := binaries.LoadOrStore(strings.Join(flags, "\x00"), &builtBinary{})
	b := v.(*builtBinary)
	b.once.Do(func() {
		dir, err := os.MkdirTemp("", "cardex-test-bin-")
		if err != nil {
			b.err = err
			return
		}
		b.path = filepath.Join(dir, "cardex")
		b.out, b.err = exec.Command("go", append(append([]string{"build"}, flags...), "-o", b.path, ".")...).CombinedOutput()
	})
	if b.err != nil {
		t.Fatalf("go build: %v\n%s", b.err, b.out)
	}
	return b.path
}

// builtBinary is one build of buildBinary.
type builtBinary struct {
	once sync.Once
	path string
	out  []byte
	err  error
}

// binaries are the builds of this test run, by their flags.
var binaries sync.Map

// removeBinaries deletes the builds of this test run.
func removeBinaries() {
	binaries.Range(func(_, v any) bool {
		if b := v.(*builtBinary); b.path != "" {
			os.RemoveAll(filepath.Dir(b.path))
		}
		return true
	})
}

var (
	addrRE = regexp.MustCompile(`msg="cardex serving" addr=(\S+)`)
	httpRE = regexp.MustCompile(`msg="agent surfaces" http=(\S+)`)
)

// startServer runs `cardex serve` and returns its address once it listens.
func startServer(t *testing.T, bin, dataDir string) (addr string, stop func()) {
	t.Helper()
	addr, _, stop = startServerHTTP(t, bin, dataDir)
	return addr, stop
}

// startServerHTTP also returns the HTTP listener's address (on a free port
// unless CARDEX_HTTP_LISTEN names one).
func startServerHTTP(t *testing.T, bin, dataDir string, extra ...string) (addr, httpAddr string, stop func()) {
	t.Helper()
	args := []string{"serve", "--data-dir", dataDir, "--listen", "127.0.0.1:0"}
	if os.Getenv("CARDEX_HTTP_LISTEN") == "" {
		args = append(args, "--http-listen", "127.0.0.1:0")
	}
	cmd := exec.Command(bin, append(args, extra...)...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
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
	select {
	case addr = <-found:
		httpAddr = <-foundHTTP // logged before the gRPC listener
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatal("server did not start within 30s")
	}
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("serve exited with %v after SIGTERM; want a clean exit", err)
			}
		case <-time.After(15 * time.Second):
			cmd.Process.Kill()
			t.Error("serve did not stop within 15s of SIGTERM")
		}
	}
	t.Cleanup(stop)
	return addr, httpAddr, stop
}

func run(t *testing.T, bin, addr string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "CARDEX_ADDR="+addr)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	if code != 0 {
		t.Logf("%v exited %d: %s", args, code, stderr.String())
	}
	return string(out), code
}

func TestTourAndRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildBinary(t)
	data := t.TempDir()
	addr, stop := startServer(t, bin, data)

	out, code := run(t, bin, addr, "cards", "apply", "-f", "../../examples/")
	if code != 0 || !regexp.MustCompile(`\d+ created, 0 updated, 0 unchanged`).MatchString(out) {
		t.Fatalf("apply: exit %d\n%s", code, out)
	}
	if !strings.Contains(out, "server entries: 8 created, 0 updated, 0 unchanged") || !strings.Contains(out, "(server entry)") {
		t.Errorf("apply should register the examples' 6 acme + 2 globex server entries:\n%s", out)
	}
	out, _ = run(t, bin, addr, "cards", "apply", "-f", "../../examples/")
	if !strings.Contains(out, "0 created, 0 updated,") || !strings.Contains(out, "server entries: 0 created, 0 updated, 8 unchanged") {
		t.Fatalf("second apply should change nothing:\n%s", out)
	}
	out, code = run(t, bin, addr, "servers", "list", "--tenant", "acme")
	for _, name := range []string{"analytics", "billing", "github", "infra", "orders", "support", "Helpdesk"} {
		if code != 0 || !strings.Contains(out, name) {
			t.Errorf("servers list: exit %d, no %s:\n%s", code, name, out)
		}
	}
	out, code = run(t, bin, addr, "servers", "get", "github", "--tenant", "acme", "-o", "json")
	var gh struct {
		Name, Title, Description string
		Version                  int64
	}
	if err := json.Unmarshal([]byte(out), &gh); code != 0 || err != nil || gh.Title != "GitHub" || gh.Version != 1 {
		t.Errorf("servers get github: exit %d, %v: %+v\n%s", code, err, gh, out)
	}
	if _, code = run(t, bin, addr, "servers", "get", "nope", "--tenant", "acme"); code == 0 {
		t.Error("servers get of a missing entry succeeded")
	}

	support := []string{"--tenant", "acme", "--scopes", "support:read,support:write,orders:read,billing:read"}
	out, code = run(t, bin, addr, append([]string{"discover", "refund the customer's invoice", "-o", "json"}, support...)...)
	if code != 0 {
		t.Fatalf("discover exit %d", code)
	}
	var resp struct {
		Tools []struct {
			Card struct {
				Server, Name   string
				RequiredScopes []string        `json:"required_scopes"`
				InputSchema    json.RawMessage `json:"input_schema"`
				Version        int64           `json:"version"`
			}
		}
		CandidateCount int `json:"candidate_count"`
	}
	if err := json.Unmarshal([]byte(out), &resp); err != nil {
		t.Fatalf("discover -o json: %v\n%s", err, out)
	}
	if len(resp.Tools) != 5 || resp.CandidateCount == 0 {
		t.Fatalf("want 5 tools from a non-empty candidate set, got %d of %d", len(resp.Tools), resp.CandidateCount)
	}
	for _, tool := range resp.Tools {
		for _, s := range tool.Card.RequiredScopes {
			if strings.HasSuffix(s, ":admin") {
				t.Errorf("support caller was shown %s/%s requiring %s", tool.Card.Server, tool.Card.Name, s)
			}
		}
		if len(tool.Card.InputSchema) == 0 || tool.Card.InputSchema[0] != '{' || tool.Card.Version != 1 {
			t.Errorf("%s/%s came without its schema as an object, or without its version: %s v%d", tool.Card.Server, tool.Card.Name, tool.Card.InputSchema, tool.Card.Version)
		}
	}

	if _, code = run(t, bin, addr, append([]string{"describe", "billing/issue_refund"}, support...)...); code == 0 {
		t.Error("support caller could describe billing/issue_refund")
	}
	if _, code = run(t, bin, addr, "describe", "billing/issue_refund", "--tenant", "acme", "--scopes", "billing:*"); code != 0 {
		t.Error("billing admin could not describe billing/issue_refund")
	}
	if _, code = run(t, bin, addr, append([]string{"authorize", "billing/issue_refund", "--args", "{}"}, support...)...); code != 2 {
		t.Errorf("authorize of a forbidden tool: exit %d, want 2", code)
	}

	// Stop (SIGTERM, graceful) and start again on the same directory.
	stop()
	addr, _ = startServer(t, bin, data)
	out, code = run(t, bin, addr, "cards", "list", "--tenant", "acme", "--all", "-o", "json")
	if code != 0 {
		t.Fatalf("list after restart: exit %d", code)
	}
	var list struct{ Cards []json.RawMessage }
	if err := json.Unmarshal([]byte(out), &list); err != nil || len(list.Cards) < 40 {
		t.Fatalf("after restart want the catalogue back (40+ cards), got %d (%v)", len(list.Cards), err)
	}
	if out, code := run(t, bin, addr, "servers", "delete", "infra", "--tenant", "acme"); code != 0 || !strings.Contains(out, "deleted server entry acme/infra") {
		t.Errorf("servers delete after restart: exit %d\n%s", code, out)
	}
	out, _ = run(t, bin, addr, "servers", "list", "--tenant", "acme", "-o", "json")
	var servers struct{ Servers []struct{ Name string } }
	if err := json.Unmarshal([]byte(out), &servers); err != nil || len(servers.Servers) != 5 {
		t.Errorf("servers after one delete: %v %+v", err, servers)
	}
	out2, _ := run(t, bin, addr, append([]string{"discover", "refund the customer's invoice", "-o", "json"}, support...)...)
	var resp2 struct {
		Tools []struct{ Card struct{ Server, Name string } }
	}
	json.Unmarshal([]byte(out2), &resp2)
	if len(resp2.Tools) != len(resp.Tools) {
		t.Fatalf("after restart: %d tools, before: %d", len(resp2.Tools), len(resp.Tools))
	}
	for i := range resp.Tools {
		if resp.Tools[i].Card.Name != resp2.Tools[i].Card.Name || resp.Tools[i].Card.Server != resp2.Tools[i].Card.Server {
			t.Errorf("rank %d changed across restart: %s/%s vs %s/%s", i+1, resp.Tools[i].Card.Server, resp.Tools[i].Card.Name, resp2.Tools[i].Card.Server, resp2.Tools[i].Card.Name)
		}
	}
	if b, err := os.ReadFile(filepath.Join(data, "discoveries.jsonl")); err != nil || strings.Count(string(b), "\n") < 2 {
		t.Errorf("discovery log: %v, %d lines", err, strings.Count(string(b), "\n"))
	}
}
