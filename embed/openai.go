package embed

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
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

// --- one request ---------------------------------------------------------

type embeddingsRequest struct {
	Model string   `json:"model"`
	Input []string `json:"input"`
}

type embeddingsResponse struct {
	Data []struct {
		Index     *int            `json:"index"`
		Embedding json.RawMessage `json:"embedding"`
	} `json:"data"`
}

// APIError is a non-success HTTP answer of the embeddings server.
type APIError = apiclient.APIError

// fetch embeds one batch of non-empty texts, retrying transient failures.
func (o *OpenAI) fetch(ctx context.Context, batch []string) ([][]float32, error) {
	body, err := json.Marshal(embeddingsRequest{Model: o.cfg.Model, Input: batch})
	if err != nil {
		return nil, err
	}
	var vs [][]float32
	err = o.api.Post(ctx, body, "application/json", func(r io.Reader) error {
		data, err := io.ReadAll(r)
		if err != nil {
			return err
		}
		vs, err = o.decode(data, len(batch))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("embed with %s: %w", o.model, err)
	}
	return vs, nil
}

// decode checks and normalises a successful answer for n inputs.
func (o *OpenAI) decode(data []byte, n int) ([][]float32, error) {
	var resp embeddingsResponse
	if err := json.Unmarshal(data, &resp); err != nil {
		return nil, fmt.Errorf("embedding server %s: the answer is not an embeddings response: %w", o.api.Display(), err)
	}
	if len(resp.Data) != n {
		return nil, fmt.Errorf("embedding server %s: got %d embeddings for %d inputs", o.api.Display(), len(resp.Data), n)
	}
	out := make([][]float32, n)
	for pos, d := range resp.Data {
		i := pos
		if d.Index != nil {
			i = *d.Index
		}
		if i < 0 || i >= n {
			return nil, fmt.Errorf("embedding server %s: index %d is outside 0..%d", o.api.Display(), i, n-1)
		}
		if out[i] != nil {
			return nil, fmt.Errorf("embedding server %s: index %d appears twice", o.api.Display(), i)
		}
		raw, err := parseVector(d.Embedding)
		if err != nil {
			return nil, fmt.Errorf("embedding server %s: embedding %d: %w", o.api.Display(), i, err)
		}
		if err := o.checkDim(len(raw)); err != nil {
			return nil, err
		}
		v, err := normalize(raw)
		if err != nil {
			return nil, fmt.Errorf("embedding server %s: embedding %d: %w", o.api.Display(), i, err)
		}
		out[i] = v
	}
	return out, nil
}

// checkDim records the first dimension seen (when none was configured) and
// rejects every other.
func (o *OpenAI) checkDim(d int) error {
	if d == 0 {
		return fmt.Errorf("embedding server %s returned an empty vector", o.api.Display())
	}
	if o.dim.CompareAndSwap(0, int64(d)) {
		return nil
	}
	if want := o.Dim(); d != want {
		return fmt.Errorf("%w: %s returned a %d-dimensional vector for model %q, want %d",
			ErrDimensionMismatch, o.api.Display(), d, o.cfg.Model, want)
	}
	return nil
}

// parseVector reads an embedding given as a JSON array of numbers or as a
// base64 string of little-endian float32s (encoding_format "base64").
func parseVector(raw json.RawMessage) ([]float64, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, err
		}
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil || len(b)%4 != 0 {
			return nil, errors.New("not a base64 float32 vector")
		}
		v := make([]float64, len(b)/4)
		for i := range v {
			v[i] = float64(math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:])))
		}
		return v, nil
	}
	var v []float64
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, fmt.Errorf("not a vector of numbers: %w", err)
	}
	return v, nil
}

// normalize returns v / ‖v‖ as float32; the zero vector stays zero.
func normalize(v []float64) ([]float32, error) {
	var ss float64
	for _, x := range v {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return nil, errors.New("the vector has a non-finite value")
		}
		ss += x * x
	}
	out := make([]float32, len(v))
	if ss == 0 {
		return out, nil
	}
	inv := 1 / math.Sqrt(ss)
	for i, x := range v {
		out[i] = float32(x * inv)
	}
	return out, nil
}

// --- cache ----------------------------------------------------------------

// vectorCache is a bounded LRU of vectors of one model, keyed by the SHA-256
// of the text, optionally persisted to a JSON Lines file.
type vectorCache struct {
	mu    sync.Mutex
	cap   int
	model string
	byKey map[cacheKey]*cacheNode
	head  *cacheNode // most recently used; a circular doubly linked list
	file  *persistFile
}

type cacheKey struct {
	model string
	sum   [32]byte
}

type cacheNode struct {
	key        cacheKey
	vec        []float32
	prev, next *cacheNode
}

func newVectorCache(capacity int, model, path string, dim int, log *slog.Logger) (*vectorCache, error) {
	c := &vectorCache{cap: capacity, model: model, byKey: map[cacheKey]*cacheNode{}}
	if path != "" {
		f, err := openPersistFile(path, c, dim, log)
		if err != nil {
			return nil, err
		}
		c.file = f
	}
	return c, nil
}

func (c *vectorCache) key(text string) cacheKey {
	return cacheKey{model: c.model, sum: sha256Sum(text)}
}

// get returns a copy of the cached vector of text, if it has length dim.
func (c *vectorCache) get(text string, dim int) ([]float32, bool) {
	k := c.key(text)
	c.mu.Lock()
	defer c.mu.Unlock()
	n, ok := c.byKey[k]
	if !ok {
		return nil, false
	}
	if len(n.vec) != dim {
		c.remove(n)
		return nil, false
	}
	c.moveToFront(n)
	return slices.Clone(n.vec), true
}

// put stores a copy of v for text and persists it.
func (c *vectorCache) put(text string, v []float32) {
	k := c.key(text)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.insert(k, slices.Clone(v)) && c.file != nil {
		c.file.append(k.sum, v, c.model)
	}
}

// insert adds or refreshes an entry, evicting the least recently used one
// when full; it reports whether the entry is new or changed.
func (c *vectorCache) insert(k cacheKey, v []float32) bool {
	if n, ok := c.byKey[k]; ok {
		changed := !slices.Equal(n.vec, v)
		n.vec = v
		c.moveToFront(n)
		return changed
	}
	n := &cacheNode{key: k, vec: v}
	c.byKey[k] = n
	c.pushFront(n)
	if len(c.byKey) > c.cap {
		c.remove(c.head.prev)
	}
	return true
}

func (c *vectorCache) pushFront(n *cacheNode) {
	if c.head == nil {
		n.prev, n.next = n, n
	} else {
		n.next, n.prev = c.head, c.head.prev
		c.head.prev.next = n
		c.head.prev = n
	}
	c.head = n
}

func (c *vectorCache) unlink(n *cacheNode) {
	if n.next == n {
		c.head = nil
	} else {
		n.prev.next, n.next.prev = n.next, n.prev
		if c.head == n {
			c.head = n.next
		}
	}
	n.prev, n.next = nil, nil
}

func (c *vectorCache) moveToFront(n *cacheNode) {
	if c.head == n {
		return
	}
	c.unlink(n)
	c.pushFront(n)
}

func (c *vectorCache) remove(n *cacheNode) {
	c.unlink(n)
	delete(c.byKey, n.key)
}

func (c *vectorCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.byKey)
}

func (c *vectorCache) close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.file == nil {
		return nil
	}
	err := c.file.close()
	c.file = nil
	return err
}

func sha256Sum(text string) [32]byte { return sha256.Sum256([]byte(text)) }

// persistFile is the cache's JSON Lines file: one {"m": model id,
// "h": hex SHA-256 of the text, "v": base64 little-endian float32s} per line,
// appended as vectors arrive.
type persistFile struct {
	path   string
	f      *os.File
	log    *slog.Logger
	failed bool
}

type persistRecord struct {
	M string `json:"m"`
	H string `json:"h"`
	V string `json:"v"`
}

// openPersistFile loads the vectors of c's model from path into c (the most
// recent last, so they end up the most recently used), rewrites the file if
// it has grown past twice the cache size, and opens it for appending.
func openPersistFile(path string, c *vectorCache, dim int, log *slog.Logger) (*persistFile, error) {
	lines := 0
	switch f, err := os.Open(path); {
	case err == nil:
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64<<10), 16<<20)
		for sc.Scan() {
			lines++
			var r persistRecord
			if json.Unmarshal(sc.Bytes(), &r) != nil || r.M != c.model {
				continue // another model's vector, or a torn last line
			}
			sum, err := hex.DecodeString(r.H)
			if err != nil || len(sum) != sha256.Size {
				continue
			}
			b, err := base64.StdEncoding.DecodeString(r.V)
			if err != nil || len(b) == 0 || len(b)%4 != 0 || (dim > 0 && len(b)/4 != dim) {
				continue
			}
			v := make([]float32, len(b)/4)
			for i := range v {
				v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
			}
			k := cacheKey{model: c.model}
			copy(k.sum[:], sum)
			c.insert(k, v)
		}
		if err := sc.Err(); err != nil {
			log.Warn("embedding cache file partly unreadable; continuing with what was read", "path", path, "err", err)
		}
		f.Close()
	case !errors.Is(err, os.ErrNotExist):
		return nil, fmt.Errorf("embedding cache file: %w", err)
	}
	p := &persistFile{path: path, log: log}
	if lines > 2*c.cap {
		if err := p.rewrite(c); err != nil {
			return nil, err
		}
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("embedding cache file: %w", err)
	}
	p.f = f
	return p, nil
}

func encodeRecord(model string, sum [32]byte, v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	line, _ := json.Marshal(persistRecord{M: model, H: hex.EncodeToString(sum[:]), V: base64.StdEncoding.EncodeToString(b)})
	return append(line, '\n')
}

// rewrite replaces the file with the cache's entries, least recently used
// first, through a temporary file and a rename.
func (p *persistFile) rewrite(c *vectorCache) error {
	tmp := p.path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("embedding cache file: %w", err)
	}
	w := bufio.NewWriter(f)
	if c.head != nil {
		for n := c.head.prev; ; n = n.prev {
			w.Write(encodeRecord(c.model, n.key.sum, n.vec))
			if n == c.head {
				break
			}
		}
	}
	err = w.Flush()
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, p.path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("embedding cache file: compact: %w", err)
	}
	return nil
}

// append writes one vector; after a failure, persistence stops (the
// in-memory cache goes on).
func (p *persistFile) append(sum [32]byte, v []float32, model string) {
	if p.failed {
		return
	}
	if _, err := p.f.Write(encodeRecord(model, sum, v)); err != nil {
		p.failed = true
		p.log.Warn("embedding cache file not writable; vectors are cached in memory only", "path", p.path, "err", err)
	}
}

func (p *persistFile) close() error { return p.f.Close() }
