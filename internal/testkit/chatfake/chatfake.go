// Package chatfake is a local OpenAI-compatible chat server for tests: a
// real HTTP server on loopback that answers POST /v1/chat/completions in
// the real wire format, plain JSON or server-sent events (when the request
// says "stream": true). By default it plays a model that writes search
// phrases from the tool shown in the prompt; a test may script any answer
// (errors, Retry-After, malformed or oversized bodies, injections), count
// the calls, and hold answers back to interrupt a run.
package chatfake

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// Message is one chat message of a request.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// Request is one request the server received.
type Request struct {
	Path     string
	Auth     string
	Accept   string
	Model    string
	Messages []Message
	Stream   bool
}

// User is the text of the request's last user message.
func (r Request) User() string {
	for i := len(r.Messages) - 1; i >= 0; i-- {
		if r.Messages[i].Role == "user" {
			return r.Messages[i].Content
		}
	}
	return ""
}

// Server is the fake chat server.
type Server struct {
	// URL is the base URL to configure a client with ("http://127.0.0.1:N/v1").
	URL string
	srv *httptest.Server

	mu       sync.Mutex
	requests []Request
	script   map[int]http.HandlerFunc
	always   http.HandlerFunc
	content  func(Request) string
	hold     chan struct{} // when set, requests past holdAfter wait on it
	holdFrom int
	waiting  int // requests waiting on hold now
}

// New starts a server; it stops when the test ends.
func New(t interface{ Cleanup(func()) }) *Server {
	s := &Server{script: map[int]http.HandlerFunc{}}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = s.srv.URL + "/v1"
	t.Cleanup(s.Close)
	return s
}

// Close stops the server (releasing held requests first).
func (s *Server) Close() {
	s.Release()
	s.srv.CloseClientConnections()
	s.srv.Close()
}

// On scripts the answer to the n-th request (0-based).
func (s *Server) On(n int, h http.HandlerFunc) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.script[n] = h
}

// Always answers every request with h (nil: back to the default model).
func (s *Server) Always(h http.HandlerFunc) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.always = h
}

// Content replaces the default model: f returns the assistant's text for a
// request, sent plain or streamed as the request asks.
func (s *Server) Content(f func(Request) string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.content = f
}

// HoldFrom makes the n-th request (0-based) and every later one wait until
// Release or Close, without answering.
func (s *Server) HoldFrom(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hold, s.holdFrom = make(chan struct{}), n
}

// Release lets held requests go on.
func (s *Server) Release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.hold != nil {
		close(s.hold)
		s.hold = nil
	}
}

// Waiting is how many requests wait on HoldFrom's hold now (a request
// whose client has gone stops waiting once the server notices).
func (s *Server) Waiting() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.waiting
}

// Calls is how many requests arrived.
func (s *Server) Calls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.requests)
}

// Requests returns the requests received so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.requests)
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/chat/completions") {
		w.WriteHeader(http.StatusNotFound)
		io.WriteString(w, `{"error":{"message":"Unknown request URL","type":"invalid_request_error"}}`)
		return
	}
	var body struct {
		Model    string    `json:"model"`
		Messages []Message `json:"messages"`
		Stream   bool      `json:"stream"`
	}
	data, _ := io.ReadAll(r.Body)
	if err := json.Unmarshal(data, &body); err != nil || body.Model == "" || len(body.Messages) == 0 {
		w.WriteHeader(http.StatusBadRequest)
		io.WriteString(w, `{"error":{"message":"you must provide a model parameter and messages","type":"invalid_request_error"}}`)
		return
	}
	req := Request{Path: r.URL.Path, Auth: r.Header.Get("Authorization"), Accept: r.Header.Get("Accept"),
		Model: body.Model, Messages: body.Messages, Stream: body.Stream}
	s.mu.Lock()
	n := len(s.requests)
	s.requests = append(s.requests, req)
	h := s.script[n]
	if s.always != nil {
		h = s.always
	}
	content := s.content
	hold := s.hold
	if n < s.holdFrom {
		hold = nil
	}
	if hold != nil {
		s.waiting++
	}
	s.mu.Unlock()
	if hold != nil {
		select {
		case <-hold:
		case <-r.Context().Done():
		}
		s.mu.Lock()
		s.waiting--
		s.mu.Unlock()
		if r.Context().Err() != nil {
			return // the client has gone: no answer
		}
	}
	if h != nil {
		h(w, r)
		return
	}
	if content == nil {
		content = Phrases
	}
	Reply(w, req, content(req))
}

// Reply answers req with text as the assistant's message: one chat
// completion, or a stream of chunks of a few characters each when req asks
// for a stream.
func Reply(w http.ResponseWriter, req Request, text string) {
	if !req.Stream {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{
			"id": "chatcmpl-fake", "object": "chat.completion", "created": 1700000000, "model": req.Model,
			"choices": []any{map[string]any{"index": 0, "finish_reason": "stop",
				"message": map[string]any{"role": "assistant", "content": text}}},
			"usage": map[string]int{"prompt_tokens": len(req.User()) / 4, "completion_tokens": len(text) / 4},
		})
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	flusher, _ := w.(http.Flusher)
	chunk := func(delta map[string]any, finish any) {
		b, _ := json.Marshal(map[string]any{"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 1700000000,
			"model": req.Model, "choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}})
		fmt.Fprintf(w, "data: %s\n\n", b)
		if flusher != nil {
			flusher.Flush()
		}
	}
	io.WriteString(w, ": keep-alive\n\n")
	chunk(map[string]any{"role": "assistant", "content": ""}, nil)
	r := []rune(text)
	for i := 0; i < len(r); i += 7 {
		chunk(map[string]any{"content": string(r[i:min(i+7, len(r))])}, nil)
	}
	chunk(map[string]any{}, "stop")
	io.WriteString(w, "data: [DONE]\n\n")
}

var exactlyRE = regexp.MustCompile(`exactly (\d+)`)

// Tool reads the tool object the prompt shows (the first JSON object of
// the user message).
func Tool(req Request) map[string]any {
	u := req.User()
	i := strings.Index(u, "{")
	if i < 0 {
		return nil
	}
	var v map[string]any
	if json.NewDecoder(strings.NewReader(u[i:])).Decode(&v) != nil {
		return nil
	}
	return v
}

// Phrases is the default model: as many phrases as the prompt asks for,
// made from the words of the tool's name (so they are English, distinct
// and deterministic), as {"phrases": [...]}.
func Phrases(req Request) string {
	n := 6
	if m := exactlyRE.FindStringSubmatch(req.User()); m != nil {
		n, _ = strconv.Atoi(m[1])
	}
	name := "the tool"
	if t := Tool(req); t != nil {
		if full, ok := t["tool"].(string); ok {
			_, tool, _ := strings.Cut(full, "/")
			name = strings.Join(strings.FieldsFunc(tool, func(r rune) bool { return r == '_' || r == '-' || r == '.' }), " ")
		}
	}
	forms := []string{"I need to %s", "%s in the usual way", "first %s, then save the result", "something that can %s for me", "%s for the file report.txt", "%s quickly"}
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf(forms[i%len(forms)], name)
		if i >= len(forms) {
			out[i] += fmt.Sprintf(" again, round %d", i/len(forms)+1)
		}
	}
	b, _ := json.Marshal(map[string]any{"phrases": out})
	return string(b)
}
