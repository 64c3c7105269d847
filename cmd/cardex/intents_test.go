package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/seed0cff8200/cardex/cards"
)

// runFull runs the binary and returns its stdout, stderr and exit code.
func runFull(t *testing.T, bin, addr string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "CARDEX_ADDR="+addr)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	return stdout.String(), stderr.String(), code
}

// discoverRead is the part of `cardex discover -o json` these tests read.
type discoverRead struct {
	Tools []struct {
		Card       struct{ Server, Name string }
		Confidence float64 `json:"confidence"`
		Intents    []int   `json:"intents"`
		ForQuery   bool    `json:"for_query"`
		Pinned     bool    `json:"pinned"`
	}
	Abstained        bool    `json:"abstained"`
	AbstainedIntents []int   `json:"abstained_intents"`
	MinConfidence    float64 `json:"min_confidence"`
	CandidateCount   int     `json:"candidate_count"`
}

// forColumn is what the table's FOR column says for a tool of the JSON
// answer: q for the query, 1-based intents, comma-separated.
func forColumn(forQuery bool, intents []int) string {
	var parts []string
	if forQuery {
		parts = append(parts, "q")
	}
	for _, i := range intents {
		parts = append(parts, strconv.Itoa(i+1))
	}
	return strings.Join(parts, ",")
}

// tableRows splits a table's lines (header first, up to the first blank
// line) into whitespace-separated fields.
func tableRows(out string) [][]string {
	var rows [][]string
	for _, line := range strings.Split(out, "\n") {
		if strings.TrimSpace(line) == "" {
			break
		}
		rows = append(rows, strings.Fields(line))
	}
	return rows
}

func TestDiscoverAndToolsSearchIntents(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "tokens.yaml")
	if err := os.WriteFile(tokenFile, []byte(`tokens:
  - {token: support-agent-token-0123456789, tenant: acme, subject: support-agent, scopes: [support:read, support:write, orders:read, billing:read]}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("CARDEX_AGENT_TOKENS", tokenFile)
	t.Setenv("CARDEX_AGENT_TOKEN", "support-agent-token-0123456789")
	bin := buildBinary(t)
	addr, _ := startServer(t, bin, filepath.Join(dir, "data"))
	if out, _, code := runFull(t, bin, addr, "cards", "apply", "-f", "../../examples/"); code != 0 {
		t.Fatalf("apply: exit %d\n%s", code, out)
	}
	support := []string{"--tenant", "acme", "--scopes", "support:read,support:write,orders:read,billing:read"}
	// What the support caller may see, decided here from the cards' files.
	all, _, err := cards.LoadPath("../../examples/catalog")
	if err != nil {
		t.Fatal(err)
	}
	var visible []string
	for _, c := range all {
		if !slices.ContainsFunc(c.RequiredScopes, func(s string) bool { return !slices.Contains(strings.Split(support[3], ","), s) }) {
			visible = append(visible, c.Server+"/"+c.Name)
		}
	}
	if len(visible) != 18 {
		t.Fatalf("example catalogue changed: %d cards visible to support, want 18", len(visible))
	}
	intents := []string{"where is my package", "show the invoice with its line items"}
	intentArgs := []string{"--intent", intents[0], "--intent", intents[1]}
	discover := func(args ...string) (string, string, int) {
		t.Helper()
		return runFull(t, bin, addr, slices.Concat([]string{"discover"}, args, support)...)
	}
	discoverJ := func(args ...string) discoverRead {
		t.Helper()
		out, stderr, code := discover(append(args, "-o", "json")...)
		if code != 0 {
			t.Fatalf("discover %v -o json: exit %d\n%s", args, code, stderr)
		}
		var d discoverRead
		if err := json.Unmarshal([]byte(out), &d); err != nil {
			t.Fatalf("discover %v -o json: %v\n%s", args, err, out)
		}
		return d
	}

	t.Run("discover --intent table", func(t *testing.T) {
		for _, args := range [][]string{
			slices.Concat(intentArgs, []string{"--top-k", "6"}),
			slices.Concat([]string{"a customer's parcel is late and they want their invoice"}, intentArgs, []string{"--top-k", "6"}),
		} {
			out, stderr, code := discover(args...)
			if code != 0 {
				t.Fatalf("discover %v: exit %d\n%s", args, code, stderr)
			}
			rows := tableRows(out)
			if len(rows) < 2 || !slices.Equal(rows[0][:6], []string{"#", "TOOL", "FOR", "FUSED", "CONF", "TOKENS"}) {
				t.Fatalf("discover %v: header %v, want # TOOL FOR FUSED CONF TOKENS ...\n%s", args, rows, out)
			}
			want := discoverJ(args...)
			if len(rows)-1 != len(want.Tools) || len(want.Tools) != 6 {
				t.Fatalf("%d rows, -o json has %d tools (want 6)\n%s", len(rows)-1, len(want.Tools), out)
			}
			for i, r := range rows[1:] {
				w := want.Tools[i]
				if r[0] != strconv.Itoa(i+1) || r[1] != w.Card.Server+"/"+w.Card.Name || r[2] != forColumn(w.ForQuery, w.Intents) || r[4] != fmt.Sprintf("%.2f", w.Confidence) {
					t.Errorf("row %v, want #%d %s/%s FOR %s CONF %.2f", r, i+1, w.Card.Server, w.Card.Name, forColumn(w.ForQuery, w.Intents), w.Confidence)
				}
				if r[2] == "" || strings.Trim(r[2], "q,12") != "" {
					t.Errorf("row %d FOR %q: want q, 1 or 2", i+1, r[2])
				}
			}
			for i, in := range intents {
				if legend := fmt.Sprintf("intent %d: %s\n", i+1, in); !strings.Contains(out, legend) {
					t.Errorf("no legend line %q in\n%s", legend, out)
				}
			}
			if !strings.Contains(out, "of 18 authorized tools") {
				t.Errorf("no accounting line over the 18 authorized tools:\n%s", out)
			}
			if args[0] != "--intent" && !slices.ContainsFunc(rows[1:], func(r []string) bool { return strings.HasPrefix(r[2], "q") }) {
				t.Errorf("query and intents: no row for the query\n%s", out)
			}
			for _, r := range rows[1:] {
				if !slices.Contains(visible, r[1]) {
					t.Errorf("row %v: a tool the support caller may not see", r)
				}
			}
		}
		// A query alone keeps the old table: no FOR column, no legend.
		out, _, code := discover("where is my package")
		if rows := tableRows(out); code != 0 || len(rows) < 2 || !slices.Equal(rows[0][:5], []string{"#", "TOOL", "FUSED", "CONF", "TOKENS"}) || strings.Contains(out, "intent 1:") {
			t.Errorf("discover QUERY: exit %d\n%s", code, out)
		}
	})

	t.Run("discover abstains", func(t *testing.T) {
		out, _, code := discover(slices.Concat(intentArgs, []string{"--min-confidence", "1"})...)
		if code != 0 || !strings.Contains(out, "no tool matches well enough (min confidence 1.00)") || strings.Contains(out, "TOOL") {
			t.Errorf("--min-confidence 1: exit %d\n%s", code, out)
		}
		// Nothing ranked at all, without a minimum: no advice to lower it.
		out, _, code = discover("--intent", "!!!", "--min-confidence", "0")
		if code != 0 || !strings.Contains(out, "no tool matches: rephrase the request") || strings.Contains(out, "--min-confidence") {
			t.Errorf("an intent that ranks nothing: exit %d\n%s", code, out)
		}
		// Only one intent under the minimum: the answer names it.
		const nonsense = "zebra xylophone quasar"
		strong := discoverJ("--intent", intents[0], "--top-k", "1", "--min-confidence", "0").Tools[0].Confidence
		weak := discoverJ("--intent", nonsense, "--top-k", "1", "--min-confidence", "0").Tools[0].Confidence
		if !(weak < strong) {
			t.Fatalf("precondition: nonsense confidence %v not under %v", weak, strong)
		}
		th := strconv.FormatFloat((weak+strong)/2, 'f', -1, 64)
		args := []string{"--intent", intents[0], "--intent", nonsense, "--min-confidence", th}
		d := discoverJ(args...)
		if d.Abstained || !slices.Equal(d.AbstainedIntents, []int{1}) || len(d.Tools) == 0 {
			t.Fatalf("-o json: abstained %v intents %v, %d tools; want intent 2 (index 1) only", d.Abstained, d.AbstainedIntents, len(d.Tools))
		}
		out, _, code = discover(args...)
		if code != 0 || !strings.Contains(out, "no tool matches intent 2 well enough") || strings.Contains(out, "intent 1 well enough") {
			t.Errorf("one intent under the minimum: exit %d\n%s", code, out)
		}
		for _, r := range tableRows(out)[1:] {
			if r[2] != "1" {
				t.Errorf("row %v answers %s; only intent 1 cleared the minimum", r, r[2])
			}
		}
	})

	t.Run("discover refusals", func(t *testing.T) {
		for _, tc := range []struct {
			args []string
			code int
			want []string
		}{
			{nil, 2, []string{`give a query ("QUERY") or at least one --intent`}},
			{[]string{"--top-k", "3"}, 2, []string{`give a query ("QUERY") or at least one --intent`}},
			{slices.Repeat([]string{"--intent", "x"}, 9), 1, []string{"intents", "limit is 8"}},
			{[]string{"--intent", "x", "--intent", " "}, 1, []string{"intents[1]", "required"}},
			{[]string{"--intent", "x", "--min-confidence", "2"}, 1, []string{"min_confidence", "between 0 and 1"}},
		} {
			out, stderr, code := discover(tc.args...)
			if code != tc.code {
				t.Errorf("discover %v: exit %d, want %d\n%s%s", tc.args, code, tc.code, out, stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("discover %v: stderr %q does not say %q", tc.args, stderr, w)
				}
			}
		}
	})

	t.Run("tools search --intent", func(t *testing.T) {
		args := []string{"tools", "search", "--intent", intents[0], "--intent", intents[1], "--limit", "4"}
		out, stderr, code := runFull(t, bin, addr, args...)
		if code != 0 {
			t.Fatalf("%v: exit %d\n%s", args, code, stderr)
		}
		rows := tableRows(out)
		if len(rows) != 5 || !slices.Equal(rows[0][:5], []string{"SERVER", "NAME", "FOR", "CONF", "SUMMARY"}) {
			t.Fatalf("%v: want a header SERVER NAME FOR CONF SUMMARY and 4 rows:\n%s", args, out)
		}
		jout, _, code := runFull(t, bin, addr, append(args, "-o", "json")...)
		// -o json carries each tool's match with it.
		var res struct {
			Tools []struct {
				Server, Name string
				Confidence   float64
				Intents      []int
			}
		}
		if err := json.Unmarshal([]byte(jout), &res); err != nil || code != 0 || len(res.Tools) != 4 {
			t.Fatalf("%v -o json: exit %d %v\n%s", args, code, err, jout)
		}
		seen := map[string]bool{}
		for i, r := range rows[1:] {
			m := res.Tools[i]
			if r[0] != res.Tools[i].Server || r[1] != res.Tools[i].Name || r[2] != forColumn(false, m.Intents) || r[3] != fmt.Sprintf("%.2f", m.Confidence) {
				t.Errorf("row %v, want %s %s FOR %s CONF %.2f", r, res.Tools[i].Server, res.Tools[i].Name, forColumn(false, m.Intents), m.Confidence)
			}
			for _, s := range strings.Split(r[2], ",") {
				seen[s] = true
			}
			if !slices.Contains(visible, r[0]+"/"+r[1]) {
				t.Errorf("row %v: a tool the agent may not use", r)
			}
		}
		if !seen["1"] || !seen["2"] {
			t.Errorf("rows answer steps %v; want both", seen)
		}
		// Without --intent the table has no FOR column.
		out, _, code = runFull(t, bin, addr, "tools", "search", intents[1], "--limit", "3")
		if rows := tableRows(out); code != 0 || len(rows) < 2 || len(rows) > 4 || !slices.Equal(rows[0], []string{"SERVER", "NAME", "SUMMARY"}) {
			t.Errorf("tools search QUERY: exit %d\n%s", code, out)
		}
		// The agent's limits are the gateway's: 200 characters an intent.
		_, stderr, code = runFull(t, bin, addr, "tools", "search", "--intent", "x", "--intent", strings.Repeat("y", 201))
		if code == 0 || !strings.Contains(stderr, "intents[1]") || !strings.Contains(stderr, "limit is 200") {
			t.Errorf("over-long intent: exit %d, stderr %q", code, stderr)
		}
	})

	// The query operators on both commands: a selection is exactly the
	// named tools the caller may use (cancel_order needs orders:write),
	// +word keeps the tools that hold the word.
	sel := "select:orders/get_order,orders/cancel_order,nope/none,billing/get_invoice"
	if !slices.Contains(visible, "orders/get_order") || !slices.Contains(visible, "billing/get_invoice") || slices.Contains(visible, "orders/cancel_order") {
		t.Fatal("example catalogue changed: pick other tools for the operators")
	}
	holds := map[string]bool{} // the tools that mention billing anywhere
	for _, c := range all {
		text := strings.ToLower(strings.Join(append([]string{c.Server, c.Name, c.Summary, c.Description}, append(c.Aliases, c.Tags...)...), " "))
		holds[c.Server+"/"+c.Name] = strings.Contains(text, "billing")
	}
	t.Run("discover operators", func(t *testing.T) {
		d := discoverJ(sel, "--top-k", "1")
		var got []string
		for _, x := range d.Tools {
			got = append(got, x.Card.Server+"/"+x.Card.Name)
		}
		if !slices.Equal(got, []string{"orders/get_order", "billing/get_invoice"}) {
			t.Errorf("discover %s: %v", sel, got)
		}
		out, _, code := discover(sel)
		if rows := tableRows(out); code != 0 || len(rows) != 3 || !strings.Contains(out, "selected (select:)") {
			t.Errorf("discover %s (table): exit %d\n%s", sel, code, out)
		}
		d = discoverJ("+billing money back", "--top-k", "50")
		if len(d.Tools) == 0 {
			t.Fatal("+billing: nothing")
		}
		for _, x := range d.Tools {
			if n := x.Card.Server + "/" + x.Card.Name; !holds[n] || !slices.Contains(visible, n) {
				t.Errorf("+billing reached %s", n)
			}
		}
		d = discoverJ("--intent", "select:billing/get_invoice", "--intent", "+orders where is my package", "--top-k", "2")
		if len(d.Tools) < 2 || d.Tools[0].Card.Name != "get_invoice" || !slices.Equal(d.Tools[0].Intents, []int{0}) {
			t.Errorf("operators in intents: %+v", d.Tools)
		}
		_, stderr, code := discover("select:")
		if code != 1 || !strings.Contains(stderr, "query") || !strings.Contains(stderr, "select:") {
			t.Errorf("select: alone: exit %d, %q", code, stderr)
		}
	})

	t.Run("tools search operators", func(t *testing.T) {
		search := func(args ...string) []string {
			t.Helper()
			out, stderr, code := runFull(t, bin, addr, append([]string{"tools", "search", "-o", "json"}, args...)...)
			var res struct {
				Tools []struct{ Server, Name string }
			}
			if err := json.Unmarshal([]byte(out), &res); err != nil || code != 0 {
				t.Fatalf("tools search %v: exit %d %v\n%s%s", args, code, err, out, stderr)
			}
			var got []string
			for _, x := range res.Tools {
				got = append(got, x.Server+"/"+x.Name)
			}
			return got
		}
		if got := search(sel); !slices.Equal(got, []string{"orders/get_order", "billing/get_invoice"}) {
			t.Errorf("tools search %s: %v", sel, got)
		}
		got := search("+billing")
		if len(got) == 0 {
			t.Fatal("+billing: nothing")
		}
		for _, n := range got {
			if !holds[n] || !slices.Contains(visible, n) {
				t.Errorf("+billing reached %s", n)
			}
		}
		got = search("--intent", "select:orders/get_order", "--intent", "+billing invoice")
		if len(got) < 2 || got[0] != "orders/get_order" || slices.ContainsFunc(got[1:], func(n string) bool { return !holds[n] }) {
			t.Errorf("operators in intents: %v", got)
		}
	})
}
