package ratelimit

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
)

// Who identifies the caller and tenant of an HTTP request; ok false leaves
// the request to the handler (which refuses unknown credentials itself).
type Who func(*http.Request) (caller, tenant string, ok bool)

// maxPeek bounds how much of a request body is read to classify it.
const maxPeek = 8 << 20

// HTTP limits an MCP streamable-HTTP endpoint: a JSON-RPC request that
// calls the tool named callTool draws from the call bucket, everything
// else (initialize, tools/list, search and describe) from the discovery
// bucket (a body that does not parse: the call bucket). A refused request gets 429 Too Many Requests with Retry-After
// (whole seconds, at least 1) and nothing reaches next.
func (l *Limiter) HTTP(who Who, callTool string, next http.Handler) http.Handler {
	if l == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		caller, tenant, ok := who(r)
		if !ok || r.Method != http.MethodPost {
			next.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, maxPeek))
		if err != nil {
			http.Error(w, "reading the request: "+err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(io.MultiReader(bytes.NewReader(body), r.Body))
		class := Call
		if onlyDiscovery(body, callTool) {
			class = Discovery
		}
		if d := l.Allow(class, caller, tenant); d != nil {
			tooMany(w, d)
			return
		}
		release, d := l.Acquire(caller)
		if d != nil {
			tooMany(w, d)
			return
		}
		defer release()
		next.ServeHTTP(w, r)
	})
}

func tooMany(w http.ResponseWriter, d *Denial) {
	d.SetRetryAfter(w.Header())
	http.Error(w, d.Error(), http.StatusTooManyRequests)
}

// SetRetryAfter sets the HTTP Retry-After header of a 429 answering d
// (RetryAfterSeconds).
func (d *Denial) SetRetryAfter(h http.Header) {
	h.Set("Retry-After", strconv.Itoa(d.RetryAfterSeconds()))
}

type rpcMessage struct {
	Method string `json:"method"`
	Params struct {
		Name string `json:"name"`
	} `json:"params"`
}

// onlyDiscovery reports whether a JSON-RPC message (or batch) parses and
// calls no tool named name. What does not parse counts as a call, the
// stricter bucket.
func onlyDiscovery(body []byte, name string) bool {
	body = bytes.TrimSpace(body)
	var msgs []rpcMessage
	if len(body) > 0 && body[0] == '[' {
		if json.Unmarshal(body, &msgs) != nil {
			return false
		}
	} else {
		var m rpcMessage
		if json.Unmarshal(body, &m) != nil {
			return false
		}
		msgs = []rpcMessage{m}
	}
	for _, m := range msgs {
		if m.Method == "tools/call" && m.Params.Name == name {
			return false
		}
	}
	return true
}
