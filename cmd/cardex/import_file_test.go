package main

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// sharedEval is a dataset of the shared evaluation data: CI puts shared/
// beside the clone (../shared/eval from the repository root);
// CARDEX_TEST_SHARED_EVAL names another place (a worktree elsewhere).
func sharedEval(t *testing.T, name string) string {
	t.Helper()
	root := os.Getenv("CARDEX_TEST_SHARED_EVAL")
	if root == "" {
		root = filepath.Join("..", "..", "..", "shared", "eval")
	}
	dir := filepath.Join(root, name)
	if _, err := os.Stat(filepath.Join(dir, "tools.jsonl")); err != nil {
		if os.Getenv("CI") == "true" || !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("dataset %s: %v (CI needs shared/ beside the clone)", name, err)
		}
		t.Skipf("dataset %s not here (%v); CI fails instead of skipping", name, err)
	}
	return dir
}

// importReport is the part of `import mcp --from-file -o json` these tests
// read.
type importReport struct {
	Servers []struct {
		Server string         `json:"server"`
		Counts map[string]int `json:"counts"`
		Entry  string         `json:"entry"`
	} `json:"servers"`
	Counts        map[string]int `json:"counts"`
	ServerEntries map[string]int `json:"server_entries"`
	DryRun        bool           `json:"dry_run"`
}

// TestImportLiveMCPBench: the LiveMCPBench catalogue (tools.jsonl with
// servers.jsonl) loads in one command against a server with default
// limits: 527 cards and 70 server entries, progress on stderr; a rerun
// reports all unchanged; the scopes given close the cards to other callers.
func TestImportLiveMCPBench(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	dir := sharedEval(t, "livemcpbench")
	bin := buildBinary(t)
	addr, _ := startServer(t, bin, t.TempDir())
	load := func(extra ...string) (importReport, string) {
		t.Helper()
		args := append([]string{"import", "mcp", "--from-file", filepath.Join(dir, "tools.jsonl"), "--servers", filepath.Join(dir, "servers.jsonl"),
			"--tenant", "livemcpbench", "--scopes", "demo:use", "-o", "json"}, extra...)
		out, stderr, code := runErr(t, bin, addr, args...)
		if code != 0 {
			t.Fatalf("%v: exit %d\n%s", args, code, stderr)
		}
		var r importReport
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
		return r, stderr
	}

	dry, _ := load("--dry-run")
	if !dry.DryRun || dry.Counts["created"] != 527 {
		t.Fatalf("dry run: %+v", dry.Counts)
	}
	first, stderr := load()
	if first.Counts["created"] != 527 || first.Counts["skipped"] != 0 || first.ServerEntries["created"] != 70 || len(first.Servers) != 70 {
		t.Fatalf("first load: cards %v, entries %v, %d servers", first.Counts, first.ServerEntries, len(first.Servers))
	}
	for _, want := range []string{"read 527 tools of 70 servers from", "read 70 server entries from", "wrote 527 of 527 cards", "wrote 70 of 70 server entries"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("progress on stderr lacks %q:\n%s", want, stderr)
		}
	}
	again, stderr := load()
	if again.Counts["unchanged"] != 527 || again.Counts["created"]+again.Counts["updated"]+again.Counts["revoked"] != 0 ||
		again.ServerEntries["unchanged"] != 70 || strings.Contains(stderr, "wrote") {
		t.Errorf("rerun: cards %v, entries %v\n%s", again.Counts, again.ServerEntries, stderr)
	}
	// The table says the same.
	out, _, code := runErr(t, bin, addr, "import", "mcp", "--from-file", filepath.Join(dir, "tools.jsonl"), "--servers", filepath.Join(dir, "servers.jsonl"),
		"--tenant", "livemcpbench", "--scopes", "demo:use")
	if code != 0 || !strings.Contains(out, "70 servers, 527 cards: 0 created, 0 updated, 0 revoked, 527 unchanged") ||
		!strings.Contains(out, "70 server entries: 0 created, 0 updated, 70 unchanged") {
		t.Errorf("rerun table: exit %d\n%s", code, out)
	}

	// Stored: 70 entries; 527 cards for a caller with the scope, none for one
	// without.
	out, _, _ = runErr(t, bin, addr, "servers", "list", "--tenant", "livemcpbench", "-o", "json")
	var entries struct {
		Servers []json.RawMessage `json:"servers"`
	}
	if err := json.Unmarshal([]byte(out), &entries); err != nil || len(entries.Servers) != 70 {
		t.Errorf("servers list: %d entries (%v)", len(entries.Servers), err)
	}
	for scopes, want := range map[string]int{"demo:use": 527, "other:use": 0} {
		out, stderr, code := runErr(t, bin, addr, "discover", "search arXiv for papers", "--tenant", "livemcpbench", "--scopes", scopes, "-o", "json")
		var d discoverRead
		if code != 0 || json.Unmarshal([]byte(out), &d) != nil || d.CandidateCount != want {
			t.Errorf("scopes %s: exit %d, %d candidates, want %d\n%s", scopes, code, d.CandidateCount, want, stderr)
		}
	}
}

// TestImportSavedToolsList: a saved tools/list result goes to --server; a
// file whose tools name no server needs it.
func TestImportSavedToolsList(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildBinary(t)
	addr, _ := startServer(t, bin, t.TempDir())
	dir := t.TempDir()
	saved := filepath.Join(dir, "files.json")
	if err := os.WriteFile(saved, []byte(`{"jsonrpc":"2.0","id":2,"result":{"tools":[
 {"name":"read_file","title":"Read file","description":"Read a text file. Returns its content.","inputSchema":{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]},"annotations":{"readOnlyHint":true}},
 {"name":"write_file","description":"Write a text file.","inputSchema":{"type":"object","properties":{"path":{"type":"string"},"content":{"type":"string"}}}}]}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	_, stderr, code := runErr(t, bin, addr, "import", "mcp", "--from-file", saved, "--tenant", "acme")
	if code != 2 || !strings.Contains(stderr, "2 tools name no server: give --server NAME") {
		t.Errorf("without --server: exit %d, %q", code, stderr)
	}
	_, stderr, code = runErr(t, bin, addr, "import", "mcp", "http://example.com/mcp", "--from-file", saved, "--tenant", "acme", "--server", "files")
	if code != 2 || !strings.Contains(stderr, "--from-file reads the tools from the file") {
		t.Errorf("with a URL too: exit %d, %q", code, stderr)
	}
	out, stderr, code := runErr(t, bin, addr, "import", "mcp", "--from-file", saved, "--tenant", "acme", "--server", "files", "--scopes", "files:read")
	if code != 0 || !strings.Contains(out, "1 servers, 2 cards: 2 created") {
		t.Fatalf("import: exit %d\n%s%s", code, out, stderr)
	}
	out, _, code = runErr(t, bin, addr, "cards", "get", "files/read_file", "--tenant", "acme", "-o", "json")
	if code != 0 || !strings.Contains(out, `"read_only": true`) || !strings.Contains(out, `"files:read"`) || !strings.Contains(out, `"Read file"`) {
		t.Errorf("the card: exit %d\n%s", code, out)
	}
}

// TestImportFromFileIsClosedUntilScoped runs the README's catalogue command
// as printed (no --scopes) and checks that it leaves nothing a caller can
// find, describe or authorize unless it holds the new scopes: every card
// requires its server's default scope (SERVER:read, SERVER:write or
// SERVER:admin by its annotations), the import says so, a caller holding
// other scopes has no candidate and its AuthorizeCall is "unknown tool",
// SERVER:* opens that server's cards and no other's, and * all 527.
func TestImportFromFileIsClosedUntilScoped(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	dir := sharedEval(t, "livemcpbench")
	bin := buildBinary(t)
	addr, _ := startServer(t, bin, t.TempDir())
	readme := []string{"import", "mcp", "--from-file", filepath.Join(dir, "tools.jsonl"), "--servers", filepath.Join(dir, "servers.jsonl"), "--tenant", "demo"}
	out, stderr, code := runErr(t, bin, addr, append(readme, "-o", "json")...)
	var r struct {
		importReport
		Scoping struct {
			Defaulted map[string]int `json:"defaulted"`
			Open      []string       `json:"open"`
		} `json:"scoping"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &r) != nil {
		t.Fatalf("import: exit %d\n%s\n%s", code, out, stderr)
	}
	defaulted := 0
	for scope, n := range r.Scoping.Defaulted {
		if server, _, ok := strings.Cut(scope, ":"); !ok || !strings.HasSuffix(scope, ":read") && !strings.HasSuffix(scope, ":write") && !strings.HasSuffix(scope, ":admin") || server == "" {
			t.Errorf("default scope %q is not SERVER:read|write|admin", scope)
		}
		defaulted += n
	}
	if r.Counts["created"] != 527 || defaulted != 527 || len(r.Scoping.Open) != 0 || !strings.Contains(stderr, "No caller can use them until it holds the scope") {
		t.Fatalf("import: %v created, %d defaulted, open %v\n%s", r.Counts, defaulted, r.Scoping.Open, stderr)
	}
	perServer := map[string]int{}
	for _, s := range r.Servers {
		perServer[s.Server] = s.Counts["created"]
	}

	candidates := func(scopes string) int {
		t.Helper()
		out, stderr, code := runErr(t, bin, addr, "discover", "open a spreadsheet and read a sheet", "--tenant", "demo", "--scopes", scopes, "-o", "json")
		var d discoverRead
		if code != 0 || json.Unmarshal([]byte(out), &d) != nil {
			t.Fatalf("discover as %s: exit %d\n%s", scopes, code, stderr)
		}
		return d.CandidateCount
	}
	for _, scopes := range []string{"files:read", "demo:use", "other:*", "excel"} {
		if n := candidates(scopes); n != 0 {
			t.Errorf("a caller holding %s has %d candidates; want none", scopes, n)
		}
	}
	for _, server := range []string{"excel", "filesystem", "playwright"} {
		if n := candidates(server + ":*"); n != perServer[server] || n == 0 {
			t.Errorf("%s:* opens %d cards; the server has %d", server, n, perServer[server])
		}
	}
	if n := candidates("*"); n != 527 {
		t.Errorf("* has %d candidates; want 527", n)
	}
	authorize := func(scopes string) string {
		out, _, _ := runErr(t, bin, addr, "authorize", "excel_read_sheet", "--server", "excel", "--args", "{}", "--tenant", "demo", "--scopes", scopes, "-o", "json")
		var a struct{ Decision string }
		if err := json.Unmarshal([]byte(out), &a); err != nil {
			t.Fatalf("authorize as %s: %v\n%s", scopes, err, out)
		}
		return a.Decision
	}
	if d := authorize("files:read"); d != "DECISION_DENY_UNKNOWN_TOOL" {
		t.Errorf("files:read authorizing excel/excel_read_sheet: %s; want DECISION_DENY_UNKNOWN_TOOL", d)
	}
	// With the scope the tool is known (and its arguments checked).
	if d := authorize("excel:*"); d != "DECISION_DENY_INVALID_ARGUMENTS" {
		t.Errorf("excel:* authorizing excel/excel_read_sheet with {}: %s; want DECISION_DENY_INVALID_ARGUMENTS", d)
	}
}
