package agents_test

import (
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/seed0cff8200/cardex/internal/faces/agents"
	"github.com/seed0cff8200/cardex/internal/faces/hostguard"
)

// TestHostAllowList: a page of another site whose name resolves to
// 127.0.0.1 (DNS rebinding) sends its own name as Host. Every surface of
// the loopback HTTP listener — /mcp, /console/, /metrics, /healthz,
// /readyz — refuses it, and answers loopback names and the configured ones
// (a proxy's). Only /mcp refused it before (the MCP SDK's own check).
func TestHostAllowList(t *testing.T) {
	dir := t.TempDir()
	ret, tf := oneTool(t, dir)
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	policy, err := hostguard.Parse("cardex.internal")
	if err != nil {
		t.Fatal(err)
	}
	s := serveSurfaces(t, agents.Config{Retriever: ret, DataDir: dir, Key: []byte("k"), TokenFile: tf, HTTPListen: "127.0.0.1:0",
		Health: ok, Metrics: ok, Console: ok, Hosts: policy})
	_, port, _ := net.SplitHostPort(s.Addr())
	get := func(path, host string) int {
		t.Helper()
		method, body := http.MethodGet, ""
		if path == "/mcp" {
			method, body = http.MethodPost, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
		}
		req, err := http.NewRequest(method, "http://"+s.Addr()+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		req.Header.Set("Authorization", "Bearer "+agentToken)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, path := range []string{"/mcp", "/console/", "/metrics", "/healthz", "/readyz"} {
		for _, tc := range []struct {
			host string
			want int
		}{
			{"rebind.example:" + port, http.StatusForbidden},
			{"rebind.example", http.StatusForbidden},
			{"10.1.2.3:" + port, http.StatusForbidden},
			{"127.0.0.1:" + port, http.StatusOK},
			{"localhost:" + port, http.StatusOK},
			{"[::1]:" + port, http.StatusOK},
			{"cardex.internal", http.StatusOK},
			{"CARDEX.internal:443", http.StatusOK},
		} {
			if got := get(path, tc.host); got != tc.want {
				t.Errorf("%s with Host %q: HTTP %d, want %d", path, tc.host, got, tc.want)
			}
		}
	}
}
