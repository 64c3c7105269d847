// Package apiclient sends JSON requests to OpenAI-compatible HTTP APIs
// (OpenAI, Ollama, vLLM, llama.cpp server, LM Studio,
// text-embeddings-inference): one POST with a per-attempt timeout, retries
// with exponential backoff and jitter on 429, 5xx, timeouts and network
// errors (honouring Retry-After), a bound on the answer's size, and error
// messages that carry the server's own words but never the API key or the
// URL's user information.
//
// It is shared by the OpenAI embedder (embed) and the chat client of
// registration-time enrichment (internal/sources/enrich). It lives under
// embed because embed may import nothing outside itself.
package apiclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Defaults of Config.
const (
	DefaultTimeout        = 30 * time.Second
	DefaultMaxRetries     = 4
	DefaultRetryBaseDelay = 500 * time.Millisecond
	DefaultRetryMaxDelay  = 20 * time.Second
	DefaultMaxRetryAfter  = 2 * time.Minute
	DefaultMaxAnswerBytes = 16 << 20

	maxErrorMessage = 500
)

// ErrAnswerTooLarge is returned (wrapped) when an answer's body is larger
// than Config.MaxAnswerBytes. It is not retried.
var ErrAnswerTooLarge = errors.New("the answer is too large")

// Config configures a Client.
type Config struct {
	// Service names the server in messages, e.g. "embedding server".
	Service string
	// Endpoint is the full URL requests are posted to (see Endpoint).
	Endpoint *url.URL
	// APIKey, if set, is sent as "Authorization: Bearer KEY". It is never
	// logged or put in an error message.
	APIKey string
	// Timeout bounds one attempt, the answer's body included (default 30s).
	Timeout time.Duration
	// MaxRetries is how many times a request is retried after a 429, a 5xx
	// (other than 501), a timeout or a network error (0 means the default,
	// 4; a negative value means no retry). Other 4xx answers are not
	// retried.
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
	// MaxAnswerBytes bounds the body of an answer (default 16 MiB).
	MaxAnswerBytes int64
	// HTTPClient is the client to use (default: a new http.Client).
	HTTPClient *http.Client
	// Logger receives retry warnings (default: discarded).
	Logger *slog.Logger
}

// Client posts JSON to one endpoint. It is safe for concurrent use.
type Client struct {
	cfg      Config
	endpoint string
	display  string // endpoint without user information
}

// New checks the configuration and applies the defaults.
func New(cfg Config) (*Client, error) {
	switch {
	case cfg.Endpoint == nil:
		return nil, errors.New("an endpoint is required")
	case cfg.Timeout < 0:
		return nil, fmt.Errorf("timeout %s is negative", cfg.Timeout)
	case cfg.MaxAnswerBytes < 0:
		return nil, fmt.Errorf("answer size limit %d is negative", cfg.MaxAnswerBytes)
	}
	if cfg.Service == "" {
		cfg.Service = "server"
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	switch {
	case cfg.MaxRetries == 0:
		cfg.MaxRetries = DefaultMaxRetries
	case cfg.MaxRetries < 0:
		cfg.MaxRetries = 0
	}
	if cfg.RetryBaseDelay <= 0 {
		cfg.RetryBaseDelay = DefaultRetryBaseDelay
	}
	if cfg.RetryMaxDelay <= 0 {
		cfg.RetryMaxDelay = DefaultRetryMaxDelay
	}
	if cfg.MaxRetryAfter <= 0 {
		cfg.MaxRetryAfter = DefaultMaxRetryAfter
	}
	if cfg.MaxAnswerBytes == 0 {
		cfg.MaxAnswerBytes = DefaultMaxAnswerBytes
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	display := *cfg.Endpoint
	display.User = nil
	return &Client{cfg: cfg, endpoint: cfg.Endpoint.String(), display: display.String()}, nil
}

// Endpoint resolves a base URL to the URL of one API path, e.g. "embeddings"
// or "chat/completions". A base whose path already ends in "/"+path is used
// as is; one ending in "/v1" gets "/"+path appended; any other gets
// "/v1/"+path. So "https://api.openai.com/v1", "http://127.0.0.1:11434"
// (Ollama) and "http://127.0.0.1:8080" (vLLM, llama.cpp) all work.
func Endpoint(base, path string) (*url.URL, error) {
	base = strings.TrimSpace(base)
	if base == "" {
		return nil, errors.New("a base URL is required")
	}
	u, err := url.Parse(base)
	if err != nil {
		return nil, fmt.Errorf("base URL: %w", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("base URL %q: the scheme must be http or https", RedactURL(base))
	}
	if u.Host == "" {
		return nil, fmt.Errorf("base URL %q has no host", RedactURL(base))
	}
	p := strings.TrimRight(u.Path, "/")
	switch {
	case strings.HasSuffix(p, "/"+path):
	case strings.HasSuffix(p, "/v1"):
		p += "/" + path
	default:
		p += "/v1/" + path
	}
	u.Path, u.RawPath = p, ""
	u.RawQuery, u.Fragment = "", ""
	return u, nil
}

// Display is the endpoint without user information, for messages.
func (c *Client) Display() string { return c.display }

// Timeout is the bound of one attempt.
func (c *Client) Timeout() time.Duration { return c.cfg.Timeout }

// Post sends body (JSON), asking for the media type accept
// ("application/json", or "text/event-stream" for a streamed answer), and
// hands a successful answer's body to read,
// retrying transient failures. read runs inside the attempt's timeout; the
// body it gets fails with ErrAnswerTooLarge past MaxAnswerBytes. An error
// of read is returned as is, unless reading the body itself failed (a
// timeout or a dropped connection mid-answer), which is retried, or read
// wrapped it with Retry.
func (c *Client) Post(ctx context.Context, body []byte, accept string, read func(io.Reader) error) error {
	for attempt := 0; ; attempt++ {
		err := c.attempt(ctx, body, accept, read)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var re *retryable
		if !errors.As(err, &re) {
			return err
		}
		if attempt >= c.cfg.MaxRetries {
			return fmt.Errorf("giving up after %d attempts: %w", attempt+1, re.err)
		}
		delay := c.Backoff(attempt)
		if re.retryAfter > 0 {
			if re.retryAfter > c.cfg.MaxRetryAfter {
				return fmt.Errorf("the server asks to retry after %s (more than %s): %w", re.retryAfter, c.cfg.MaxRetryAfter, re.err)
			}
			delay = re.retryAfter
		}
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < delay {
			return fmt.Errorf("no time left to retry in %s: %w", delay, re.err)
		}
		c.cfg.Logger.Warn(c.cfg.Service+" request failed; retrying", "endpoint", c.display, "attempt", attempt+1,
			"retry_in", delay.Round(time.Millisecond), "err", re.err)
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// Backoff is the delay before retry n (0-based): a random time between
// half and all of min(RetryMaxDelay, RetryBaseDelay·2ⁿ).
func (c *Client) Backoff(n int) time.Duration {
	d := c.cfg.RetryMaxDelay
	if n < 30 {
		d = min(d, c.cfg.RetryBaseDelay<<n)
	}
	return d/2 + rand.N(d/2+1)
}

// APIError is a non-success HTTP answer.
type APIError struct {
	Service    string // "embedding server"
	Endpoint   string // without user information
	StatusCode int
	Message    string // the server's message (its "error"), or the start of its body
}

func (e *APIError) Error() string {
	msg := fmt.Sprintf("%s %s answered %d %s", e.Service, e.Endpoint, e.StatusCode, http.StatusText(e.StatusCode))
	if e.Message != "" {
		msg += ": " + e.Message
	}
	return msg
}

// retryable marks an error worth another attempt.
type retryable struct {
	err        error
	retryAfter time.Duration // from the Retry-After header; 0 if none
}

func (r *retryable) Error() string { return r.err.Error() }
func (r *retryable) Unwrap() error { return r.err }

// Retry marks an error of a read function as worth another attempt (a
// server that broke off its answer, say).
func Retry(err error) error { return &retryable{err: err} }

// attempt sends one request and reads the answer.
func (c *Client) attempt(ctx context.Context, body []byte, accept string, read func(io.Reader) error) error {
	actx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(actx, http.MethodPost, c.endpoint, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", accept)
	req.Header.Set("User-Agent", "cardex")
	if c.cfg.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.cfg.APIKey)
	}
	resp, err := c.cfg.HTTPClient.Do(req)
	if err != nil {
		return c.transportError(ctx, actx, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		apiErr := &APIError{Service: c.cfg.Service, Endpoint: c.display, StatusCode: resp.StatusCode, Message: ErrorMessage(data)}
		if resp.StatusCode == http.StatusTooManyRequests ||
			(resp.StatusCode >= 500 && resp.StatusCode != http.StatusNotImplemented) {
			return &retryable{err: apiErr, retryAfter: ParseRetryAfter(resp.Header.Get("Retry-After"), time.Now())}
		}
		return apiErr
	}
	br := &bodyReader{r: resp.Body, left: c.cfg.MaxAnswerBytes}
	err = read(br)
	switch {
	case err == nil:
		return nil
	case br.tooLarge:
		return fmt.Errorf("%s %s: %w (more than %d bytes)", c.cfg.Service, c.display, ErrAnswerTooLarge, c.cfg.MaxAnswerBytes)
	case br.err != nil:
		return c.transportError(ctx, actx, br.err)
	}
	return err
}

// transportError classifies a failure to get an answer: the caller's own
// cancellation as is, everything else (timeout, refused connection, reset)
// as retryable.
func (c *Client) transportError(ctx, actx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if errors.Is(actx.Err(), context.DeadlineExceeded) {
		return &retryable{err: fmt.Errorf("%s %s: no answer within %s", c.cfg.Service, c.display, c.cfg.Timeout)}
	}
	// url.Error carries the (user-information-free) URL already.
	return &retryable{err: fmt.Errorf("%s: %w", c.cfg.Service, err)}
}

// bodyReader bounds an answer's body and remembers why reading it failed.
type bodyReader struct {
	r        io.Reader
	left     int64
	tooLarge bool
	err      error // a failure of the connection (not io.EOF)
}

func (b *bodyReader) Read(p []byte) (int, error) {
	if b.left <= 0 {
		// One byte more tells a body of exactly the limit from a longer one.
		var one [1]byte
		n, err := b.r.Read(one[:])
		if n > 0 {
			b.tooLarge = true
			return 0, ErrAnswerTooLarge
		}
		return 0, b.note(err)
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.r.Read(p)
	b.left -= int64(n)
	return n, b.note(err)
}

func (b *bodyReader) note(err error) error {
	if err != nil && err != io.EOF && b.err == nil {
		b.err = err
	}
	return err
}

// ErrorMessage extracts the server's message from an error body: OpenAI and
// vLLM send {"error": {"message": ...}}, Ollama and
// text-embeddings-inference {"error": "..."}; anything else is quoted
// (shortened).
func ErrorMessage(body []byte) string {
	var e struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
		Detail  json.RawMessage `json:"detail"`
	}
	msg := ""
	if json.Unmarshal(body, &e) == nil {
		var s string
		var obj struct {
			Message string `json:"message"`
		}
		switch {
		case json.Unmarshal(e.Error, &s) == nil && s != "":
			msg = s
		case json.Unmarshal(e.Error, &obj) == nil && obj.Message != "":
			msg = obj.Message
		case e.Message != "":
			msg = e.Message
		case len(e.Detail) > 0:
			msg = string(e.Detail)
		}
	}
	if msg == "" {
		msg = string(bytes.TrimSpace(body))
	}
	msg = strings.Join(strings.Fields(msg), " ")
	if len(msg) > maxErrorMessage {
		msg = strings.ToValidUTF8(msg[:maxErrorMessage], "") + "…"
	}
	return msg
}

// ParseRetryAfter reads a Retry-After value: seconds, or an HTTP date.
func ParseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		if s <= 0 || math.IsNaN(s) || s > 1e6 {
			return 0
		}
		return time.Duration(s * float64(time.Second))
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := t.Sub(now); d > 0 {
			return d
		}
	}
	return 0
}

// RedactURL drops any user information from a URL.
func RedactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(invalid URL)"
	}
	u.User = nil
	return u.String()
}

// Redacted says whether a secret is set without showing it.
func Redacted(key string) string {
	if key == "" {
		return "(none)"
	}
	return "(set)"
}
