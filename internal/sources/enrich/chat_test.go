package enrich

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/seed0cff8200/cardex/embed/apiclient"
	"github.com/seed0cff8200/cardex/internal/testkit/chatfake"
)

func newTestChat(t *testing.T, s *chatfake.Server, cfg ChatConfig) *Chat {
	t.Helper()
	if cfg.BaseURL == "" {
		cfg.BaseURL = s.URL
	}
	if cfg.Model == "" {
		cfg.Model = "test-llm"
	}
	if cfg.RetryBaseDelay == 0 {
		cfg.RetryBaseDelay = 5 * time.Millisecond
	}
	c, err := NewChat(cfg)
	if err != nil {
		t.Fatalf("NewChat: %v", err)
	}
	return c
}

var hello = []Message{{Role: "system", Content: "Be brief."}, {Role: "user", Content: "Say hello."}}

func TestChatPlainAndStreamed(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprintf("stream=%t", stream), func(t *testing.T) {
			s := chatfake.New(t)
			want := "Hello — 你好, with \"quotes\" and a long enough text to need several stream chunks."
			s.Content(func(chatfake.Request) string { return want })
			c := newTestChat(t, s, ChatConfig{Stream: stream, APIKey: "sk-test"})
			a, err := c.Complete(context.Background(), hello)
			if err != nil {
				t.Fatal(err)
			}
			if a.Content != want || a.FinishReason != "stop" {
				t.Errorf("got %+v, want %q with finish reason stop", a, want)
			}
			reqs := s.Requests()
			if len(reqs) != 1 {
				t.Fatalf("%d requests", len(reqs))
			}
			r := reqs[0]
			wantAccept := map[bool]string{false: "application/json", true: "text/event-stream"}[stream]
			if r.Path != "/v1/chat/completions" || r.Model != "test-llm" || r.Stream != stream || r.Auth != "Bearer sk-test" ||
				r.Accept != wantAccept || len(r.Messages) != 2 || r.Messages[1].Content != "Say hello." {
				t.Errorf("request %+v", r)
			}
		})
	}
}

func TestChatStreamWireDetails(t *testing.T) {
	for name, tc := range map[string]struct {
		body, want, err string
	}{
		// Comments, event names, CRLF line ends, a role-only first chunk,
		// a chunk with no choices (usage) and a null content.
		"full": {body: ": ping\r\nevent: message\r\ndata: {\"choices\":[{\"delta\":{\"role\":\"assistant\"}}]}\r\n\r\n" +
			"data: {\"choices\":[{\"delta\":{\"content\":\"Hel\"}}]}\n\n" +
			"data:{\"choices\":[{\"delta\":{\"content\":null}}]}\n\n" +
			"data: {\"choices\":[{\"delta\":{\"content\":\"lo\"},\"finish_reason\":\"length\"}]}\n\n" +
			"data: {\"choices\":[],\"usage\":{\"total_tokens\":3}}\n\n" +
			"data: [DONE]\n\n", want: "Hello"},
		// llama.cpp and others may end with the finish reason and close.
		"no DONE": {body: "data: {\"choices\":[{\"delta\":{\"content\":\"Hi\"},\"finish_reason\":\"stop\"}]}\n\n", want: "Hi"},
		"error event": {body: "data: {\"choices\":[{\"delta\":{\"content\":\"Hi\"}}]}\n\n" +
			"data: {\"error\":{\"message\":\"model crashed\"}}\n\n", err: "model crashed"},
		"not JSON":   {body: "data: <html>\n\n", err: "not a chat completion chunk"},
		"no text":    {body: "data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n", err: "no text"},
		"plain JSON": {body: `{"choices":[{"message":{"content":"x"}}]}`, err: "stream ended before the answer"},
	} {
		t.Run(name, func(t *testing.T) {
			s := chatfake.New(t)
			s.Always(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				io.WriteString(w, tc.body)
			})
			a, err := newTestChat(t, s, ChatConfig{Stream: true, MaxRetries: 1}).Complete(context.Background(), hello)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("got %+v, %v; want an error with %q", a, err, tc.err)
				}
				return
			}
			if err != nil || a.Content != tc.want {
				t.Fatalf("got %+v, %v; want %q", a, err, tc.want)
			}
		})
	}
}

func TestChatStreamBrokenOffIsRetried(t *testing.T) {
	s := chatfake.New(t)
	s.On(0, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: {\"choices\":[{\"delta\":{\"content\":\"Hal\"}}]}\n\n")
	})
	s.Content(func(chatfake.Request) string { return "Hello" })
	a, err := newTestChat(t, s, ChatConfig{Stream: true}).Complete(context.Background(), hello)
	if err != nil || a.Content != "Hello" || s.Calls() != 2 {
		t.Fatalf("got %+v, %v after %d calls; want the second, whole answer", a, err, s.Calls())
	}
}

func TestChatRetriesHonourRetryAfter(t *testing.T) {
	s := chatfake.New(t)
	s.On(0, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusTooManyRequests)
		io.WriteString(w, `{"error":{"message":"Rate limit reached for gpt-4o-mini","type":"requests","code":"rate_limit_exceeded"}}`)
	})
	s.On(1, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, `{"error":"server busy, please try again. maximum pending requests exceeded"}`)
	})
	s.On(2, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
		io.WriteString(w, "Internal Server Error")
	})
	s.Content(func(chatfake.Request) string { return "ok" })
	var logs bytes.Buffer
	c := newTestChat(t, s, ChatConfig{APIKey: "sk-secret-key", Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	start := time.Now()
	a, err := c.Complete(context.Background(), hello)
	if err != nil || a.Content != "ok" {
		t.Fatalf("after 429, 503 and 500: %+v, %v", a, err)
	}
	if took := time.Since(start); took < time.Second {
		t.Errorf("took %s; the 429's Retry-After: 1 was not honoured", took)
	}
	if s.Calls() != 4 {
		t.Errorf("%d calls, want 4", s.Calls())
	}
	for _, want := range []string{"Rate limit reached", "server busy", "chat server"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("retry warnings lack %q:\n%s", want, logs.String())
		}
	}
	if strings.Contains(logs.String(), "sk-secret-key") {
		t.Errorf("the API key was logged")
	}
}

func TestChatGivesUpAndDoesNotRetryClientErrors(t *testing.T) {
	s := chatfake.New(t)
	s.Always(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadGateway)
		io.WriteString(w, `{"error":"model is loading"}`)
	})
	_, err := newTestChat(t, s, ChatConfig{MaxRetries: 2}).Complete(context.Background(), hello)
	var apiErr *apiclient.APIError
	if err == nil || !strings.Contains(err.Error(), "giving up after 3 attempts") || !errors.As(err, &apiErr) || apiErr.StatusCode != 502 || s.Calls() != 3 {
		t.Errorf("always 502: %v after %d calls", err, s.Calls())
	}

	for status, body := range map[int]string{
		400: `{"error":{"message":"This model's maximum context length is 8192 tokens.","type":"invalid_request_error"}}`,
		404: `{"error":"model \"llama9\" not found, try pulling it first"}`,
		401: `{"error":{"message":"Incorrect API key provided: sk-***"}}`,
	} {
		s := chatfake.New(t)
		s.Always(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(status); io.WriteString(w, body) })
		_, err := newTestChat(t, s, ChatConfig{}).Complete(context.Background(), hello)
		if !errors.As(err, &apiErr) || apiErr.StatusCode != status || s.Calls() != 1 {
			t.Errorf("%d: %v after %d calls, want the APIError at once", status, err, s.Calls())
		}
	}
}

func TestChatTimeout(t *testing.T) {
	s := chatfake.New(t)
	block := func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }
	s.On(0, block)
	s.Content(func(chatfake.Request) string { return "late but fine" })
	c := newTestChat(t, s, ChatConfig{Timeout: 100 * time.Millisecond})
	a, err := c.Complete(context.Background(), hello)
	if err != nil || a.Content != "late but fine" || s.Calls() != 2 {
		t.Fatalf("timeout then success: %+v, %v, %d calls", a, err, s.Calls())
	}
	// A stream that stalls half-way is cut by the same timeout.
	s2 := chatfake.New(t)
	s2.Always(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: {\"choices\":[{\"delta\":{\"content\":\"Hal\"}}]}\n\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	})
	start := time.Now()
	_, err = newTestChat(t, s2, ChatConfig{Stream: true, Timeout: 100 * time.Millisecond, MaxRetries: -1}).Complete(context.Background(), hello)
	if err == nil || !strings.Contains(err.Error(), "no answer within 100ms") {
		t.Errorf("stalled stream: %v", err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("stalled stream returned after %s", took)
	}
}

func TestChatMalformedAndOversizedAnswers(t *testing.T) {
	for name, tc := range map[string]struct {
		body string
		max  int64
		want string
	}{
		"not JSON":     {body: "<html>502 Bad Gateway</html>", want: "not a chat completion"},
		"no choices":   {body: `{"choices":[]}`, want: "no message"},
		"null content": {body: `{"choices":[{"message":{"role":"assistant","content":null,"tool_calls":[]}}]}`, want: "no text"},
		"refusal":      {body: `{"choices":[{"message":{"role":"assistant","content":null,"refusal":"I can't help with that."}}]}`, want: "refused"},
		"error object": {body: `{"error":{"message":"context length exceeded"}}`, want: "context length exceeded"},
		"oversized":    {body: `{"choices":[{"message":{"content":"` + strings.Repeat("a", 5000) + `"}}]}`, max: 4096, want: "too large"},
	} {
		t.Run(name, func(t *testing.T) {
			s := chatfake.New(t)
			s.Always(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, tc.body) })
			_, err := newTestChat(t, s, ChatConfig{MaxAnswerBytes: tc.max}).Complete(context.Background(), hello)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error with %q", err, tc.want)
			}
			if s.Calls() != 1 {
				t.Errorf("%d calls; a malformed answer is not retried", s.Calls())
			}
		})
	}
	// A stream whose text grows past the limit stops reading.
	s := chatfake.New(t)
	s.Content(func(chatfake.Request) string { return strings.Repeat("word ", 2000) })
	_, err := newTestChat(t, s, ChatConfig{Stream: true, MaxAnswerBytes: 4096}).Complete(context.Background(), hello)
	if !errors.Is(err, apiclient.ErrAnswerTooLarge) {
		t.Errorf("oversized stream: %v", err)
	}
}

func TestChatCancellation(t *testing.T) {
	s := chatfake.New(t)
	s.Always(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "30")
		w.WriteHeader(http.StatusTooManyRequests)
	})
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	start := time.Now()
	_, err := newTestChat(t, s, ChatConfig{}).Complete(ctx, hello)
	if !errors.Is(err, context.Canceled) || time.Since(start) > 2*time.Second {
		t.Errorf("cancelled during a 30s Retry-After: %v after %s", err, time.Since(start))
	}
}

func TestChatConfig(t *testing.T) {
	for _, cfg := range []ChatConfig{
		{BaseURL: "http://h"},
		{Model: "m"},
		{BaseURL: "ftp://h", Model: "m"},
		{BaseURL: "http://h", Model: "m", MaxTokens: -1},
		{BaseURL: "http://h", Model: "m", Timeout: -time.Second},
	} {
		if _, err := NewChat(cfg); err == nil {
			t.Errorf("NewChat(%v) accepted", cfg)
		}
	}
	cfg := ChatConfig{BaseURL: "http://u:pw@h:11434/v1", Model: "llama3.1", APIKey: "sk-very-secret"}
	var logs bytes.Buffer
	slog.New(slog.NewJSONHandler(&logs, nil)).Info("config", "llm", cfg)
	for _, s := range []string{fmt.Sprint(cfg), fmt.Sprintf("%+v", cfg), logs.String()} {
		if strings.Contains(s, "sk-very-secret") || strings.Contains(s, "pw@") {
			t.Errorf("secret shown: %s", s)
		}
	}
	c, err := NewChat(cfg)
	if err != nil || c.Endpoint() != "http://h:11434/v1/chat/completions" || c.Model() != "llama3.1" {
		t.Errorf("NewChat: %v, endpoint %q", err, c.Endpoint())
	}
	env := map[string]string{"OPENAI_API_KEY": "sk-openai"}
	if k := KeyFromEnv(func(k string) string { return env[k] }); k != "sk-openai" {
		t.Errorf("KeyFromEnv fell back to %q", k)
	}
	env["CARDEX_LLM_API_KEY"] = "sk-cardex"
	if k := KeyFromEnv(func(k string) string { return env[k] }); k != "sk-cardex" {
		t.Errorf("KeyFromEnv chose %q", k)
	}
}
