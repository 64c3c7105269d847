package upstream

import (
	"fmt"
	"net/url"
	"strings"
)

// Response size limits of rest upstreams.
const (
	DefaultMaxResponseBytes = 1 << 20
	// MaxMaxResponseBytes keeps a whole result (the body is returned both as
	// text and as structured content) under the ExecutionService's 32 MiB.
	MaxMaxResponseBytes = 8 << 20
)

// validateREST checks an entry of kind rest: an http(s) base URL that fixes
// scheme, host and port, and carries no credentials (they go in headers).
func (u Upstream) validateREST() error {
	if u.URL != "" || len(u.Command) > 0 || len(u.Env) > 0 {
		return fmt.Errorf("server %q: kind %s takes base_url and headers (url, command and env are for kind %s)", u.Server, REST, MCP)
	}
	if u.BaseURL == "" {
		return fmt.Errorf("server %q: kind %s needs base_url, e.g. https://api.example.com/v1", u.Server, REST)
	}
	p, err := url.Parse(u.BaseURL)
	switch {
	case err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" || p.Opaque != "":
		return fmt.Errorf("server %q: base_url must be an http(s) URL such as https://api.example.com/v1", u.Server)
	case p.User != nil:
		return fmt.Errorf("server %q: base_url must not hold a user or password; send credentials in headers", u.Server)
	case p.RawQuery != "" || p.ForceQuery || p.Fragment != "" || strings.Contains(u.BaseURL, "#"):
		return fmt.Errorf("server %q: base_url must not have a query or fragment; send credentials in headers", u.Server)
	}
	if u.MaxResponseBytes < 0 || u.MaxResponseBytes > MaxMaxResponseBytes {
		return fmt.Errorf("server %q: max_response_bytes is %d; it must be between 1 and %d (default %d)", u.Server, u.MaxResponseBytes, MaxMaxResponseBytes, DefaultMaxResponseBytes)
	}
	for k := range u.Headers {
		if k == "" || strings.ContainsAny(k, " \t\r\n:") {
			return fmt.Errorf("server %q: header name %q is not a valid HTTP header name", u.Server, k)
		}
	}
	return nil
}

// ResponseLimit is the bound of one rest response body.
func (u Upstream) ResponseLimit() int64 {
	if u.MaxResponseBytes <= 0 {
		return DefaultMaxResponseBytes
	}
	return u.MaxResponseBytes
}

// ExpandHeaders returns the entry's headers with ${VAR} references expanded.
func (u Upstream) ExpandHeaders() (map[string]string, error) {
	out := make(map[string]string, len(u.Headers))
	for k, v := range u.Headers {
		ev, err := expand(v)
		if err != nil {
			return nil, fmt.Errorf("server %q: header %s: %w", u.Server, k, err)
		}
		out[k] = ev
	}
	return out, nil
}
