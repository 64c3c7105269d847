package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestVersionAndHealth: the version a release build sets is what `cardex
// version`, `--version` and MCP serverInfo say, and the HTTP listener
// answers /healthz and /readyz.
func TestVersionAndHealth(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	const v = "v9.8.7-test"
	bin := buildBinary(t, "-ldflags", "-X github.com/seed0cff8200/cardex/internal/ops/buildinfo.version="+v)
	out, code := run(t, bin, "", "version")
	if code != 0 || !strings.HasPrefix(out, "cardex "+v+" (") || !strings.Contains(out, "built with go") {
		t.Fatalf("version: exit %d, %q", code, out)
	}
	if alt, _ := run(t, bin, "", "--version"); alt != out {
		t.Fatalf("--version %q, version %q", alt, out)
	}
	out, _ = run(t, bin, "", "version", "-o", "json")
	var info struct {
		Version, Revision string
		GoVersion         string `json:"go_version"`
	}
	if err := json.Unmarshal([]byte(out), &info); err != nil || info.Version != v || info.GoVersion == "" {
		t.Fatalf("version -o json: %v %s", err, out)
	}

	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens.yaml")
	if err := os.WriteFile(tokens, []byte("tokens:\n  - {token: version-agent-0123456789, tenant: acme, subject: a, scopes: ['*']}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	addr, httpAddr, _ := startServerHTTP(t, bin, filepath.Join(dir, "data"), "--agent-tokens", tokens)
	if out, code := run(t, bin, "", "health", "--addr", addr); code != 0 || out != "SERVING\n" {
		t.Errorf("cardex health: exit %d %q", code, out)
	}
	for path, want := range map[string]string{"/healthz": "ok\n", "/readyz": "ready\n"} {
		resp, err := http.Get("http://" + httpAddr + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(b) != want {
			t.Errorf("GET %s: %d %q, want 200 %q", path, resp.StatusCode, b, want)
		}
	}
	tr := &mcp.StreamableClientTransport{Endpoint: "http://" + httpAddr + "/mcp", MaxRetries: -1,
		HTTPClient: &http.Client{Transport: bearerTransport{"version-agent-0123456789"}}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, nil).Connect(context.Background(), tr, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	want := v
	if info.Revision != "" {
		want += "+" + info.Revision[:12]
	}
	if got := cs.InitializeResult().ServerInfo.Version; !strings.HasPrefix(got, want) {
		t.Fatalf("serverInfo.version %q, want %q", got, want)
	}
}
