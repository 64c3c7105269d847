package embed

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/seed0cff8200/cardex/embed/apiclient"
)

// Defaults of OpenAIConfig.
const (
	DefaultBatchSize      = 64
	DefaultTimeout        = apiclient.DefaultTimeout
	DefaultMaxRetries     = apiclient.DefaultMaxRetries
	DefaultRetryBaseDelay = apiclient.DefaultRetryBaseDelay
	DefaultRetryMaxDelay  = apiclient.DefaultRetryMaxDelay
	DefaultMaxRetryAfter  = apiclient.DefaultMaxRetryAfter
	DefaultCacheSize      = 4096

	// MaxBatchSize is the most inputs OpenAI accepts in one request.
	MaxBatchSize = 2048

	maxResponseBytes = 256 << 20
)

// ErrDimensionMismatch is returned (wrapped) when the server answers with a
// vector whose length differs from the configured or first-detected
// dimension.
var ErrDimensionMismatch = errors.New("embedding dimension mismatch")

// OpenAIConfig configures an OpenAI embedder.
type OpenAIConfig struct {
	// BaseURL of the server. A URL whose path ends in "/embeddings" is used
	// as is; one ending in "/v1" gets "/embeddings" appended; any other gets
	// "/v1/embeddings". So "https://api.openai.com/v1",
	// "http://127.0.0.1:11434" (Ollama) and "http://127.0.0.1:8080" (vLLM,
	// text-embeddings-inference) all work.
	BaseURL string
	// Model is the model name the server knows, e.g. "text-embedding-3-small"
	// or "nomic-embed-text".
	Model string
	// APIKey, if set, is sent as "Authorization: Bearer KEY". It is never
	// logged or put in an error message.
	APIKey string
	// Dim is the expected vector length. 0 means: detected from the first
	// response (or DetectDim), then enforced.
	Dim int
	// BatchSize is the most texts per request (default 64, at most 2048).
	BatchSize int
	// Timeout bounds one HTTP request, body included (default 30s).
	Timeout time.Duration
	// MaxRetries is how many times a request is retried after a 429, a 5xx
	// (other than 501), a timeout or a network error (default 4; a negative
	// value means no retry). Other 4xx answers are not retried.
	MaxRetries int
	// RetryBaseDelay and RetryMaxDelay shape the exponential backoff: the
	// n-th retry waits a random time between half and all of
	// min(RetryMaxDelay, RetryBaseDelay·2ⁿ) (defaults 500ms and 20s). A
	// Retry-After header replaces that delay.
	RetryBaseDelay time.Duration
	RetryMaxDelay  time.Duration
	// MaxRetryAfter is the longest Retry-After the client waits for
	// (default 2m); a server asking for more gets an error instead.
	MaxRetryAfter time.Duration
	// CacheSize is how many vectors the in-memory LRU cache holds, keyed by
	// (model id, SHA-256 of the text) (default 4096; negative disables it).
	CacheSize int
	// CacheFile, if set, persists the cache: vectors are appended to it as
	// JSON Lines and the most recent CacheSize of this model are loaded at
	// start.
	CacheFile string
	// HTTPClient is the client to use (default: a new http.Client).
	HTTPClient *http.Client
	// Logger receives retry warnings (default: discarded).
	Logger *slog.Logger
}

// String describes the configuration without the API key.
func (c OpenAIConfig) String() string {
	return fmt.Sprintf("{BaseURL:%s Model:%s APIKey:%s Dim:%d BatchSize:%d Timeout:%s MaxRetries:%d}",
		apiclient.RedactURL(c.BaseURL), c.Model, apiclient.Redacted(c.APIKey), c.Dim, c.BatchSize, c.Timeout, c.MaxRetries)
}

// LogValue keeps the API key out of structured logs.
func (c OpenAIConfig) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("base_url", apiclient.RedactURL(c.BaseURL)),
		slog.String("model", c.Model),
		slog.String("api_key", apiclient.Redacted(c.APIKey)),
		slog.Int("dim", c.Dim),
	)
}

// OpenAI is an Embedder for OpenAI-compatible "/v1/embeddings" endpoints:
// OpenAI, Ollama, vLLM, text-embeddings-inference and others. It batches,
// retries transient failures with exponential backoff and jitter (honouring
// Retry-After), enforces one dimension, L2-normalises every vector, returns
// them in input order and caches them by (model id, SHA-256 of the text).
//
// Its model id is "openai:" + model + "@" + host, so the same model name on
// two servers never shares stored vectors.
//
// An OpenAI is safe for concurrent use.
type OpenAI struct {
	cfg   OpenAIConfig
	api   *apiclient.Client
	model string
	dim   atomic.Int64
	cache *vectorCache // nil when disabled
}

var _ Embedder = (*OpenAI)(nil)

// NewOpenAI checks the configuration, applies the defaults and loads the
// persisted cache, if any. It does not contact the server.
func NewOpenAI(cfg OpenAIConfig) (*OpenAI, error) {
	if strings.TrimSpace(cfg.Model) == "" {
		return nil, errors.New("openai embedder: a model name is required")
	}
	u, err := apiclient.Endpoint(cfg.BaseURL, "embeddings")
	if err != nil {
		return nil, fmt.Errorf("openai embedder: %w", err)
	}
	switch {
	case cfg.Dim < 0:
		return nil, fmt.Errorf("openai embedder: dimension %d is negative", cfg.Dim)
	case cfg.BatchSize < 0 || cfg.BatchSize > MaxBatchSize:
		return nil, fmt.Errorf("openai embedder: batch size %d is outside 1..%d", cfg.BatchSize, MaxBatchSize)
	}
	if cfg.BatchSize == 0 {
		cfg.BatchSize = DefaultBatchSize
	}
	if cfg.CacheSize == 0 {
		cfg.CacheSize = DefaultCacheSize
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	api, err := apiclient.New(apiclient.Config{
		Service:        "embedding server",
		Endpoint:       u,
		APIKey:         cfg.APIKey,
		Timeout:        cfg.Timeout,
		MaxRetries:     cfg.MaxRetries,
		RetryBaseDelay: cfg.RetryBaseDelay,
		RetryMaxDelay:  cfg.RetryMaxDelay,
		MaxRetryAfter:  cfg.MaxRetryAfter,
		MaxAnswerBytes: maxResponseBytes,
		HTTPClient:     cfg.HTTPClient,
		Logger:         cfg.Logger,
	})
	if err != nil {
		return nil, fmt.Errorf("openai embedder: %w", err)
	}
	o := &OpenAI{
		cfg:   cfg,
		api:   api,
		model: "openai:" + cfg.Model + "@" + strings.ToLower(u.Host),
	}
	o.dim.Store(int64(cfg.Dim))
	if cfg.CacheSize > 0 {
		o.cache, err = newVectorCache(cfg.CacheSize, o.model, cfg.CacheFile, cfg.Dim, cfg.Logger)
		if err != nil {
			return nil, fmt.Errorf("openai embedder: %w", err)
		}
	} else if cfg.CacheFile != "" {
		return nil, errors.New("openai embedder: a cache file needs a cache (CacheSize > 0)")
	}
	return o, nil
}

// Model returns "openai:" + model + "@" + host, e.g.
// "openai:nomic-embed-text@127.0.0.1:11434".
func (o *OpenAI) Model() string { return o.model }

// Dim is the vector length: the configured one, or the one detected from the
// first response (0 until then; see DetectDim).
func (o *OpenAI) Dim() int { return int(o.dim.Load()) }

// Endpoint is the embeddings URL requests go to (without user information).
func (o *OpenAI) Endpoint() string { return o.api.Display() }

// DetectDim returns the dimension, asking the server for one vector first
// if it is not known yet.
func (o *OpenAI) DetectDim(ctx context.Context) (int, error) {
	if d := o.Dim(); d > 0 {
		return d, nil
	}
	if _, err := o.fetch(ctx, []string{"cardex dimension probe"}); err != nil {
		return 0, err
	}
	return o.Dim(), nil
}

// Close closes the persisted cache file, if any.
func (o *OpenAI) Close() error {
	if o.cache == nil {
		return nil
	}
	return o.cache.close()
}

// Embed returns one L2-normalised vector per text, in order. Cached texts
// are not sent; repeated texts are sent once; the rest go in batches of
// BatchSize. A text that is empty or only white space gets the zero vector
// without a request (servers reject empty inputs).
func (o *OpenAI) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out := make([][]float32, len(texts))
	var empty []int
	pending := map[string][]int{} // text → positions waiting for it
	var todo []string             // distinct texts to fetch, in first-seen order
	useCache := o.cache != nil && o.Dim() > 0
	for i, t := range texts {
		if strings.TrimSpace(t) == "" {
			empty = append(empty, i)
			continue
		}
		if useCache {
			if v, ok := o.cache.get(t, o.Dim()); ok {
				out[i] = v
				continue
			}
		}
		if _, ok := pending[t]; !ok {
			todo = append(todo, t)
		}
		pending[t] = append(pending[t], i)
	}
	for start := 0; start < len(todo); start += o.cfg.BatchSize {
		batch := todo[start:min(start+o.cfg.BatchSize, len(todo))]
		vs, err := o.fetch(ctx, batch)
		if err != nil {
			return nil, err
		}
		for j, t := range batch {
			if o.cache != nil {
				o.cache.put(t, vs[j])
			}
			for k, i := range pending[t] {
				if k == 0 {
					out[i] = vs[j]
				} else {
					out[i] = slices.Clone(vs[j])
				}
			}
		}
	}
	if len(empty) > 0 {
		d, err := o.DetectDim(ctx)
		if err != nil {
			return nil, err
		}
		for _, i := range empty {
			out[i] = make([]float32, d)
		}
	}
	return out, nil
}
