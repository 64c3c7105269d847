package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/seed0cff8200/cardex/internal/execution/upstream"
)

// TestUpstreamSnippet: the entry `import mcp` suggests is a valid upstreams
// file entry and never prints a literal secret.
func TestUpstreamSnippet(t *testing.T) {
	for _, u := range []upstream.Upstream{
		{Server: "github", URL: "https://mcp.example.com/mcp", Headers: map[string]string{"Authorization": "Bearer ghp_literal", "X-Team": "${TEAM}"}},
		{Server: "files", Command: []string{"npx", "-y", "@modelcontextprotocol/server-filesystem", "/srv/my files"}, Env: map[string]string{"API_KEY": "k3y"}},
		{Server: "petstore", Kind: upstream.REST, BaseURL: "https://petstore.example.com/v3", Headers: map[string]string{"api_key": "${PETSTORE_API_KEY}", "Authorization": "Bearer ${PETSTORE_TOKEN}"}},
	} {
		s := upstreamSnippet(u)
		t.Log("\n" + s)
		if strings.Contains(s, "ghp_literal") || strings.Contains(s, "k3y") {
			t.Fatalf("a secret was printed:\n%s", s)
		}
		p := filepath.Join(t.TempDir(), "u.yaml")
		if err := os.WriteFile(p, []byte("upstreams:\n"+s), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg, err := upstream.LoadConfig(p)
		if err != nil {
			t.Fatalf("%v\n%s", err, s)
		}
		got := cfg.Upstreams[0]
		if got.Server != u.Server || got.URL != u.URL || got.Kind != u.Kind || got.BaseURL != u.BaseURL || strings.Join(got.Command, " ") != strings.Join(u.Command, " ") || len(got.Headers)+len(got.Env) != len(u.Headers)+len(u.Env) {
			t.Fatalf("round trip: %+v\n%s", got, s)
		}
		for _, v := range got.Headers {
			if !strings.Contains(v, "${") || strings.Contains(v, "#") {
				t.Fatalf("header value %q", v)
			}
		}
		if u.Server == "github" && got.Headers["X-Team"] != "${TEAM}" {
			t.Fatalf("a ${VAR} reference was not kept: %v", got.Headers)
		}
	}
}
