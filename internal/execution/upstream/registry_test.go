package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestMain lets the test binary act as a stdio MCP server for the command
// upstream test: CARDEX_TEST_STDIO_SERVER=1 runs an SDK server on stdin/stdout.
func TestMain(m *testing.M) {
	if os.Getenv("CARDEX_TEST_STDIO_SERVER") == "1" {
		s := echoServer(nil)
		if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// echoServer has one tool, echo, that answers with its argument and the
// SECRET environment variable (to show the upstream got its credential).
func echoServer(calls *atomic.Int64) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "echo", Version: "1"}, nil)
	s.AddTool(&mcp.Tool{Name: "echo", InputSchema: json.RawMessage(`{"type":"object","properties":{"say":{"type":"string"}}}`)},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			if calls != nil {
				calls.Add(1)
			}
			var a struct{ Say string }
			_ = json.Unmarshal(req.Params.Arguments, &a)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: a.Say + "|" + os.Getenv("SECRET")}}}, nil
		})
	return s
}

func text(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	if len(res.Content) != 1 {
		t.Fatalf("content %v", res.Content)
	}
	return res.Content[0].(*mcp.TextContent).Text
}

func TestCommandUpstream(t *testing.T) {
	t.Setenv("CARDEX_TEST_SECRET", "s3cret")
	cfg := Config{Upstreams: []Upstream{{
		Server:  "echo",
		Command: []string{os.Args[0], "-test.run=^$"},
		Env:     map[string]string{"CARDEX_TEST_STDIO_SERVER": "1", "SECRET": "${CARDEX_TEST_SECRET}"},
	}}}
	reg, err := NewRegistry(cfg, "test", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	for _, say := range []string{"one", "two"} { // the second call reuses the session
		res, err := reg.Call(context.Background(), "acme", "echo", "echo", json.RawMessage(`{"say":"`+say+`"}`))
		if err != nil {
			t.Fatal(err)
		}
		if got := text(t, res); got != say+"|s3cret" {
			t.Fatalf("got %q", got)
		}
	}
	var ce *CallError
	if _, err := reg.Call(context.Background(), "acme", "nope", "echo", nil); !errors.As(err, &ce) || ce.Kind != KindNotRegistered {
		t.Fatalf("unregistered server: %v", err)
	}
}

// TestUpstreamRestart: an upstream that restarted no longer knows cardex's
// session; the call is sent again on a new session, once.
func TestUpstreamRestart(t *testing.T) {
	var calls atomic.Int64
	var mu sync.Mutex
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return echoServer(&calls) }, nil)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		h := handler
		mu.Unlock()
		h.ServeHTTP(w, r)
	}))
	defer srv.Close()
	reg, err := NewRegistry(Config{Upstreams: []Upstream{{Server: "echo", URL: srv.URL}}}, "test", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	if _, err := reg.Call(context.Background(), "acme", "echo", "echo", json.RawMessage(`{"say":"a"}`)); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	handler = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return echoServer(&calls) }, nil) // "restart": sessions gone
	mu.Unlock()
	res, err := reg.Call(context.Background(), "acme", "echo", "echo", json.RawMessage(`{"say":"b"}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := text(t, res); !strings.HasPrefix(got, "b|") || calls.Load() != 2 {
		t.Fatalf("got %q after %d calls", got, calls.Load())
	}
}
