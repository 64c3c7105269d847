package embed

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeEmbeddings is a real HTTP server on loopback that speaks the
// OpenAI embeddings protocol. Each text's vector is a deterministic,
// deliberately unnormalised function of the text; answers list the data in
// reverse order (with "index"), so a client that ignores index fails.
// Requests can be scripted: the n-th request (0-based) gets script[n] when
// it is set.
type fakeEmbeddings struct {
	t   *testing.T
	srv *httptest.Server

	mu       sync.Mutex
	dim      int
	requests []fakeRequest
	script   map[int]http.HandlerFunc
	always   http.HandlerFunc // when set, answers every request
}

type fakeRequest struct {
	Path   string
	Auth   string
	Model  string
	Inputs []string
}

func newFake(t *testing.T, dim int) *fakeEmbeddings {
	t.Helper()
	f := &fakeEmbeddings{t: t, dim: dim, script: map[int]http.HandlerFunc{}}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeEmbeddings) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var req struct {
		Model string   `json:"model"`
		Input []string `json:"input"`
	}
	if r.Method != http.MethodPost || json.Unmarshal(body, &req) != nil {
		http.Error(w, `{"error":{"message":"bad request body"}}`, http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	n := len(f.requests)
	f.requests = append(f.requests, fakeRequest{Path: r.URL.Path, Auth: r.Header.Get("Authorization"), Model: req.Model, Inputs: req.Input})
	h := f.script[n]
	if f.always != nil {
		h = f.always
	}
	dim := f.dim
	f.mu.Unlock()
	if h != nil {
		h(w, r)
		return
	}
	type item struct {
		Object    string    `json:"object"`
		Index     int       `json:"index"`
		Embedding []float64 `json:"embedding"`
	}
	data := make([]item, 0, len(req.Input))
	for i := len(req.Input) - 1; i >= 0; i-- {
		data = append(data, item{Object: "embedding", Index: i, Embedding: rawVector(req.Input[i], dim)})
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"object": "list", "model": req.Model, "data": data})
}

func (f *fakeEmbeddings) setDim(d int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.dim = d
}

func (f *fakeEmbeddings) on(n int, h http.HandlerFunc) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.script[n] = h
}

func (f *fakeEmbeddings) all() []fakeRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.requests)
}

// rawVector is the fake model: values in [-5, 5) from FNV hashes of the text.
func rawVector(text string, dim int) []float64 {
	v := make([]float64, dim)
	for i := range v {
		h := fnv.New64a()
		fmt.Fprintf(h, "%d|%s", i, text)
		v[i] = float64(h.Sum64()%10000)/1000 - 5
	}
	return v
}

func wantVector(text string, dim int) []float32 {
	v, err := normalize(rawVector(text, dim))
	if err != nil {
		panic(err)
	}
	return v
}

func newTestOpenAI(t *testing.T, f *fakeEmbeddings, cfg OpenAIConfig) *OpenAI {
	t.Helper()
	if cfg.BaseURL == "" {
		cfg.BaseURL = f.srv.URL + "/v1"
	}
	if cfg.Model == "" {
		cfg.Model = "test-embed"
	}
	if cfg.RetryBaseDelay == 0 {
		cfg.RetryBaseDelay = 5 * time.Millisecond
	}
	o, err := NewOpenAI(cfg)
	if err != nil {
		t.Fatalf("NewOpenAI: %v", err)
	}
	t.Cleanup(func() { o.Close() })
	return o
}

func texts(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("tool number %d: does thing %d", i, i*7)
	}
	return out
}

func TestOpenAIBatchingOrderAuthAndNormalisation(t *testing.T) {
	f := newFake(t, 12)
	o := newTestOpenAI(t, f, OpenAIConfig{APIKey: "sk-test-123", Model: "text-embedding-3-small"})
	host := strings.TrimPrefix(f.srv.URL, "http://")
	if got, want := o.Model(), "openai:text-embedding-3-small@"+host; got != want {
		t.Errorf("Model() = %q, want %q", got, want)
	}
	if o.Dim() != 0 {
		t.Errorf("Dim() before any request = %d, want 0 (to be detected)", o.Dim())
	}
	in := texts(150)
	vs, err := o.Embed(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	if o.Dim() != 12 {
		t.Errorf("Dim() after the first response = %d, want 12", o.Dim())
	}
	reqs := f.all()
	var sizes []int
	for _, r := range reqs {
		sizes = append(sizes, len(r.Inputs))
		if r.Path != "/v1/embeddings" {
			t.Errorf("request path %q, want /v1/embeddings", r.Path)
		}
		if r.Auth != "Bearer sk-test-123" {
			t.Errorf("Authorization header %q, want the bearer key", r.Auth)
		}
		if r.Model != "text-embedding-3-small" {
			t.Errorf("request model %q", r.Model)
		}
	}
	if !slices.Equal(sizes, []int{64, 64, 22}) {
		t.Errorf("batch sizes %v, want [64 64 22] (default batch size 64)", sizes)
	}
	if len(vs) != len(in) {
		t.Fatalf("got %d vectors for %d texts", len(vs), len(in))
	}
	for i, v := range vs {
		if !slices.Equal(v, wantVector(in[i], 12)) {
			t.Fatalf("vector %d is not the one of text %d (order by index broken?)", i, i)
		}
		var ss float64
		for _, x := range v {
			ss += float64(x) * float64(x)
		}
		if math.Abs(ss-1) > 1e-5 {
			t.Fatalf("vector %d has squared norm %g, want 1", i, ss)
		}
	}
}

func TestOpenAIBatchSizeAndNoKey(t *testing.T) {
	f := newFake(t, 4)
	o := newTestOpenAI(t, f, OpenAIConfig{BatchSize: 10})
	if _, err := o.Embed(context.Background(), texts(25)); err != nil {
		t.Fatal(err)
	}
	reqs := f.all()
	if len(reqs) != 3 {
		t.Fatalf("%d requests for 25 texts in batches of 10, want 3", len(reqs))
	}
	if reqs[0].Auth != "" {
		t.Errorf("Authorization %q sent without an API key", reqs[0].Auth)
	}
}

func TestOpenAIModelIDSeparatesHosts(t *testing.T) {
	a, err := NewOpenAI(OpenAIConfig{BaseURL: "http://10.0.0.1:11434", Model: "nomic-embed-text"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewOpenAI(OpenAIConfig{BaseURL: "http://user:secret@10.0.0.2:11434/v1", Model: "nomic-embed-text"})
	if err != nil {
		t.Fatal(err)
	}
	if a.Model() != "openai:nomic-embed-text@10.0.0.1:11434" || b.Model() != "openai:nomic-embed-text@10.0.0.2:11434" {
		t.Errorf("model ids %q and %q", a.Model(), b.Model())
	}
	if strings.Contains(b.Endpoint(), "secret") {
		t.Errorf("Endpoint() %q shows the URL's password", b.Endpoint())
	}
}

func TestOpenAIRetriesHonourRetryAfter(t *testing.T) {
	f := newFake(t, 4)
	f.on(0, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusTooManyRequests)
		io.WriteString(w, `{"error":{"message":"Rate limit reached","type":"requests"}}`)
	})
	f.on(1, func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "upstream overloaded", http.StatusServiceUnavailable)
	})
	var logs bytes.Buffer
	o := newTestOpenAI(t, f, OpenAIConfig{APIKey: "sk-secret-key", Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	start := time.Now()
	vs, err := o.Embed(context.Background(), []string{"hello"})
	if err != nil {
		t.Fatalf("Embed after 429 and 503: %v", err)
	}
	if took := time.Since(start); took < time.Second {
		t.Errorf("took %s; the 429's Retry-After: 1 was not honoured", took)
	}
	if n := len(f.all()); n != 3 {
		t.Errorf("%d requests, want 3 (429, 503, success)", n)
	}
	if !slices.Equal(vs[0], wantVector("hello", 4)) {
		t.Error("wrong vector after retries")
	}
	if !strings.Contains(logs.String(), "Rate limit reached") || !strings.Contains(logs.String(), "upstream overloaded") {
		t.Errorf("retry warnings do not carry the server's messages:\n%s", logs.String())
	}
	if strings.Contains(logs.String(), "sk-secret-key") {
		t.Errorf("the API key was logged:\n%s", logs.String())
	}
}

func TestOpenAIGivesUpAfterMaxRetries(t *testing.T) {
	f := newFake(t, 4)
	f.always = func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadGateway)
		io.WriteString(w, `{"error":"model is loading"}`)
	}
	o := newTestOpenAI(t, f, OpenAIConfig{MaxRetries: 2})
	_, err := o.Embed(context.Background(), []string{"x"})
	if err == nil {
		t.Fatal("Embed succeeded against a server that always fails")
	}
	if n := len(f.all()); n != 3 {
		t.Errorf("%d requests with MaxRetries 2, want 3", n)
	}
	for _, want := range []string{"giving up after 3 attempts", "502", "model is loading"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}
	var apiErr *APIError
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadGateway {
		t.Errorf("error %v is not an *APIError with status 502", err)
	}
}

func TestOpenAINoRetryOnClientErrors(t *testing.T) {
	for _, tc := range []struct {
		status int
		body   string
		want   string
	}{
		{400, `{"error":{"message":"This model's maximum context length is 8192 tokens","type":"invalid_request_error","param":null,"code":null}}`,
			"This model's maximum context length is 8192 tokens"},
		{404, `{"error":"model \"nomic-embed-text\" not found, try pulling it first"}`, `model "nomic-embed-text" not found`},
		{401, `Unauthorized`, "401 Unauthorized: Unauthorized"},
		{422, `{"error":"Input validation error: inputs cannot be empty","error_type":"Validation"}`, "inputs cannot be empty"},
	} {
		f := newFake(t, 4)
		f.always = func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(tc.status)
			io.WriteString(w, tc.body)
		}
		o := newTestOpenAI(t, f, OpenAIConfig{APIKey: "sk-secret-key"})
		_, err := o.Embed(context.Background(), []string{"x"})
		if err == nil {
			t.Fatalf("%d: Embed succeeded", tc.status)
		}
		if n := len(f.all()); n != 1 {
			t.Errorf("%d: %d requests, want 1 (no retry on a client error)", tc.status, n)
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%d: error %q does not contain the server's message %q", tc.status, err, tc.want)
		}
		if strings.Contains(err.Error(), "sk-secret-key") {
			t.Errorf("%d: the API key is in the error: %v", tc.status, err)
		}
		var apiErr *APIError
		if !errors.As(err, &apiErr) || apiErr.StatusCode != tc.status {
			t.Errorf("%d: error %v is not an *APIError with that status", tc.status, err)
		}
	}
}

// block answers only when the client has gone or after 5 seconds.
func block(w http.ResponseWriter, r *http.Request) {
	select {
	case <-r.Context().Done():
	case <-time.After(5 * time.Second):
	}
}

func TestOpenAITimeout(t *testing.T) {
	f := newFake(t, 4)
	f.on(0, block)
	o := newTestOpenAI(t, f, OpenAIConfig{Timeout: 100 * time.Millisecond, MaxRetries: -1})
	start := time.Now()
	_, err := o.Embed(context.Background(), []string{"x"})
	if err == nil || !strings.Contains(err.Error(), "no answer within 100ms") {
		t.Fatalf("Embed against a silent server: %v, want a timeout error", err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("timed out after %s, want about 100ms", took)
	}

	// A timeout is transient: with retries, the next attempt succeeds.
	f2 := newFake(t, 4)
	f2.on(0, block)
	o2 := newTestOpenAI(t, f2, OpenAIConfig{Timeout: 100 * time.Millisecond})
	if _, err := o2.Embed(context.Background(), []string{"x"}); err != nil {
		t.Fatalf("Embed with a retry after a timeout: %v", err)
	}
	if n := len(f2.all()); n != 2 {
		t.Errorf("%d requests, want 2", n)
	}
}

func TestOpenAINetworkErrorIsRetried(t *testing.T) {
	f := newFake(t, 4)
	f.on(0, func(w http.ResponseWriter, r *http.Request) {
		// Drop the connection without an answer.
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			conn.Close()
		}
	})
	o := newTestOpenAI(t, f, OpenAIConfig{})
	if _, err := o.Embed(context.Background(), []string{"x"}); err != nil {
		t.Fatalf("Embed after a dropped connection: %v", err)
	}
	if n := len(f.all()); n != 2 {
		t.Errorf("%d requests, want 2", n)
	}
	// A server that is not there at all fails after the retries.
	f.srv.Close()
	o2 := newTestOpenAI(t, f, OpenAIConfig{MaxRetries: 1})
	if _, err := o2.Embed(context.Background(), []string{"x"}); err == nil || !strings.Contains(err.Error(), "giving up after 2 attempts") {
		t.Errorf("Embed against a closed port: %v", err)
	}
}

func TestOpenAIContextCancellation(t *testing.T) {
	f := newFake(t, 4)
	f.on(0, block)
	o := newTestOpenAI(t, f, OpenAIConfig{})
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	start := time.Now()
	_, err := o.Embed(ctx, []string{"x"})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Embed with a cancelled context: %v, want context.Canceled", err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("returned %s after the cancellation", took)
	}
	if n := len(f.all()); n != 1 {
		t.Errorf("%d requests, want 1 (no retry after the caller cancelled)", n)
	}

	// Cancelled while waiting out a Retry-After.
	f2 := newFake(t, 4)
	f2.on(0, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "30")
		w.WriteHeader(http.StatusTooManyRequests)
	})
	o2 := newTestOpenAI(t, f2, OpenAIConfig{})
	ctx2, cancel2 := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel2)
	start = time.Now()
	if _, err := o2.Embed(ctx2, []string{"x"}); !errors.Is(err, context.Canceled) {
		t.Errorf("Embed cancelled during the backoff: %v, want context.Canceled", err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("returned %s after the cancellation, during a 30s Retry-After", took)
	}

	// A deadline shorter than the Retry-After fails at once.
	ctx3, cancel3 := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel3()
	f2.on(1, f2.script[0])
	start = time.Now()
	if _, err := o2.Embed(ctx3, []string{"y"}); err == nil || !strings.Contains(err.Error(), "no time left") {
		t.Errorf("Embed with a 2s deadline and a 30s Retry-After: %v", err)
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("waited %s for a retry that could not fit in the deadline", took)
	}

	// A Retry-After beyond MaxRetryAfter is an error, not a long sleep.
	o3 := newTestOpenAI(t, f2, OpenAIConfig{MaxRetryAfter: 10 * time.Second})
	f2.on(2, f2.script[0])
	if _, err := o3.Embed(context.Background(), []string{"z"}); err == nil || !strings.Contains(err.Error(), "retry after 30s") {
		t.Errorf("Embed with a Retry-After beyond the limit: %v", err)
	}
}

func TestOpenAIDimension(t *testing.T) {
	f := newFake(t, 8)
	o := newTestOpenAI(t, f, OpenAIConfig{Dim: 16})
	if o.Dim() != 16 {
		t.Fatalf("Dim() = %d, want the configured 16", o.Dim())
	}
	_, err := o.Embed(context.Background(), []string{"x"})
	if !errors.Is(err, ErrDimensionMismatch) || !strings.Contains(err.Error(), "8-dimensional") {
		t.Errorf("8-dimensional answer for a 16-dimensional embedder: %v, want ErrDimensionMismatch", err)
	}

	// Detected from the first answer, then enforced.
	o2 := newTestOpenAI(t, f, OpenAIConfig{})
	d, err := o2.DetectDim(context.Background())
	if err != nil || d != 8 {
		t.Fatalf("DetectDim = %d, %v; want 8", d, err)
	}
	f.setDim(12)
	if _, err := o2.Embed(context.Background(), []string{"y"}); !errors.Is(err, ErrDimensionMismatch) {
		t.Errorf("answer changed from 8 to 12 dimensions: %v, want ErrDimensionMismatch", err)
	}
}

func TestOpenAIMalformedAnswers(t *testing.T) {
	for name, body := range map[string]string{
		"too few":      `{"data":[{"index":0,"embedding":[1,2]}]}`,
		"index range":  `{"data":[{"index":0,"embedding":[1,2]},{"index":2,"embedding":[1,2]}]}`,
		"index twice":  `{"data":[{"index":1,"embedding":[1,2]},{"index":1,"embedding":[1,2]}]}`,
		"not a vector": `{"data":[{"index":0,"embedding":"%%%"},{"index":1,"embedding":[1,2]}]}`,
		"empty vector": `{"data":[{"index":0,"embedding":[]},{"index":1,"embedding":[]}]}`,
		"not JSON":     `<html>gateway</html>`,
	} {
		f := newFake(t, 2)
		f.always = func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, body) }
		o := newTestOpenAI(t, f, OpenAIConfig{})
		if _, err := o.Embed(context.Background(), []string{"a", "b"}); err == nil {
			t.Errorf("%s: accepted %s", name, body)
		}
		if n := len(f.all()); n != 1 {
			t.Errorf("%s: %d requests; a malformed answer is not retried", name, n)
		}
	}
}

func TestOpenAIBase64AndZeroVectors(t *testing.T) {
	f := newFake(t, 2)
	// [3, 4] as little-endian float32s, and a zero vector.
	f.always = func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"data":[{"index":0,"embedding":"AABAQAAAgEA="},{"index":1,"embedding":[0,0]}]}`)
	}
	o := newTestOpenAI(t, f, OpenAIConfig{})
	vs, err := o.Embed(context.Background(), []string{"a", "b"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(vs[0], []float32{0.6, 0.8}) || !slices.Equal(vs[1], []float32{0, 0}) {
		t.Errorf("vectors %v", vs)
	}
}

func TestOpenAIEmptyTextsNeedNoRequest(t *testing.T) {
	f := newFake(t, 4)
	o := newTestOpenAI(t, f, OpenAIConfig{Dim: 4})
	vs, err := o.Embed(context.Background(), []string{"", "  \n"})
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) != 2 || !slices.Equal(vs[0], make([]float32, 4)) || !slices.Equal(vs[1], make([]float32, 4)) {
		t.Errorf("empty texts gave %v, want two zero vectors", vs)
	}
	if n := len(f.all()); n != 0 {
		t.Errorf("%d requests for empty texts", n)
	}
	vs, err = o.Embed(context.Background(), nil)
	if err != nil || len(vs) != 0 {
		t.Errorf("Embed(nil) = %v, %v", vs, err)
	}
}

func TestOpenAICache(t *testing.T) {
	f := newFake(t, 4)
	o := newTestOpenAI(t, f, OpenAIConfig{})
	ctx := context.Background()
	if _, err := o.Embed(ctx, []string{"a", "b", "a"}); err != nil {
		t.Fatal(err)
	}
	if reqs := f.all(); len(reqs) != 1 || !slices.Equal(reqs[0].Inputs, []string{"a", "b"}) {
		t.Fatalf("requests %+v; want one with a repeated text sent once", reqs)
	}
	vs, err := o.Embed(ctx, []string{"b", "c", "a"})
	if err != nil {
		t.Fatal(err)
	}
	reqs := f.all()
	if len(reqs) != 2 || !slices.Equal(reqs[1].Inputs, []string{"c"}) {
		t.Fatalf("second call sent %+v; want only the uncached text", reqs[1:])
	}
	for i, s := range []string{"b", "c", "a"} {
		if !slices.Equal(vs[i], wantVector(s, 4)) {
			t.Errorf("vector %d (%q) wrong when mixing cached and fresh", i, s)
		}
	}
	vs[0][0] = 42 // the cache hands out copies
	vs, err = o.Embed(ctx, []string{"a", "b", "c"})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(f.all()); n != 2 {
		t.Errorf("%d requests; a fully cached call should send none", n)
	}
	if !slices.Equal(vs[1], wantVector("b", 4)) {
		t.Error("a caller's change to a returned vector reached the cache")
	}
}

func TestOpenAICacheIsBounded(t *testing.T) {
	f := newFake(t, 4)
	o := newTestOpenAI(t, f, OpenAIConfig{CacheSize: 2})
	ctx := context.Background()
	for _, s := range []string{"a", "b", "a", "c"} { // "b" is the least recently used when "c" arrives
		if _, err := o.Embed(ctx, []string{s}); err != nil {
			t.Fatal(err)
		}
	}
	if n := o.cache.len(); n != 2 {
		t.Errorf("cache holds %d entries, want at most 2", n)
	}
	before := len(f.all())
	o.Embed(ctx, []string{"a", "c"})
	if len(f.all()) != before {
		t.Error(`"a" and "c" should still be cached`)
	}
	o.Embed(ctx, []string{"b"})
	if len(f.all()) != before+1 {
		t.Error(`"b" should have been evicted`)
	}

	off := newTestOpenAI(t, f, OpenAIConfig{CacheSize: -1})
	before = len(f.all())
	off.Embed(ctx, []string{"a"})
	off.Embed(ctx, []string{"a"})
	if len(f.all()) != before+2 {
		t.Error("a disabled cache still answered")
	}
}

func TestOpenAIPersistentCache(t *testing.T) {
	f := newFake(t, 4)
	path := filepath.Join(t.TempDir(), "embed-cache.jsonl")
	ctx := context.Background()
	o := newTestOpenAI(t, f, OpenAIConfig{CacheFile: path})
	if _, err := o.Embed(ctx, []string{"a", "b"}); err != nil {
		t.Fatal(err)
	}
	o.Close()

	// Another process, same server and model: no request.
	o2 := newTestOpenAI(t, f, OpenAIConfig{CacheFile: path, Dim: 4})
	vs, err := o2.Embed(ctx, []string{"b", "a"})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(f.all()); n != 1 {
		t.Errorf("%d requests; the persisted cache should have answered", n)
	}
	if !slices.Equal(vs[0], wantVector("b", 4)) || !slices.Equal(vs[1], wantVector("a", 4)) {
		t.Error("persisted vectors differ")
	}

	// The same model name on another server is another model id: nothing
	// is reused.
	g := newFake(t, 4)
	o3 := newTestOpenAI(t, g, OpenAIConfig{CacheFile: path, Dim: 4})
	if _, err := o3.Embed(ctx, []string{"a"}); err != nil {
		t.Fatal(err)
	}
	if n := len(g.all()); n != 1 {
		t.Errorf("%d requests to the second server; vectors of another host were reused", n)
	}

	// A torn last line is skipped.
	fh, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	fh.WriteString(`{"m":"openai:test-embed@`)
	fh.Close()
	o4 := newTestOpenAI(t, f, OpenAIConfig{CacheFile: path, Dim: 4})
	if _, err := o4.Embed(ctx, []string{"a"}); err != nil {
		t.Fatal(err)
	}
	if n := len(f.all()); n != 1 {
		t.Errorf("%d requests after a torn line", n)
	}
}

func TestOpenAIPersistentCacheCompacts(t *testing.T) {
	f := newFake(t, 4)
	path := filepath.Join(t.TempDir(), "c.jsonl")
	o := newTestOpenAI(t, f, OpenAIConfig{CacheFile: path, CacheSize: 3})
	if _, err := o.Embed(context.Background(), texts(10)); err != nil {
		t.Fatal(err)
	}
	o.Close()
	o2 := newTestOpenAI(t, f, OpenAIConfig{CacheFile: path, CacheSize: 3, Dim: 4})
	o2.Close()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(b, []byte("\n")); n != 3 {
		t.Errorf("the compacted file has %d lines, want 3", n)
	}
	in := texts(10)
	o3 := newTestOpenAI(t, f, OpenAIConfig{CacheFile: path, CacheSize: 3, Dim: 4})
	before := len(f.all())
	if _, err := o3.Embed(context.Background(), in[7:]); err != nil {
		t.Fatal(err)
	}
	if len(f.all()) != before {
		t.Error("the most recent vectors did not survive compaction")
	}
}

func TestOpenAIConcurrentUse(t *testing.T) {
	f := newFake(t, 8)
	o := newTestOpenAI(t, f, OpenAIConfig{BatchSize: 5})
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			in := texts(20 + g)
			vs, err := o.Embed(context.Background(), in)
			if err != nil {
				errs <- err
				return
			}
			for i := range in {
				if !slices.Equal(vs[i], wantVector(in[i], 8)) {
					errs <- fmt.Errorf("goroutine %d: vector %d wrong", g, i)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestOpenAIConfigNeverShowsTheKey(t *testing.T) {
	cfg := OpenAIConfig{BaseURL: "http://u:pw@h/v1", Model: "m", APIKey: "sk-very-secret"}
	var logs bytes.Buffer
	slog.New(slog.NewJSONHandler(&logs, nil)).Info("config", "embedder", cfg)
	for _, s := range []string{fmt.Sprint(cfg), fmt.Sprintf("%+v", cfg), logs.String()} {
		if strings.Contains(s, "sk-very-secret") || strings.Contains(s, "pw@") {
			t.Errorf("secret shown: %s", s)
		}
	}
}

func TestNewOpenAIRejectsBadConfig(t *testing.T) {
	for _, cfg := range []OpenAIConfig{
		{BaseURL: "http://h"},
		{Model: "m"},
		{BaseURL: "http://h", Model: "m", Dim: -1},
		{BaseURL: "http://h", Model: "m", BatchSize: MaxBatchSize + 1},
		{BaseURL: "http://h", Model: "m", CacheSize: -1, CacheFile: "x"},
	} {
		if _, err := NewOpenAI(cfg); err == nil {
			t.Errorf("NewOpenAI(%v) accepted", cfg)
		}
	}
}
