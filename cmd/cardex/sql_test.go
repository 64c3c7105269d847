package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/seed0cff8200/cardex/internal/testkit/pgtest"
)

// TestSQLViews runs the README's "SQL views" section with the binary, on
// PGlite and on PostgreSQL 15: import the example database's views, lint
// them, find them, describe one, and query through `tools call --output`,
// with a partial result and every refusal.
func TestSQLViews(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildBinary(t)
	for _, db := range []struct {
		name string
		url  func(testing.TB) string
	}{{"pglite", pgtest.URL}, {"native", pgtest.NativeURL}} {
		t.Run(db.name, func(t *testing.T) {
			url := db.url(t)
			s := pgtest.Inventory(t, url)
			dir := t.TempDir()
			t.Setenv("INVENTORY_DATABASE_URL", url)
			upstreams := writeFileIn(t, dir, "upstreams.yaml", `upstreams:
  - server: inventory
    sql:
      database_url: "${INVENTORY_DATABASE_URL}"
      statement_timeout: 5s
      max_rows: 3
      reserved_params: {region: eu-west-1}
`)
			t.Setenv("CARDEX_UPSTREAMS", upstreams)
			t.Setenv("CARDEX_AGENT_TOKENS", writeFileIn(t, dir, "tokens.yaml", `tokens:
  - {token: oncall-token-0123456789, tenant: acme, subject: oncall-agent, scopes: ["inventory:read", "pii:read"]}
  - {token: reader-token-0123456789, tenant: acme, subject: reader-agent, scopes: ["inventory:read"]}
`))
			t.Setenv("CARDEX_HTTP_LISTEN", freePort(t))
			addr, _ := startServer(t, bin, filepath.Join(dir, "data"))

			imp := []string{"import", "sql", "--schema", s, "--server", "inventory", "--tenant", "acme", "--scopes", "inventory:read"}
			out, errOut, code := runFull(t, bin, addr, append(imp, "--database-url", url, "--dry-run")...)
			if code != 0 || !strings.Contains(out, "dry run, nothing written: would be 5 created") {
				t.Fatalf("dry run: exit %d\n%s\n%s", code, out, errOut)
			}
			// The import checks the role the gateway will query as: the test's is a superuser.
			if !strings.Contains(errOut, `warning: role postgres is a superuser`) || !strings.Contains(errOut, "CREATE ROLE <reader> LOGIN") {
				t.Errorf("import sql as a superuser says nothing of it:\n%s", errOut)
			}
			out, errOut, code = runFull(t, bin, addr, append(imp, "--database-url", url)...)
			if code != 0 || !strings.Contains(out, "5 created, 0 updated, 0 revoked, 0 unchanged") ||
				!strings.Contains(errOut, "database_url: \"${INVENTORY_DATABASE_URL}\"") {
				t.Fatalf("import: exit %d\n%s\n%s", code, out, errOut)
			}
			// From the upstreams entry: the query card learns the connection's reserved
			// parameters; then idempotent.
			out, _, code = runFull(t, bin, addr, append(imp, "--upstreams", upstreams, "-o", "json")...)
			var plan struct {
				Counts    map[string]int
				RoleCheck []struct{ Role, What, Fix string } `json:"role_check"`
				Changes   []struct {
					Action string
					Card   struct{ Name string }
					Fields []string
				}
			}
			if err := json.Unmarshal([]byte(out), &plan); code != 0 || err != nil || plan.Counts["unchanged"] != 4 ||
				plan.Changes[4].Card.Name != "query" || plan.Changes[4].Action != "update" || plan.Changes[4].Fields[0] != "description" ||
				len(plan.RoleCheck) != 1 || plan.RoleCheck[0].Role != "postgres" {
				t.Fatalf("re-import: exit %d %v\n%s", code, err, out)
			}
			out, _, code = runFull(t, bin, addr, append(imp, "--upstreams", upstreams, "-o", "json")...)
			if err := json.Unmarshal([]byte(out), &plan); code != 0 || err != nil || plan.Counts["unchanged"] != 5 {
				t.Fatalf("re-import: exit %d %v\n%s", code, err, out)
			}

			out, _, code = runFull(t, bin, addr, "cards", "lint", "--tenant", "acme", "--server", "inventory", "-o", "json")
			if code != 0 || !strings.Contains(out, `"no_comment"`) || !strings.Contains(out, "COMMENT ON VIEW "+s+".deployment_history IS") ||
				strings.Count(out, `"no_comment"`) != 1 {
				t.Fatalf("lint: exit %d\n%s", code, out)
			}

			out, _, code = runFull(t, bin, addr, "discover", "currently running releases and service owners", "--tenant", "acme",
				"--scopes", "inventory:read,pii:read", "--top-k", "3")
			if code != 0 || !strings.Contains(out, "inventory/"+s+".running_releases") || !strings.Contains(out, "inventory/"+s+".service_owners") {
				t.Fatalf("discover: exit %d\n%s", code, out)
			}
			t.Logf("discover:\n%s", out)

			t.Setenv("CARDEX_AGENT_TOKEN", "oncall-token-0123456789")
			out, _, code = runFull(t, bin, addr, "tools", "describe", "inventory/"+s+".service_owners", "-o", "json")
			if code != 0 || !strings.Contains(compactJSON(out), `"enum":["critical","standard","experimental"]`) || !strings.Contains(out, `"identifies":`) {
				t.Fatalf("describe: exit %d\n%s", code, out)
			}

			call := func(sql string, params map[string]any, output string) (queryReceipt, string, string, int) {
				t.Helper()
				b, _ := json.Marshal(map[string]any{"sql": strings.ReplaceAll(sql, "S.", s+"."), "params": params})
				args := writeFileIn(t, dir, "args.json", string(b))
				out, errOut, code := runFull(t, bin, addr, "tools", "call", "inventory/query", "--json-file", args, "--output", output)
				var rec queryReceipt
				_ = json.Unmarshal([]byte(out), &rec)
				return rec, out, errOut, code
			}
			result := filepath.Join(dir, "result.json")
			rec, out, errOut, code := call(`SELECT r.service, r.version, o.team FROM S.running_releases r JOIN S.service_owners o USING (service)
				WHERE r.environment = :env AND r.region = :region ORDER BY 1`, map[string]any{"env": "production"}, result)
			got, _ := os.ReadFile(result)
			if code != 0 || rec.Execution.Status != "ok" || !rec.Result.Complete || rec.Result.RowCount != 2 || rec.Result.Bytes != int64(len(got)) ||
				string(got) != `{"rows":[{"service":"checkout","version":"4.3.0","team":"payments"},{"service":"invoices","version":"1.9.1","team":"payments"}]}`+"\n" {
				t.Fatalf("query: exit %d %s\n%s\n%s", code, out, errOut, got)
			}

			// The row limit: exit 2, the file holds the partial result and is named as partial.
			partial := filepath.Join(dir, "partial.json")
			rec, out, errOut, code = call("SELECT service, environment FROM S.running_releases ORDER BY 1, 2", nil, partial)
			got, _ = os.ReadFile(partial)
			if code != 2 || rec.Execution.Status != "partial" || rec.Result.Complete || rec.Result.RowCount != 3 || rec.Result.IncompleteReason != "row_limit" ||
				!strings.Contains(errOut, partial+" holds a partial result (3 rows: the connection's row limit was reached)") ||
				strings.Count(string(got), "environment") != 3 {
				t.Fatalf("partial: exit %d %s\n%s\n%s", code, out, errOut, got)
			}

			// An SQL error: exit 1 with the database's message, no file.
			failed := filepath.Join(dir, "failed.json")
			rec, out, errOut, code = call("SELECT nonexistent_col FROM S.teams", nil, failed)
			if code != 1 || rec.Execution.Status != "sql_error" || !strings.Contains(errOut, `column "nonexistent_col" does not exist (SQLSTATE 42703)`) {
				t.Fatalf("sql error: exit %d %s\n%s", code, out, errOut)
			}
			if _, err := os.Stat(failed); !os.IsNotExist(err) {
				t.Fatal("an SQL error wrote a result file")
			}

			// Refusals: exit 2, nothing written.
			for _, tc := range []struct {
				sql    string
				params map[string]any
				msg    string
			}{
				{"DELETE FROM S.teams", nil, "only a SELECT or WITH query"},
				{"SELECT 1; DELETE FROM S.teams", nil, "more than one statement"},
				{"SELECT * FROM S.running_releases WHERE region = :region", map[string]any{"region": "us-east-1"}, `"region" is reserved`},
			} {
				refused := filepath.Join(dir, "refused.json")
				rec, out, errOut, code := call(tc.sql, tc.params, refused)
				if code != 2 || rec.Execution.Status != "denied" || !strings.Contains(errOut, tc.msg) {
					t.Errorf("%s: exit %d %s\n%s", tc.sql, code, out, errOut)
				}
				if _, err := os.Stat(refused); !os.IsNotExist(err) {
					t.Errorf("%s: a refused call wrote a result file", tc.sql)
				}
			}
			// The platform team makes the owners' view (e-mail addresses) need pii:read, and
			// imports again: the query card now needs it too, since a query can read that view.
			out, _, code = runFull(t, bin, addr, "cards", "get", "inventory/"+s+".service_owners", "--tenant", "acme", "-o", "json")
			var c map[string]any
			if err := json.Unmarshal([]byte(out), &c); code != 0 || err != nil {
				t.Fatalf("cards get: exit %d %v\n%s", code, err, out)
			}
			// cards get -o json is a card file: change the scopes and apply it.
			c["required_scopes"] = []string{"inventory:read", "pii:read"}
			delete(c, "version")
			b, _ := json.Marshal(c)
			if out, errOut, code = runFull(t, bin, addr, "cards", "apply", "-f", writeFileIn(t, dir, "owners.json", string(b))); code != 0 || !strings.Contains(out, "1 updated") {
				t.Fatalf("apply: exit %d\n%s\n%s", code, out, errOut)
			}
			out, errOut, code = runFull(t, bin, addr, append(imp, "--upstreams", upstreams)...)
			if code != 0 || !strings.Contains(out, "update     inventory  query") {
				t.Fatalf("import after curation: exit %d\n%s\n%s", code, out, errOut)
			}

			// A caller without every view's scopes: the query card is unknown to it.
			t.Setenv("CARDEX_AGENT_TOKEN", "reader-token-0123456789")
			rec, out, errOut, code = call("SELECT service FROM S.running_releases", nil, filepath.Join(dir, "reader.json"))
			if code != 2 || rec.Execution.Status != "denied" || !strings.Contains(errOut, `unknown tool "query"`) {
				t.Fatalf("reader: exit %d %s\n%s", code, out, errOut)
			}
			out, _, _ = runFull(t, bin, addr, "tools", "search", "currently running releases and service owners", "-o", "json")
			if strings.Contains(out, "service_owners") || strings.Contains(out, `"query"`) || !strings.Contains(out, "running_releases") {
				t.Fatalf("the reader's search: %s", out)
			}
		})
	}
}
