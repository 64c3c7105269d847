package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// runErr is run with stderr.
func runErr(t *testing.T, bin, addr string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "CARDEX_ADDR="+addr, "CARDEX_TENANT=", "CARDEX_SCOPES=")
	var o, e strings.Builder
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return o.String(), e.String(), code
}

// TestClientErrors: what a new user sees when the server is not running, a
// flag is missing or a command is mistyped.
func TestClientErrors(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildBinary(t)
	dead := freePort(t)
	for _, tc := range []struct {
		args []string
		addr string
		code int
		want string
	}{
		{[]string{"discover", "x", "--tenant", "acme"}, dead, 1,
			"cardex: cannot reach a cardex server at " + dead + " (connection refused): start one with `cardex serve`, or point --addr (env CARDEX_ADDR) at a running one"},
		{[]string{"cards", "list", "--tenant", "acme"}, "no-such-host.invalid:50051", 1, "(no such host): start one with `cardex serve`"},
		{[]string{"tools", "search", "x"}, dead, 1, "cannot reach a cardex server at " + dead},
		{[]string{"discover", "x"}, dead, 2, "cardex: --tenant is required (or set CARDEX_TENANT)"},
		{[]string{"cards", "get", "a/b"}, dead, 2, "--tenant is required (or set CARDEX_TENANT)"},
		{[]string{"import", "openapi", "spec.yaml", "--server", "s"}, dead, 2, "--tenant is required (or set CARDEX_TENANT)"},
		{[]string{"import", "openapi", "spec.yaml", "--server", "cardex__x", "--tenant", "acme"}, dead, 2, `--server: "cardex__x" is reserved`},
		{[]string{"discover", "x", "--tenant", "acme", "-o", "yaml"}, dead, 2, `--output "yaml": use table or json`},
		{[]string{"describe"}, dead, 2, "accepts 1 arg(s), received 0 (see 'cardex describe --help')"},
		{[]string{"discover", "--tenant", "acme"}, dead, 2, "give a query (\"QUERY\") or at least one --intent"},
		{[]string{"discover", "x", "--no-such-flag"}, dead, 2, "unknown flag: --no-such-flag"},
		{[]string{"cards", "nope"}, dead, 2, `unknown command "nope" for "cardex cards"`},
		{[]string{"nope"}, dead, 2, `unknown command "nope" for "cardex"`},
		{[]string{"tools", "call", "x", "--args", "{}", "--json-file", "a"}, dead, 2, "give --args or --json-file, not both"},
	} {
		_, stderr, code := runErr(t, bin, tc.addr, tc.args...)
		if code != tc.code || !strings.Contains(stderr, tc.want) || strings.Contains(stderr, "rpc error") {
			t.Errorf("%v: exit %d, stderr %q; want exit %d and %q", tc.args, code, stderr, tc.code, tc.want)
		}
	}
}

// TestApplyAllOrNothing: an apply larger than one batch checks every card
// before the first write, and a batch that still fails (a conflict) leaves
// the table of what was written and names the card by file and position.
func TestApplyAllOrNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildBinary(t)
	addr, _ := startServer(t, bin, t.TempDir())
	dir := t.TempDir()
	var b strings.Builder
	for i := range applyBatch {
		fmt.Fprintf(&b, "- {tenant: acme, server: bulk, name: tool_%04d, summary: Bulk tool number %d.}\n", i, i)
	}
	if err := os.WriteFile(filepath.Join(dir, "a.yaml"), []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	late := filepath.Join(dir, "b.yaml")
	if err := os.WriteFile(late, []byte("- {tenant: acme, server: bulk, name: late_ok, summary: Fine.}\n- {tenant: acme, server: bulk, name: late_bad}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code := runErr(t, bin, addr, "cards", "apply", "-f", dir)
	if code != 1 || !strings.Contains(stderr, "nothing written: 1 of 1002 cards are invalid") ||
		!strings.Contains(stderr, late+"#2 (bulk/late_bad): summary: is required") || stdout != "" {
		t.Fatalf("a bad card in the second batch: exit %d\nstdout %s\nstderr %s", code, stdout, stderr)
	}
	if out, _, _ := runErr(t, bin, addr, "cards", "list", "--tenant", "acme", "-o", "json"); !strings.Contains(out, `"cards": []`) {
		t.Fatalf("something was written:\n%s", out)
	}
	// A duplicate across files is found before writing too.
	if err := os.WriteFile(late, []byte("- {tenant: acme, server: bulk, name: tool_0007, summary: Again.}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, stderr, code = runErr(t, bin, addr, "cards", "apply", "-f", dir); code != 1 || !strings.Contains(stderr, "duplicates "+filepath.Join(dir, "a.yaml")+"#8") {
		t.Fatalf("a duplicate across batches: exit %d\n%s", code, stderr)
	}
	// A version conflict can only be seen by the server: the first batch
	// is written, the table says so, and the error names the card.
	if err := os.WriteFile(late, []byte("- {tenant: acme, server: bulk, name: late_ok, summary: Fine.}\n- {tenant: acme, server: bulk, name: late_conflict, summary: Stale., version: 5}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code = runErr(t, bin, addr, "cards", "apply", "-f", dir)
	if code != 1 || !strings.Contains(stdout, "1000 created, 0 updated, 0 unchanged (by the batches before the failure; cards 1001–1002 of 1002 were not written)") ||
		!strings.Contains(stderr, "cards 1001–1002 of 1002 were not written") || !strings.Contains(stderr, "version conflict: "+late+"#2 bulk/late_conflict (acme/bulk/late_conflict): expected version 5, but the card does not exist") {
		t.Fatalf("a conflict in the second batch: exit %d\nstdout %.300s … %s\nstderr %s", code, stdout, stdout[max(0, len(stdout)-300):], stderr)
	}
	stdout, _, code = runErr(t, bin, addr, "cards", "apply", "-f", dir, "-o", "json")
	var res struct {
		Results []struct {
			Version int64  `json:"version"`
			Outcome string `json:"outcome"`
		} `json:"results"`
		Counts map[string]int `json:"counts"`
		Error  string         `json:"error"`
	}
	if err := json.Unmarshal([]byte(stdout), &res); err != nil || code != 1 || res.Counts["unchanged"] != 1000 || res.Results[0].Version != 1 || !strings.Contains(res.Error, "b.yaml#2 bulk/late_conflict") {
		t.Fatalf("-o json: exit %d, %v %+v", code, err, res.Counts)
	}
}

// TestDiscoverTableSaysLowConfidence: the table says what -o json says.
func TestDiscoverTableSaysLowConfidence(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildBinary(t)
	addr, _ := startServer(t, bin, t.TempDir())
	if _, _, code := runErr(t, bin, addr, "cards", "apply", "-f", "../../examples/"); code != 0 {
		t.Fatal("apply")
	}
	out, _, code := runErr(t, bin, addr, "discover", "zxqv blorft wuggle", "--tenant", "acme", "--scopes", "*")
	if code != 0 || !strings.Contains(out, "low confidence: no tool matched the request well") {
		t.Fatalf("exit %d\n%s", code, out)
	}
	out, _, _ = runErr(t, bin, addr, "discover", "zxqv blorft wuggle", "--tenant", "acme", "--scopes", "*", "-o", "json")
	if !strings.Contains(out, `"low_confidence": true`) || !strings.Contains(out, `"degraded": false`) {
		t.Fatalf("-o json:\n%s", out)
	}
	// The intents' answer in the same snake_case shape.
	out, _, code = runErr(t, bin, addr, "discover", "--intent", "refund the customer", "--intent", "track the parcel", "--tenant", "acme", "--scopes", "*", "-o", "json")
	if code != 0 || !strings.Contains(out, `"intents": [`) || !strings.Contains(out, `"confidence": 0.`) || !strings.Contains(out, `"min_confidence":`) {
		t.Fatalf("discover --intent -o json: exit %d\n%s", code, out)
	}
}
