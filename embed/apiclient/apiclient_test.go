package apiclient

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestEndpoint(t *testing.T) {
	for _, tc := range []struct{ base, path, want string }{
		{"https://api.openai.com/v1", "embeddings", "https://api.openai.com/v1/embeddings"},
		{"https://api.openai.com/v1/", "embeddings", "https://api.openai.com/v1/embeddings"},
		{"http://127.0.0.1:11434", "embeddings", "http://127.0.0.1:11434/v1/embeddings"},
		{"http://localhost:8080/", "embeddings", "http://localhost:8080/v1/embeddings"},
		{"http://gw.internal/openai/v1", "embeddings", "http://gw.internal/openai/v1/embeddings"},
		{"http://gw.internal/x/v1/embeddings", "embeddings", "http://gw.internal/x/v1/embeddings"},
		{" http://h:1/v1/embeddings?api-version=2 ", "embeddings", "http://h:1/v1/embeddings"},
		{"http://localhost:11434/v1", "chat/completions", "http://localhost:11434/v1/chat/completions"},
		{"http://localhost:1234", "chat/completions", "http://localhost:1234/v1/chat/completions"},
		{"http://h/v1/chat/completions", "chat/completions", "http://h/v1/chat/completions"},
	} {
		u, err := Endpoint(tc.base, tc.path)
		if err != nil {
			t.Errorf("Endpoint(%q, %q): %v", tc.base, tc.path, err)
			continue
		}
		if u.String() != tc.want {
			t.Errorf("Endpoint(%q, %q) = %q, want %q", tc.base, tc.path, u, tc.want)
		}
	}
	for _, bad := range []string{"", "localhost:11434", "ftp://h/v1", "http:///v1"} {
		if _, err := Endpoint(bad, "embeddings"); err == nil {
			t.Errorf("Endpoint(%q) accepted", bad)
		}
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for v, want := range map[string]time.Duration{
		"":                              0,
		"2":                             2 * time.Second,
		"0.5":                           500 * time.Millisecond,
		"-1":                            0,
		"soon":                          0,
		"Fri, 02 Jan 2026 03:04:15 GMT": 10 * time.Second,
		"Fri, 02 Jan 2026 03:00:00 GMT": 0,
	} {
		if got := ParseRetryAfter(v, now); got != want {
			t.Errorf("ParseRetryAfter(%q) = %s, want %s", v, got, want)
		}
	}
}

func newClient(t *testing.T, url string, cfg Config) *Client {
	t.Helper()
	u, err := Endpoint(url, "things")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Endpoint = u
	if cfg.RetryBaseDelay == 0 {
		cfg.RetryBaseDelay = 5 * time.Millisecond
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestBackoffGrowsWithJitter(t *testing.T) {
	c := newClient(t, "http://h", Config{RetryBaseDelay: 100 * time.Millisecond, RetryMaxDelay: time.Second})
	for n, ceil := range []time.Duration{100, 200, 400, 800, 1000, 1000} {
		ceil *= time.Millisecond
		for range 20 {
			if d := c.Backoff(n); d < ceil/2 || d > ceil {
				t.Errorf("Backoff(%d) = %s, want within [%s, %s]", n, d, ceil/2, ceil)
			}
		}
	}
	if d := c.Backoff(100); d > time.Second {
		t.Errorf("Backoff(100) = %s, beyond the maximum", d)
	}
}

func readAll(into *string) func(io.Reader) error {
	return func(r io.Reader) error {
		b, err := io.ReadAll(r)
		*into = string(b)
		return err
	}
}

func TestAnswerSizeIsBounded(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		if r.Header.Get("Accept") != "text/event-stream" {
			t.Errorf("Accept %q", r.Header.Get("Accept"))
		}
		io.WriteString(w, strings.Repeat("x", 101))
	}))
	defer srv.Close()
	var got string
	err := newClient(t, srv.URL, Config{MaxAnswerBytes: 100}).Post(context.Background(), []byte(`{}`), "text/event-stream", readAll(&got))
	if !errors.Is(err, ErrAnswerTooLarge) {
		t.Fatalf("101-byte answer with a 100-byte limit: %v", err)
	}
	if calls.Load() != 1 {
		t.Errorf("%d calls; an oversized answer is not retried", calls.Load())
	}
	// Exactly the limit passes.
	err = newClient(t, srv.URL, Config{MaxAnswerBytes: 101}).Post(context.Background(), []byte(`{}`), "text/event-stream", readAll(&got))
	if err != nil || len(got) != 101 {
		t.Fatalf("101-byte answer with a 101-byte limit: %v, %d bytes", err, len(got))
	}
}

func TestBrokenOffAnswerIsRetried(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			// Promise 100 bytes, send 5, drop the connection.
			w.Header().Set("Content-Length", "100")
			io.WriteString(w, "hello")
			w.(http.Flusher).Flush()
			conn, _, _ := http.NewResponseController(w).Hijack()
			conn.Close()
			return
		}
		io.WriteString(w, "whole")
	}))
	defer srv.Close()
	var got string
	if err := newClient(t, srv.URL, Config{}).Post(context.Background(), []byte(`{}`), "application/json", readAll(&got)); err != nil {
		t.Fatal(err)
	}
	if got != "whole" || calls.Load() != 2 {
		t.Errorf("got %q after %d calls, want the second answer", got, calls.Load())
	}
}

func TestReadErrorsAreNotRetriedUnlessMarked(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		io.WriteString(w, "answer")
	}))
	defer srv.Close()
	bad := errors.New("not what we asked for")
	c := newClient(t, srv.URL, Config{MaxRetries: 2})
	err := c.Post(context.Background(), nil, "application/json", func(io.Reader) error { return bad })
	if !errors.Is(err, bad) || calls.Load() != 1 {
		t.Errorf("plain read error: %v after %d calls, want it as is after 1", err, calls.Load())
	}
	calls.Store(0)
	err = c.Post(context.Background(), nil, "application/json", func(io.Reader) error { return Retry(bad) })
	if !errors.Is(err, bad) || !strings.Contains(err.Error(), "giving up after 3 attempts") || calls.Load() != 3 {
		t.Errorf("marked read error: %v after %d calls, want 3 attempts", err, calls.Load())
	}
}

func TestAPIErrorNamesTheServiceNotTheKey(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusUnauthorized)
		io.WriteString(w, `{"error":{"message":"Incorrect API key provided"}}`)
	}))
	defer srv.Close()
	c := newClient(t, strings.Replace(srv.URL, "http://", "http://user:pw@", 1), Config{Service: "chat server", APIKey: "sk-secret"})
	err := c.Post(context.Background(), nil, "application/json", func(io.Reader) error { return nil })
	var apiErr *APIError
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 401 {
		t.Fatalf("got %v", err)
	}
	msg := err.Error()
	if !strings.HasPrefix(msg, "chat server http://127.0.0.1") || !strings.Contains(msg, "Incorrect API key provided") ||
		strings.Contains(msg, "sk-secret") || strings.Contains(msg, "pw@") {
		t.Errorf("error %q", msg)
	}
}
