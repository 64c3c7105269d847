// Package upstream holds the upstreams file (where call_tool goes, one entry
// per server, of a kind: an MCP server, or an HTTP API for rest_operation
// cards), the registry of connections to upstream MCP servers, and the audit
// log of calls. Each upstream's credentials (headers, environment) are held
// here, by cardex, and never reach the agent.
package upstream

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"sigs.k8s.io/yaml"

	"github.com/seed0cff8200/cardex/cards"
)

// DefaultTimeout bounds one forwarded call when an upstream names none.
const DefaultTimeout = 30 * time.Second

// Duration is a time.Duration written as "30s" in config files.
type Duration time.Duration

// UnmarshalJSON accepts a Go duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("a duration is written as a string such as \"30s\"")
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// MarshalJSON writes the duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// Upstream kinds: how cardex reaches a server, and so which cards it can
// call there.
const (
	// MCP is an MCP server (the default kind), for mcp_tool cards.
	MCP = "mcp"
	// REST is an HTTP API, for rest_operation cards (see Upstream.BaseURL).
	REST = "rest"
	// SQLKind is a PostgreSQL database: an entry with an sql section
	// (see sql.go); its kind may be left empty.
	SQLKind = "sql"
)

// Upstream is one entry of the upstreams file. Of kind mcp (the default) it
// is an MCP server, reached over streamable HTTP (URL, Headers) or started as
// a stdio command (Command, Env); of kind rest it is an HTTP API at BaseURL
// (with Headers). Header and environment values may name environment
// variables of the cardex process as ${VAR}; they are expanded when cardex
// connects or calls, so secrets need not sit in the file.
type Upstream struct {
	// Server is the card namespace the server's tools were imported under.
	Server string `json:"server"`
	// Tenant, when set, limits the upstream to that tenant's cards; an
	// entry with a tenant wins over one without for the same server.
	Tenant string `json:"tenant,omitempty"`
	// Kind is mcp (when empty), rest, or sql (implied by an sql section).
	Kind    string            `json:"kind,omitempty"`
	URL     string            `json:"url,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
	Command []string          `json:"command,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	// BaseURL (kind rest) is the API's scheme, host, port and base path:
	// every call goes to BaseURL followed by the card's path.
	BaseURL string `json:"base_url,omitempty"`
	// MaxResponseBytes (kind rest) bounds a response body (default 1 MiB).
	MaxResponseBytes int64 `json:"max_response_bytes,omitempty"`
	// Timeout bounds one call (default 30s).
	Timeout Duration `json:"timeout,omitempty"`
	// SQL makes the entry a PostgreSQL database instead of an MCP server
	// (see sql.go).
	SQL *SQL `json:"sql,omitempty"`
}

// UpstreamKind is the entry's kind: Kind, or, when it is empty, sql for an
// entry with an sql section and mcp otherwise.
func (u Upstream) UpstreamKind() string {
	switch {
	case u.Kind != "":
		return u.Kind
	case u.SQL != nil:
		return SQLKind
	}
	return MCP
}

// Config is the upstreams file given to `cardex serve --upstreams`.
type Config struct {
	Upstreams []Upstream `json:"upstreams"`
}

// LoadConfig reads an upstreams file (YAML or JSON; unknown fields are errors).
func LoadConfig(path string) (Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Config{}, err
	}
	var c Config
	if err := yaml.UnmarshalStrict(b, &c); err != nil {
		return Config{}, fmt.Errorf("%s: %w", path, err)
	}
	if err := c.Validate(); err != nil {
		return Config{}, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// Validate checks every entry and that no (tenant, server) is listed twice.
func (c Config) Validate() error {
	seen := map[string]bool{}
	for i, u := range c.Upstreams {
		if err := u.Validate(); err != nil {
			return fmt.Errorf("upstreams[%d]: %w", i, err)
		}
		k := u.Tenant + "/" + u.Server
		if seen[k] {
			return fmt.Errorf("upstreams[%d]: server %q (tenant %q) is listed twice", i, u.Server, u.Tenant)
		}
		seen[k] = true
	}
	return nil
}

// Find returns the upstream of a server for a tenant.
func (c Config) Find(tenant, server string) (Upstream, bool) {
	var any *Upstream
	for i, u := range c.Upstreams {
		if u.Server != server {
			continue
		}
		if u.Tenant == tenant {
			return u, true
		}
		if u.Tenant == "" {
			any = &c.Upstreams[i]
		}
	}
	if any != nil {
		return *any, true
	}
	return Upstream{}, false
}

// Validate checks one entry: the fields every kind has, then the kind's own.
func (u Upstream) Validate() error {
	if !cards.ValidName(u.Server) {
		return fmt.Errorf("server is required and must match [A-Za-z0-9_.-]{1,128}")
	}
	if u.Tenant != "" && !cards.ValidName(u.Tenant) {
		return fmt.Errorf("tenant must match [A-Za-z0-9_.-]{1,128}")
	}
	if u.Timeout < 0 {
		return fmt.Errorf("server %q: timeout must not be negative", u.Server)
	}
	if u.SQL != nil && u.UpstreamKind() != SQLKind {
		return fmt.Errorf("server %q: an sql section is for kind: %s", u.Server, SQLKind)
	}
	switch u.UpstreamKind() {
	case MCP:
		return u.validateMCP()
	case REST:
		return u.validateREST()
	case SQLKind:
		return u.validateSQL()
	default:
		return fmt.Errorf("server %q: kind %q: want %s (the default), %s or %s", u.Server, u.Kind, MCP, REST, SQLKind)
	}
}

// validateSQL checks an entry of kind sql: its sql section and nothing else.
func (u Upstream) validateSQL() error {
	if u.SQL == nil {
		return fmt.Errorf("server %q: kind %s needs an sql section", u.Server, SQLKind)
	}
	if u.URL != "" || len(u.Command) > 0 || len(u.Headers) > 0 || len(u.Env) > 0 || u.Timeout != 0 || u.BaseURL != "" || u.MaxResponseBytes != 0 {
		return fmt.Errorf("server %q: an sql entry takes no url, command, headers, env, base_url, max_response_bytes or timeout (use sql.statement_timeout)", u.Server)
	}
	return u.SQL.Validate(u.Server)
}

// validateMCP checks an entry of kind mcp: a url or a command.
func (u Upstream) validateMCP() error {
	if u.BaseURL != "" || u.MaxResponseBytes != 0 {
		return fmt.Errorf("server %q: base_url and max_response_bytes are for kind: %s", u.Server, REST)
	}
	switch {
	case u.URL != "" && len(u.Command) > 0:
		return fmt.Errorf("server %q: set url or command, not both", u.Server)
	case u.URL != "":
		p, err := url.Parse(u.URL)
		if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
			return fmt.Errorf("server %q: url must be an http(s) URL", u.Server)
		}
		if len(u.Env) > 0 {
			return fmt.Errorf("server %q: env is for commands; use headers with a url", u.Server)
		}
	case len(u.Command) > 0:
		if len(u.Headers) > 0 {
			return fmt.Errorf("server %q: headers are for urls; use env with a command", u.Server)
		}
	default:
		return fmt.Errorf("server %q: url or command is required", u.Server)
	}
	return nil
}

// CallTimeout is the bound of one call.
func (u Upstream) CallTimeout() time.Duration {
	if u.Timeout <= 0 {
		return DefaultTimeout
	}
	return time.Duration(u.Timeout)
}

// Transport builds the SDK transport for the upstream, expanding ${VAR} in
// header and environment values. A referenced variable that is unset is an
// error, so a missing secret fails loudly instead of sending an empty one.
func (u Upstream) Transport() (mcp.Transport, error) {
	if err := u.Validate(); err != nil {
		return nil, err
	}
	if u.UpstreamKind() != MCP {
		return nil, fmt.Errorf("server %q is a %s upstream, not an MCP server", u.Server, u.UpstreamKind())
	}
	if u.URL != "" {
		hdr := http.Header{}
		for k, v := range u.Headers {
			ev, err := expand(v)
			if err != nil {
				return nil, fmt.Errorf("server %q: header %s: %w", u.Server, k, err)
			}
			hdr.Set(k, ev)
		}
		client := &http.Client{Transport: headerTransport{base: http.DefaultTransport, hdr: hdr}}
		return &mcp.StreamableClientTransport{Endpoint: u.URL, HTTPClient: client, DisableStandaloneSSE: true}, nil
	}
	cmd := exec.Command(u.Command[0], u.Command[1:]...)
	cmd.Env = os.Environ()
	for k, v := range u.Env {
		ev, err := expand(v)
		if err != nil {
			return nil, fmt.Errorf("server %q: env %s: %w", u.Server, k, err)
		}
		cmd.Env = append(cmd.Env, k+"="+ev)
	}
	return &mcp.CommandTransport{Command: cmd}, nil
}

func expand(s string) (string, error) {
	var missing []string
	out := os.Expand(s, func(name string) string {
		v, ok := os.LookupEnv(name)
		if !ok {
			missing = append(missing, name)
		}
		return v
	})
	if len(missing) > 0 {
		return "", fmt.Errorf("environment variable %s is not set", strings.Join(missing, ", "))
	}
	return out, nil
}

// headerTransport adds fixed headers (credentials) to every request.
type headerTransport struct {
	base http.RoundTripper
	hdr  http.Header
}

func (t headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range t.hdr {
		r.Header[k] = v
	}
	return t.base.RoundTrip(r)
}
