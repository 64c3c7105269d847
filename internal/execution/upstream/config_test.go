package upstream

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestLoadConfig(t *testing.T) {
	path := filepath.Join(t.TempDir(), "upstreams.yaml")
	body := `upstreams:
  - server: github
    url: https://mcp.example.com/mcp
    headers: {Authorization: "Bearer ${GITHUB_TOKEN}"}
    timeout: 10s
  - server: files
    tenant: acme
    command: [npx, -y, "@modelcontextprotocol/server-filesystem", /srv]
  - server: files
    command: [files-server]
`
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	if u, ok := c.Find("acme", "github"); !ok || u.CallTimeout() != 10*time.Second {
		t.Fatalf("github: %+v %v", u, ok)
	}
	if u, _ := c.Find("acme", "files"); u.Tenant != "acme" {
		t.Fatalf("the tenant's own entry must win: %+v", u)
	}
	if u, _ := c.Find("globex", "files"); u.Tenant != "" || u.Command[0] != "files-server" {
		t.Fatalf("other tenants get the shared entry: %+v", u)
	}
	if _, ok := c.Find("acme", "nope"); ok {
		t.Fatal("found an unregistered server")
	}
	if u, _ := c.Find("acme", "files"); u.CallTimeout() != DefaultTimeout {
		t.Fatal("default timeout")
	}

	// Secrets come from the environment when connecting; a missing one is an error.
	gh, _ := c.Find("acme", "github")
	t.Setenv("GITHUB_TOKEN", "")
	os.Unsetenv("GITHUB_TOKEN")
	if _, err := gh.Transport(); err == nil || !strings.Contains(err.Error(), "GITHUB_TOKEN is not set") {
		t.Fatalf("missing secret: %v", err)
	}
	t.Setenv("GITHUB_TOKEN", "t0ken")
	if _, err := gh.Transport(); err != nil {
		t.Fatal(err)
	}
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		u    Upstream
		want string
	}{
		{"no server", Upstream{URL: "http://x"}, "server is required"},
		{"neither", Upstream{Server: "s"}, "url or command is required"},
		{"both", Upstream{Server: "s", URL: "http://x", Command: []string{"y"}}, "not both"},
		{"bad url", Upstream{Server: "s", URL: "ftp://x"}, "http(s) URL"},
		{"env with url", Upstream{Server: "s", URL: "http://x", Env: map[string]string{"A": "b"}}, "env is for commands"},
		{"headers with command", Upstream{Server: "s", Command: []string{"y"}, Headers: map[string]string{"A": "b"}}, "headers are for urls"},
		{"negative timeout", Upstream{Server: "s", URL: "http://x", Timeout: -1}, "timeout"},
		{"unknown kind", Upstream{Server: "s", Kind: "grpc", URL: "http://x"}, `kind "grpc": want mcp (the default), rest or sql`},
		{"base_url on an mcp entry", Upstream{Server: "s", URL: "http://x", BaseURL: "http://y"}, "base_url and max_response_bytes are for kind: rest"},
		{"rest without base_url", Upstream{Server: "s", Kind: REST}, "kind rest needs base_url"},
		{"rest with url", Upstream{Server: "s", Kind: REST, URL: "http://x", BaseURL: "http://y"}, "url, command and env are for kind mcp"},
		{"rest with command", Upstream{Server: "s", Kind: REST, Command: []string{"x"}, BaseURL: "http://y"}, "url, command and env are for kind mcp"},
		{"rest base_url not http", Upstream{Server: "s", Kind: REST, BaseURL: "file:///etc"}, "base_url must be an http(s) URL"},
		{"rest base_url without host", Upstream{Server: "s", Kind: REST, BaseURL: "https:///v1"}, "base_url must be an http(s) URL"},
		{"rest base_url with a password", Upstream{Server: "s", Kind: REST, BaseURL: "https://u:p@api.example.com"}, "must not hold a user or password"},
		{"rest base_url with a query", Upstream{Server: "s", Kind: REST, BaseURL: "https://api.example.com/v1?api_key=x"}, "must not have a query or fragment"},
		{"rest response limit", Upstream{Server: "s", Kind: REST, BaseURL: "https://api.example.com", MaxResponseBytes: MaxMaxResponseBytes + 1}, "max_response_bytes is 8388609; it must be between 1 and 8388608"},
		{"rest bad header name", Upstream{Server: "s", Kind: REST, BaseURL: "https://api.example.com", Headers: map[string]string{"X Key": "v"}}, "not a valid HTTP header name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.u.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
	ok := Upstream{Server: "s", Kind: REST, BaseURL: "https://api.example.com/v1", Headers: map[string]string{"Authorization": "Bearer ${K}"}, MaxResponseBytes: 4096}
	if err := ok.Validate(); err != nil || ok.ResponseLimit() != 4096 || (Upstream{}).ResponseLimit() != DefaultMaxResponseBytes {
		t.Fatalf("a valid rest entry: %v", err)
	}
	if _, err := ok.Transport(); err == nil {
		t.Fatal("a rest entry made an MCP transport")
	}
	dup := Config{Upstreams: []Upstream{{Server: "s", URL: "http://x"}, {Server: "s", URL: "http://y"}}}
	if err := dup.Validate(); err == nil || !strings.Contains(err.Error(), "twice") {
		t.Fatalf("duplicate: %v", err)
	}
}
