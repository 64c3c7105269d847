package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestMain lets the test binary act as a stdio MCP server:
// CARDEX_TEST_STDIO_SERVER=1 serves one tool, show_args, whose description
// quotes the words the server was started with.
func TestMain(m *testing.M) {
	if os.Getenv("CARDEX_TEST_STDIO_SERVER") == "1" {
		s := mcp.NewServer(&mcp.Implementation{Name: "args", Version: "1"}, nil)
		q := make([]string, 0, len(os.Args)-1)
		for _, a := range os.Args[1:] {
			q = append(q, fmt.Sprintf("[%s]", a))
		}
		s.AddTool(&mcp.Tool{Name: "show_args", Description: "Started with " + strings.Join(q, " ") + " as its words.",
			InputSchema: json.RawMessage(`{"type":"object"}`)},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return &mcp.CallToolResult{}, nil
			})
		if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
	code := m.Run()
	removeBinaries()
	os.Exit(code)
}

// TestImportCommandQuoting: `import mcp --command` splits its command line
// like a shell, so a program in a directory with a space and quoted
// arguments reach the server as the words they are.
func TestImportCommandQuoting(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "my tools")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	server := filepath.Join(dir, "args server")
	if err := os.Symlink(self, server); err != nil {
		t.Fatal(err)
	}
	bin := buildBinary(t)
	addr, _ := startServer(t, bin, t.TempDir())
	command := fmt.Sprintf(`'%s' --root "/srv/my files" --name='a b' plain\ word`, server)
	out, code := run(t, bin, addr, "import", "mcp", "--command", command, "--env", "CARDEX_TEST_STDIO_SERVER=1",
		"--server", "args", "--tenant", "acme", "--scopes", "args:read", "-o", "json")
	if code != 0 {
		t.Fatalf("import mcp --command: exit %d\n%s", code, out)
	}
	var plan struct {
		Changes []struct {
			Action string `json:"action"`
			Card   struct {
				Name        string `json:"name"`
				Description string `json:"description"`
				Summary     string `json:"summary"`
			} `json:"card"`
		} `json:"changes"`
	}
	if err := json.Unmarshal([]byte(out), &plan); err != nil || len(plan.Changes) != 1 {
		t.Fatalf("import -o json: %v\n%s", err, out)
	}
	want := "Started with [--root] [/srv/my files] [--name=a b] [plain word] as its words."
	if c := plan.Changes[0]; c.Action != "create" || c.Card.Name != "show_args" || c.Card.Summary != want {
		t.Fatalf("change %+v, want the summary %q", c, want)
	}
	if _, code := run(t, bin, addr, "import", "mcp", "--command", `'unterminated`, "--server", "args", "--tenant", "acme"); code != 2 {
		t.Fatalf("an unterminated quote: exit %d, want 2", code)
	}
}
