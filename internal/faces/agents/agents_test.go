package agents_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/seed0cff8200/cardex/cards"
	"github.com/seed0cff8200/cardex/cards/embedded"
	"github.com/seed0cff8200/cardex/embed"
	"github.com/seed0cff8200/cardex/internal/access/auth"
	"github.com/seed0cff8200/cardex/internal/access/ratelimit"
	"github.com/seed0cff8200/cardex/internal/faces/agents"
	"github.com/seed0cff8200/cardex/internal/testkit/testpki"
	"github.com/seed0cff8200/cardex/retriever"
)

const agentToken = "agent-token-0123456789ab"

// oneTool is a retriever over a store in dir holding one card, and the
// token file of an agent that may use everything.
func oneTool(t *testing.T, dir string) (*retriever.Retriever, string) {
	t.Helper()
	store, err := embedded.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	ctx := context.Background()
	if _, err := store.Put(ctx, []cards.Card{{Tenant: "acme", Server: "orders", Name: "get_order", Summary: "Show one order.", Kind: cards.KindMCPTool}}); err != nil {
		t.Fatal(err)
	}
	ret, err := retriever.New(ctx, store, embed.NewHashed(embed.DefaultDim), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ret.Close() })
	tf := filepath.Join(dir, "tokens.yaml")
	if err := os.WriteFile(tf, []byte("tokens:\n  - {token: "+agentToken+", tenant: acme, subject: agent-1, scopes: ['*']}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return ret, tf
}

// openMCP serves /mcp on loopback with TLS and the given limiter and
// returns its URL and an HTTPS client that trusts it.
func openMCP(t *testing.T, lim *ratelimit.Limiter) (string, *http.Client) {
	t.Helper()
	dir := t.TempDir()
	ret, tf := oneTool(t, dir)
	p := testpki.New(t)
	tlsCfg, err := auth.ServerTLS(p.ServerCert, p.ServerKey, "")
	if err != nil {
		t.Fatal(err)
	}
	s := serveSurfaces(t, agents.Config{Retriever: ret, DataDir: dir, Key: []byte("k"), TokenFile: tf, HTTPListen: "127.0.0.1:0", TLS: tlsCfg, Limiter: lim})
	clientTLS, err := auth.ClientTLS(p.CA, "", "", "")
	if err != nil {
		t.Fatal(err)
	}
	return "https://" + s.Addr() + "/mcp", &http.Client{Transport: &http.Transport{TLSClientConfig: clientTLS}, Timeout: 10 * time.Second}
}

func post(t *testing.T, c *http.Client, url, token, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res
}

const (
	searchBody = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"search_tools","arguments":{"query":"order"}}}`
	callBody   = `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"call_tool","arguments":{"name":"get_order","arguments":{}}}}`
)

// TestMCPRateLimit: /mcp over TLS answers 429 with Retry-After once an
// agent's bucket is empty; search and describe have twice the call rate.
func TestMCPRateLimit(t *testing.T) {
	url, c := openMCP(t, ratelimit.New(ratelimit.Config{CallRate: 1}))
	for i := range 2 {
		if res := post(t, c, url, agentToken, searchBody); res.StatusCode != http.StatusOK {
			t.Fatalf("search %d: %s", i+1, res.Status)
		}
	}
	res := post(t, c, url, agentToken, searchBody)
	if res.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("third search: %s, want 429", res.Status)
	}
	if s, err := strconv.Atoi(res.Header.Get("Retry-After")); err != nil || s < 1 {
		t.Errorf("Retry-After %q, want whole seconds, at least 1", res.Header.Get("Retry-After"))
	}
	// call_tool draws from the call bucket (1).
	if res := post(t, c, url, agentToken, callBody); res.StatusCode != http.StatusOK {
		t.Fatalf("first call: %s", res.Status)
	}
	if res := post(t, c, url, agentToken, callBody); res.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("second call: %s, want 429", res.Status)
	}
	// An unknown token is the front's business: 401, not 429.
	if res := post(t, c, url, "not-a-token-of-this-server", searchBody); res.StatusCode != http.StatusUnauthorized {
		t.Errorf("unknown token: %s", res.Status)
	}
	// Plain HTTP to the TLS listener gets nowhere.
	plain := strings.Replace(url, "https://", "http://", 1)
	req, _ := http.NewRequest(http.MethodPost, plain, strings.NewReader(searchBody))
	if res, err := (&http.Client{Timeout: 5 * time.Second}).Do(req); err == nil && res.StatusCode == http.StatusOK {
		t.Error("plain HTTP answered 200 on the TLS listener")
	}
}

// serveSurfaces opens the agent surfaces of cfg, serves them and shuts
// them down when the test ends.
func serveSurfaces(t *testing.T, cfg agents.Config) *agents.Surfaces {
	t.Helper()
	s, err := agents.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s.Serve()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = s.Shutdown(ctx)
		_ = s.Close()
	})
	return s
}
