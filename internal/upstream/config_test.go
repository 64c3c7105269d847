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
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.u.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
	dup := Config{Upstreams: []Upstream{{Server: "s", URL: "http://x"}, {Server: "s", URL: "http://y"}}}
	if err := dup.Validate(); err == nil || !strings.Contains(err.Error(), "twice") {
		t.Fatalf("duplicate: %v", err)
	}
}
