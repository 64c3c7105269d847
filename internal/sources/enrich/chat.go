// Package enrich writes search examples for capability cards with a
// language model at registration time: requests a tool serves, indexed
// beside the card but never sent to an agent. It holds the chat client for
// OpenAI-compatible /v1/chat/completions servers (OpenAI, Ollama, vLLM,
// llama.cpp server, LM Studio), the fixed, versioned prompt, the validation
// and sanitising of the model's answer, a cache keyed by (model, prompt
// version, card text), and the run that selects cards and writes their
// examples through the catalogue with optimistic concurrency.
package enrich

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/seed0cff8200/cardex/cards"
	"github.com/seed0cff8200/cardex/embed/apiclient"
)

// Defaults of ChatConfig.
const (
	DefaultChatTimeout    = 2 * time.Minute
	DefaultMaxAnswerBytes = 1 << 20
)

// Environment variables holding the API key of the chat server, in order.
var KeyVariables = []string{"CARDEX_LLM_API_KEY", "OPENAI_API_KEY"}

// KeyFromEnv returns the first API key set in KeyVariables ("" if none).
func KeyFromEnv(getenv func(string) string) string {
	for _, v := range KeyVariables {
		if k := getenv(v); k != "" {
			return k
		}
	}
	return ""
}

// ChatConfig configures a Chat client.
type ChatConfig struct {
	// BaseURL of the server: "https://api.openai.com/v1",
	// "http://127.0.0.1:11434/v1" (Ollama), "http://127.0.0.1:8000/v1"
	// (vLLM), "http://127.0.0.1:8080" (llama.cpp), "http://127.0.0.1:1234/v1"
	// (LM Studio). A path ending in /chat/completions is used as is.
	BaseURL string
	// Model is the model name the server knows ("gpt-4o-mini", "llama3.1").
	Model string
	// APIKey, if set, is sent as a bearer token; never logged or shown.
	APIKey string
	// Stream asks for a streamed answer (server-sent events).
	Stream bool
	// Temperature is sent when set; MaxTokens when positive. Unset, the
	// server's defaults apply (some models accept no other).
	Temperature *float64
	MaxTokens   int
	// Timeout bounds one attempt, the whole answer included (default 2m).
	Timeout time.Duration
	// MaxRetries, RetryBaseDelay, RetryMaxDelay and MaxRetryAfter shape the
	// retries after 429, 5xx, timeouts and network errors, as in
	// apiclient.Config.
	MaxRetries     int
	RetryBaseDelay time.Duration
	RetryMaxDelay  time.Duration
	MaxRetryAfter  time.Duration
	// MaxAnswerBytes bounds the answer: the HTTP body and the text of the
	// message (default 1 MiB).
	MaxAnswerBytes int64
	HTTPClient     *http.Client
	Logger         *slog.Logger
}

// String describes the configuration without the API key.
func (c ChatConfig) String() string {
	return fmt.Sprintf("{BaseURL:%s Model:%s APIKey:%s Stream:%t Timeout:%s}",
		apiclient.RedactURL(c.BaseURL), c.Model, apiclient.Redacted(c.APIKey), c.Stream, c.Timeout)
}

// LogValue keeps the API key out of structured logs.
func (c ChatConfig) LogValue() slog.Value {
	return slog.GroupValue(slog.String("base_url", apiclient.RedactURL(c.BaseURL)),
		slog.String("model", c.Model), slog.String("api_key", apiclient.Redacted(c.APIKey)))
}

// Message is one chat message.
type Message struct {
	Role    string `json:"role"` // system, user or assistant
	Content string `json:"content"`
}

// Answer is the model's reply.
type Answer struct {
	Content string
	// FinishReason is the server's: "stop", "length" (cut at the token
	// limit), "content_filter", or "" when it gave none.
	FinishReason string
}

// Chat is a client of an OpenAI-compatible /v1/chat/completions endpoint.
// It is safe for concurrent use.
type Chat struct {
	cfg ChatConfig
	api *apiclient.Client
}

// NewChat checks the configuration and applies the defaults. It does not
// contact the server.
func NewChat(cfg ChatConfig) (*Chat, error) {
	if strings.TrimSpace(cfg.Model) == "" {
		return nil, errors.New("chat client: a model name is required")
	}
	u, err := apiclient.Endpoint(cfg.BaseURL, "chat/completions")
	if err != nil {
		return nil, fmt.Errorf("chat client: %w", err)
	}
	if cfg.MaxTokens < 0 {
		return nil, fmt.Errorf("chat client: max tokens %d is negative", cfg.MaxTokens)
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultChatTimeout
	}
	if cfg.MaxAnswerBytes == 0 {
		cfg.MaxAnswerBytes = DefaultMaxAnswerBytes
	}
	api, err := apiclient.New(apiclient.Config{
		Service:        "chat server",
		Endpoint:       u,
		APIKey:         cfg.APIKey,
		Timeout:        cfg.Timeout,
		MaxRetries:     cfg.MaxRetries,
		RetryBaseDelay: cfg.RetryBaseDelay,
		RetryMaxDelay:  cfg.RetryMaxDelay,
		MaxRetryAfter:  cfg.MaxRetryAfter,
		MaxAnswerBytes: cfg.MaxAnswerBytes,
		HTTPClient:     cfg.HTTPClient,
		Logger:         cfg.Logger,
	})
	if err != nil {
		return nil, fmt.Errorf("chat client: %w", err)
	}
	return &Chat{cfg: cfg, api: api}, nil
}

// Model is the model name as configured.
func (c *Chat) Model() string { return c.cfg.Model }

// Endpoint is the chat completions URL (without user information).
func (c *Chat) Endpoint() string { return c.api.Display() }

type chatRequest struct {
	Model       string    `json:"model"`
	Messages    []Message `json:"messages"`
	Stream      bool      `json:"stream,omitempty"`
	Temperature *float64  `json:"temperature,omitempty"`
	MaxTokens   int       `json:"max_tokens,omitempty"`
}

// choice is one choice of a plain answer (message) or of a stream chunk
// (delta). Content is a pointer: a refusal or a tool call has none.
type choice struct {
	Message *struct {
		Content *string `json:"content"`
		Refusal string  `json:"refusal"`
	} `json:"message"`
	Delta *struct {
		Content *string `json:"content"`
	} `json:"delta"`
	FinishReason *string `json:"finish_reason"`
}

type chatResponse struct {
	Choices []choice        `json:"choices"`
	Error   json.RawMessage `json:"error"`
}

// Complete sends the messages and returns the model's reply, retrying
// transient failures. An answer that is not a chat completion, has no
// text, or is larger than MaxAnswerBytes is an error (not retried); a
// stream that breaks off before its end is retried.
func (c *Chat) Complete(ctx context.Context, msgs []Message) (Answer, error) {
	body, err := json.Marshal(chatRequest{Model: c.cfg.Model, Messages: msgs, Stream: c.cfg.Stream,
		Temperature: c.cfg.Temperature, MaxTokens: c.cfg.MaxTokens})
	if err != nil {
		return Answer{}, err
	}
	var a Answer
	accept, read := "application/json", c.readPlain(&a)
	if c.cfg.Stream {
		accept, read = "text/event-stream", c.readStream(&a)
	}
	if err := c.api.Post(ctx, body, accept, read); err != nil {
		return Answer{}, fmt.Errorf("chat with %s: %w", c.cfg.Model, err)
	}
	return a, nil
}

func (c *Chat) readPlain(a *Answer) func(io.Reader) error {
	return func(r io.Reader) error {
		data, err := io.ReadAll(r)
		if err != nil {
			return err
		}
		var resp chatResponse
		if err := json.Unmarshal(data, &resp); err != nil {
			return fmt.Errorf("%s: the answer is not a chat completion: %w", c.Endpoint(), err)
		}
		if len(resp.Error) > 0 && string(resp.Error) != "null" {
			return fmt.Errorf("%s answered an error: %s", c.Endpoint(), apiclient.ErrorMessage(data))
		}
		if len(resp.Choices) == 0 || resp.Choices[0].Message == nil {
			return fmt.Errorf("%s: the answer has no message", c.Endpoint())
		}
		ch := resp.Choices[0]
		if ch.FinishReason != nil {
			a.FinishReason = *ch.FinishReason
		}
		if ch.Message.Content == nil || strings.TrimSpace(*ch.Message.Content) == "" {
			if ch.Message.Refusal != "" {
				return fmt.Errorf("%s: the model refused: %s", c.Endpoint(), cards.Cut(ch.Message.Refusal, 200))
			}
			return fmt.Errorf("%s: the answer has no text (finish reason %q)", c.Endpoint(), a.FinishReason)
		}
		a.Content = *ch.Message.Content
		return nil
	}
}

// readStream reads server-sent events: "data: {chunk}" lines separated by
// blank lines, ending with "data: [DONE]". Other fields and comments are
// skipped.
func (c *Chat) readStream(a *Answer) func(io.Reader) error {
	return func(r io.Reader) error {
		var text strings.Builder
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64<<10), int(min(c.cfg.MaxAnswerBytes, 16<<20))+1)
		done := false
		for sc.Scan() {
			line := sc.Bytes()
			data, ok := bytes.CutPrefix(line, []byte("data:"))
			if !ok {
				continue // event:, id:, retry:, ": comment", blank line
			}
			data = bytes.TrimSpace(data)
			if string(data) == "[DONE]" {
				done = true
				break
			}
			var chunk chatResponse
			if err := json.Unmarshal(data, &chunk); err != nil {
				return fmt.Errorf("%s: a stream event is not a chat completion chunk: %w", c.Endpoint(), err)
			}
			if len(chunk.Error) > 0 && string(chunk.Error) != "null" {
				return fmt.Errorf("%s answered an error in the stream: %s", c.Endpoint(), apiclient.ErrorMessage(data))
			}
			for _, ch := range chunk.Choices {
				if ch.Delta != nil && ch.Delta.Content != nil {
					text.WriteString(*ch.Delta.Content)
					if int64(text.Len()) > c.cfg.MaxAnswerBytes {
						return fmt.Errorf("%s: %w (more than %d bytes of text)", c.Endpoint(), apiclient.ErrAnswerTooLarge, c.cfg.MaxAnswerBytes)
					}
				}
				if ch.FinishReason != nil && *ch.FinishReason != "" {
					a.FinishReason = *ch.FinishReason
				}
			}
		}
		if err := sc.Err(); err != nil {
			if errors.Is(err, bufio.ErrTooLong) {
				return fmt.Errorf("%s: %w (a stream line is longer than the limit)", c.Endpoint(), apiclient.ErrAnswerTooLarge)
			}
			return err
		}
		if !done && a.FinishReason == "" {
			return apiclient.Retry(fmt.Errorf("%s: the stream ended before the answer did", c.Endpoint()))
		}
		if strings.TrimSpace(text.String()) == "" {
			return fmt.Errorf("%s: the answer has no text (finish reason %q)", c.Endpoint(), a.FinishReason)
		}
		a.Content = text.String()
		return nil
	}
}
