package agents_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/seed0cff8200/cardex/cards"
	"github.com/seed0cff8200/cardex/cards/embedded"
	"github.com/seed0cff8200/cardex/embed"
	"github.com/seed0cff8200/cardex/internal/execution/gateway"
	"github.com/seed0cff8200/cardex/internal/execution/sqlquery"
	"github.com/seed0cff8200/cardex/internal/execution/upstream"
	"github.com/seed0cff8200/cardex/internal/faces/agents"
	"github.com/seed0cff8200/cardex/internal/sources/catalogsync"
	"github.com/seed0cff8200/cardex/internal/sources/sqlimport"
	"github.com/seed0cff8200/cardex/internal/testkit/pgtest"
	"github.com/seed0cff8200/cardex/retriever"
)

const (
	oncallToken = "oncall-token-0123456789"
	readerToken = "reader-token-0123456789"
)

type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// importInventory imports the example database's views into the store as
// `cardex import sql` does, with the scope inventory:read.
func importInventory(t *testing.T, ctx context.Context, st cards.Store, url, schema string) {
	t.Helper()
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	rels, err := sqlimport.Read(ctx, c, sqlimport.Options{Schemas: []string{schema}})
	c.Close(ctx)
	if err != nil {
		t.Fatal(err)
	}
	views, skipped := sqlimport.ToCards("acme", "inventory", rels)
	cat := catalogsync.StoreCatalog{Store: st}
	stored, err := cat.List(ctx, "acme", "inventory")
	if err != nil {
		t.Fatal(err)
	}
	plan, err := sqlimport.Plan("acme", "inventory", stored, views, skipped, []string{"region"}, catalogsync.Options{Scopes: []string{"inventory:read"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := catalogsync.Apply(ctx, cat, plan); err != nil {
		t.Fatal(err)
	}
}

// inventoryStore loads the example database into a schema of its own on
// the database at url and imports it into a fresh store (in dir), as
// `cardex import sql` does; it returns the schema's name.
func inventoryStore(t *testing.T, url string) (schema string, st cards.Store, dir string) {
	t.Helper()
	schema = pgtest.Inventory(t, url)
	dir = t.TempDir()
	es, err := embedded.Open(filepath.Join(dir, "store"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { es.Close() })
	importInventory(t, context.Background(), es, url, schema)
	return schema, es, dir
}

// tightenOwners makes the owners' view (e-mail addresses) need pii:read
// too, as a platform team would after the import.
func tightenOwners(t *testing.T, st cards.Store, schema string) {
	t.Helper()
	ctx := context.Background()
	owners, err := st.Get(ctx, cards.Key{Tenant: "acme", Server: "inventory", Name: schema + ".service_owners"})
	if err != nil {
		t.Fatal(err)
	}
	owners.RequiredScopes = []string{"inventory:read", "pii:read"}
	if _, err := st.Put(ctx, []cards.Card{owners}); err != nil {
		t.Fatal(err)
	}
}

// TestSQLThroughMCP is the path end to end, as `cardex serve` wires
// it: import a real database's commented views, find them by a question in
// plain words over /mcp, describe one, and query through call_tool — with
// parameters, a partial result, every refusal, and an audit log that holds
// neither rows nor parameter values.
func TestSQLThroughMCP(t *testing.T) {
	for _, db := range []struct {
		name string
		url  func(testing.TB) string
	}{{"pglite", pgtest.URL}, {"native", pgtest.NativeURL}} {
		t.Run(db.name, func(t *testing.T) {
			ctx := context.Background()
			url := db.url(t)
			s, st, dir := inventoryStore(t, url)
			// The platform team makes the owners' view (e-mail addresses) need pii:read too,
			// without importing again: the query card itself still asks for inventory:read only.
			tightenOwners(t, st, s)

			write := func(name, body string) string {
				p := filepath.Join(dir, name)
				if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
					t.Fatal(err)
				}
				return p
			}
			t.Setenv("INVENTORY_RO_URL", url)
			upstreams := write("upstreams.yaml", `upstreams:
  - server: inventory
    sql:
      database_url: ${INVENTORY_RO_URL}
      max_rows: 3
      reserved_params: {region: eu-west-1}
`)
			tokenFile := write("tokens.yaml", `tokens:
  - {token: `+oncallToken+`, tenant: acme, subject: oncall-agent, scopes: ["inventory:read", "pii:read"]}
  - {token: `+readerToken+`, tenant: acme, subject: reader-agent, scopes: ["inventory:read"]}
`)
			emb, err := embed.Builtin()
			if err != nil {
				t.Fatal(err)
			}
			ret, err := retriever.New(ctx, st, emb, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { ret.Close() })
			surf := serveSurfaces(t, agents.Config{Retriever: ret, Version: "test", DataDir: dir, Key: []byte("0123456789abcdef0123456789abcdef"),
				TokenFile: tokenFile, UpstreamsFile: upstreams, HTTPListen: "127.0.0.1:0"})
			connect := func(token string) *mcp.ClientSession {
				tr := &mcp.StreamableClientTransport{Endpoint: "http://" + surf.Addr() + "/mcp", HTTPClient: &http.Client{Transport: bearer{token}}, MaxRetries: -1}
				cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, nil).Connect(ctx, tr, nil)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { cs.Close() })
				return cs
			}
			call := func(cs *mcp.ClientSession, tool string, args map[string]any) (*mcp.CallToolResult, string) {
				t.Helper()
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
				if err != nil {
					t.Fatalf("%s: %v", tool, err)
				}
				text := ""
				if len(res.Content) > 0 {
					text = res.Content[0].(*mcp.TextContent).Text
				}
				return res, text
			}
			oncall := connect(oncallToken)

			// A question in plain words finds the two views it needs.
			_, text := call(oncall, "search_tools", map[string]any{"query": "currently running releases and service owners", "limit": 5})
			var found struct {
				Tools []struct{ Name, Server string }
			}
			if err := json.Unmarshal([]byte(text), &found); err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, tl := range found.Tools {
				names = append(names, tl.Server+"/"+tl.Name)
			}
			if !slices.Contains(names, "inventory/"+s+".running_releases") || !slices.Contains(names, "inventory/"+s+".service_owners") {
				t.Fatalf("search: %v", names)
			}
			t.Logf("search_tools top 5: %v", names)

			// Describe returns the whole row contract.
			res, text := call(oncall, "describe_tool", map[string]any{"name": s + ".running_releases"})
			var d struct {
				Kind         string          `json:"kind"`
				OutputSchema json.RawMessage `json:"output_schema"`
			}
			if err := json.Unmarshal([]byte(text), &d); err != nil || res.IsError || d.Kind != "sql_view" ||
				!strings.Contains(string(d.OutputSchema), `"identifies":[{"columns":["environment"],"table":"`+s+`.environments","table_key":["name"]},{"columns":["service"],"table":"`+s+`.services","table_key":["name"]}]`) {
				t.Fatalf("describe: %v %s", err, text)
			}

			query := func(cs *mcp.ClientSession, sql string, params map[string]any) (*mcp.CallToolResult, string) {
				t.Helper()
				args := map[string]any{"sql": strings.ReplaceAll(sql, "S.", s+".")}
				if params != nil {
					args["params"] = params
				}
				return call(cs, "call_tool", map[string]any{"name": "query", "server": "inventory", "arguments": args})
			}
			// A parameterised join of the two views; :region is the connection's.
			res, text = query(oncall, `SELECT r.service, r.version, o.team, o.oncall_email
				FROM S.running_releases r JOIN S.service_owners o USING (service)
				WHERE r.environment = :env AND r.region = :region ORDER BY r.service`, map[string]any{"env": "production"})
			want := `{"columns":["service","version","team","oncall_email"],"rows":[` +
				`{"service":"checkout","version":"4.3.0","team":"payments","oncall_email":"payments-oncall@example.com"},` +
				`{"service":"invoices","version":"1.9.1","team":"payments","oncall_email":"payments-oncall@example.com"}],"row_count":2,"complete":true}`
			if res.IsError || text != want {
				t.Fatalf("query:\n%s\nwant\n%s", text, want)
			}
			var wantV any
			_ = json.Unmarshal([]byte(want), &wantV)
			if !reflect.DeepEqual(res.StructuredContent, wantV) {
				t.Fatalf("structured content: %v", res.StructuredContent)
			}
			// The row limit: a partial result that says so.
			res, text = query(oncall, "SELECT service, environment FROM S.running_releases ORDER BY 1, 2", nil)
			if res.IsError || !strings.Contains(text, `"row_count":3,"complete":false,"incomplete_reason":"row_limit"`) {
				t.Fatalf("row limit: %s", text)
			}
			// Refusals, and an SQL error.
			for _, tc := range []struct {
				sql    string
				params map[string]any
				msg    string
			}{
				{"DELETE FROM S.teams", nil, "only a SELECT or WITH query"},
				{"SELECT 1; DELETE FROM S.teams", nil, "more than one statement"},
				{"WITH gone AS (DELETE FROM S.teams RETURNING 1) SELECT * FROM gone", nil, "tried to write"},
				{"SELECT * FROM S.running_releases WHERE region = :region", map[string]any{"region": "us-east-1"}, `"region" is reserved`},
				{"SELECT nonexistent_col FROM S.teams", nil, `column "nonexistent_col" does not exist (SQLSTATE 42703)`},
			} {
				res, text := query(oncall, tc.sql, tc.params)
				if !res.IsError || !strings.Contains(text, tc.msg) {
					t.Errorf("%s: %v %s, want an error mentioning %q", tc.sql, res.IsError, text, tc.msg)
				}
			}
			res, text = query(oncall, "SELECT count(*) AS teams FROM S.teams", nil)
			if res.IsError || !strings.Contains(text, `"rows":[{"teams":3}]`) {
				t.Fatalf("the refused writes wrote: %s", text)
			}
			// A view card is described, not called.
			res, text = call(oncall, "call_tool", map[string]any{"name": s + ".teams_missing"})
			if !res.IsError || !strings.Contains(text, "unknown tool") {
				t.Fatalf("unknown: %s", text)
			}
			res, text = call(oncall, "call_tool", map[string]any{"name": s + ".running_releases", "arguments": map[string]any{}})
			if !res.IsError || !strings.Contains(text, "run SQL on it with inventory/query") {
				t.Fatalf("calling a view card: %s", text)
			}

			// A caller without the scopes of every view cannot query: unknown, and nothing ran.
			reader := connect(readerToken)
			res, text = query(reader, "SELECT service FROM S.running_releases", nil)
			if !res.IsError || text != `unknown tool "query"` {
				t.Fatalf("reader: %s", text)
			}
			// After the next import the query card asks for pii:read itself: the reader
			// does not even find it.
			importInventory(t, ctx, st, url, s)
			if err := ret.Sync(ctx); err != nil {
				t.Fatal(err)
			}
			_, text = call(reader, "search_tools", map[string]any{"query": "run a SQL query on the inventory database"})
			if strings.Contains(text, `"name":"query"`) {
				t.Fatalf("the reader sees the query card: %s", text)
			}
			_, text = call(oncall, "search_tools", map[string]any{"query": "run a SQL query on the inventory database"})
			if !strings.Contains(text, `"name":"query"`) {
				t.Fatalf("the on-call agent lost the query card: %s", text)
			}

			// The audit log: every call, its outcome and size, never rows or values.
			audit, err := os.ReadFile(filepath.Join(dir, "audit.jsonl"))
			if err != nil {
				t.Fatal(err)
			}
			for _, secret := range []string{"production", "checkout", "payments-oncall", "us-east-1", "eu-west-1", "SELECT", "nonexistent_col"} {
				if strings.Contains(string(audit), secret) {
					t.Fatalf("the audit log holds %q:\n%s", secret, audit)
				}
			}
			var outcomes []string
			for _, line := range strings.Split(strings.TrimSpace(string(audit)), "\n") {
				var m map[string]any
				_ = json.Unmarshal([]byte(line), &m)
				o := m["outcome"].(string)
				if n, ok := m["row_count"]; ok {
					o += " rows=" + jsonNum(n)
				}
				if r, ok := m["incomplete_reason"]; ok {
					o += " " + r.(string)
				}
				if d, ok := m["detail"]; ok && m["outcome"] == "sql_error" {
					o += " " + d.(string)
				}
				outcomes = append(outcomes, o)
			}
			wantOutcomes := []string{"ok rows=2", "ok rows=3 row_limit", "denied_statement", "denied_statement", "denied_statement",
				"denied_reserved_parameter", "sql_error SQLSTATE 42703", "ok rows=1", "denied_unknown_tool", "not_registered", "denied_unknown_tool"}
			if !slices.Equal(outcomes, wantOutcomes) {
				t.Fatalf("audit outcomes:\n%q\nwant\n%q", outcomes, wantOutcomes)
			}
		})
	}
}

func jsonNum(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestSQLRevokedViewUnreadable: a view card the platform team revoked (or
// left pending) must not be readable through SERVER/query. The gateway
// checked the scopes of active view cards only, so a revoked view was read
// like any table. Now, while the query role may still SELECT a view whose
// card is not active, the query card refuses to run, and says what to do;
// once the view is gone (or unreadable), queries run again.
func TestSQLRevokedViewUnreadable(t *testing.T) {
	ctx := context.Background()
	url := pgtest.NativeURL(t)
	s, st, _ := inventoryStore(t, url)
	ret, err := retriever.New(ctx, st, embed.NewHashed(embed.DefaultDim), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ret.Close() })
	cfg := upstream.Config{Upstreams: []upstream.Upstream{{Server: "inventory", SQL: &upstream.SQL{DatabaseURL: url}}}}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	pools := sqlquery.New(cfg, nil)
	t.Cleanup(pools.Close)
	gw := &gateway.Gateway{Retriever: ret, SQL: pools}
	caller := retriever.Caller{Tenant: "acme", Subject: "oncall", Scopes: []string{"inventory:read"}}
	query := func(sql string) (gateway.CallResult, error) {
		args, _ := json.Marshal(map[string]any{"sql": strings.ReplaceAll(sql, "S.", s+".")})
		return gw.Call(ctx, caller, gateway.Origin{Via: gateway.ViaGRPC}, "query", "inventory", args)
	}
	if res, err := query("SELECT count(*) AS n FROM S.service_owners"); err != nil || res.Query == nil || res.Query.RowCount != 1 {
		t.Fatalf("before: %+v %v", res, err)
	}

	// The platform team revokes the owners' view (e-mail addresses).
	owners, err := st.Get(ctx, cards.Key{Tenant: "acme", Server: "inventory", Name: s + ".service_owners"})
	if err != nil {
		t.Fatal(err)
	}
	owners.Status = cards.StatusRevoked
	if _, err := st.Put(ctx, []cards.Card{owners}); err != nil {
		t.Fatal(err)
	}
	if err := ret.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	for _, sql := range []string{"SELECT oncall_email FROM S.service_owners", "SELECT count(*) AS n FROM S.teams"} {
		_, err := query(sql)
		var d *gateway.Denial
		if !errors.As(err, &d) || d.Outcome != gateway.OutcomeDeniedClosedView || !strings.Contains(d.Message, "not active") || strings.Contains(d.Message, "service_owners") {
			t.Fatalf("%s with a revoked view still readable: %v", sql, err)
		}
	}
	// The view is dropped from the database (or SELECT on it revoked): the
	// revoked card no longer blocks the others.
	pgtest.Exec(t, url, "DROP VIEW "+s+".service_owners")
	if res, err := query("SELECT count(*) AS n FROM S.teams"); err != nil || res.Query == nil || res.Query.RowCount != 1 {
		t.Fatalf("after the view is gone: %+v %v", res, err)
	}
}

// TestSQLQueryToolListed: the query card is listed like every callable
// tool — in a full-disclosure token's tools/list, and as a pin of a
// progressive one — and called by its qualified name. It was never listed:
// a full token that could call it saw an empty list, and always_load:
// [inventory/query] was dropped. A token without the scopes of every view
// sees it nowhere.
func TestSQLQueryToolListed(t *testing.T) {
	ctx := context.Background()
	url := pgtest.NativeURL(t)
	s, st, dir := inventoryStore(t, url)
	tightenOwners(t, st, s)
	ret, err := retriever.New(ctx, st, embed.NewHashed(embed.DefaultDim), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ret.Close() })
	t.Setenv("INVENTORY_LIST_URL", url)
	up := filepath.Join(dir, "upstreams.yaml")
	tf := filepath.Join(dir, "tokens.yaml")
	for p, body := range map[string]string{
		up: "upstreams:\n  - server: inventory\n    sql: {database_url: \"${INVENTORY_LIST_URL}\"}\n",
		tf: `tokens:
  - {token: full-token-0123456789, tenant: acme, subject: full, scopes: ["inventory:read", "pii:read"], disclosure: full}
  - {token: pinned-token-0123456789, tenant: acme, subject: pinned, scopes: ["inventory:read", "pii:read"], always_load: [inventory/query]}
  - {token: narrow-token-0123456789, tenant: acme, subject: narrow, scopes: ["inventory:read"], disclosure: full}
`} {
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	surf := serveSurfaces(t, agents.Config{Retriever: ret, Version: "test", DataDir: dir, Key: []byte("0123456789abcdef0123456789abcdef"),
		TokenFile: tf, UpstreamsFile: up, HTTPListen: "127.0.0.1:0"})
	list := func(token string) []string {
		tr := &mcp.StreamableClientTransport{Endpoint: "http://" + surf.Addr() + "/mcp", HTTPClient: &http.Client{Transport: bearer{token}}, MaxRetries: -1}
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, nil).Connect(ctx, tr, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cs.Close() })
		var names []string
		for tool, err := range cs.Tools(ctx, nil) {
			if err != nil {
				t.Fatal(err)
			}
			names = append(names, tool.Name)
		}
		if token == "full-token-0123456789" {
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "inventory__query", Arguments: map[string]any{"sql": "SELECT count(*) AS n FROM " + s + ".teams"}})
			if err != nil || res.IsError {
				t.Fatalf("inventory__query: %v %+v", err, res)
			}
		}
		return names
	}
	if got := list("full-token-0123456789"); !slices.Equal(got, []string{"inventory__query"}) {
		t.Errorf("full disclosure lists %v, want [inventory__query] (the views are described, not called)", got)
	}
	if got := list("pinned-token-0123456789"); !slices.Equal(got, []string{"search_tools", "describe_tool", "call_tool", "inventory__query"}) {
		t.Errorf("progressive with the pin lists %v", got)
	}
	if got := list("narrow-token-0123456789"); len(got) != 0 {
		t.Errorf("a token without pii:read (the owners' view) lists %v", got)
	}
}
