package sqlimport_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/seed0cff8200/cardex/cards"
	"github.com/seed0cff8200/cardex/cards/embedded"
	"github.com/seed0cff8200/cardex/internal/execution/sqlquery"
	"github.com/seed0cff8200/cardex/internal/execution/upstream"
	"github.com/seed0cff8200/cardex/internal/sources/catalogsync"
	"github.com/seed0cff8200/cardex/internal/sources/sqlimport"
	"github.com/seed0cff8200/cardex/internal/testkit/pgtest"
)

var databases = []struct {
	name string
	url  func(testing.TB) string
}{
	{"pglite", pgtest.URL},
	{"native", pgtest.NativeURL},
}

func read(t *testing.T, url string, o sqlimport.Options) []sqlimport.Relation {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	rels, err := sqlimport.Read(ctx, c, o)
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	return rels
}

type contract struct {
	Description string                     `json:"description"`
	Properties  map[string]json.RawMessage `json:"properties"`
	Required    []string                   `json:"required"`
	SQL         sqlimport.SQLInfo          `json:"x-cardex-sql"`
}

func byName(t *testing.T, cs []cards.Card, name string) (cards.Card, contract) {
	t.Helper()
	for _, c := range cs {
		if c.Name == name {
			var k contract
			if err := json.Unmarshal(c.OutputSchema, &k); err != nil {
				t.Fatal(err)
			}
			return c, k
		}
	}
	t.Fatalf("no card %s", name)
	return cards.Card{}, contract{}
}

// TestImportInventory imports the README's example database and checks what
// the cards say against what the schema holds.
func TestImportInventory(t *testing.T) {
	for _, db := range databases {
		t.Run(db.name, func(t *testing.T) {
			url := db.url(t)
			s := pgtest.Inventory(t, url)
			rels := read(t, url, sqlimport.Options{Schemas: []string{s}})
			cs, skipped := sqlimport.ToCards("acme", "inventory", rels)
			if len(skipped) != 0 || len(cs) != 4 {
				t.Fatalf("%d cards, skipped %v", len(cs), skipped)
			}
			for _, c := range cs {
				if c.Kind != cards.KindSQLView || c.Tenant != "acme" || c.Server != "inventory" || !strings.HasPrefix(c.Name, s+".") {
					t.Fatalf("card %+v", c)
				}
			}

			// The comment is what a row means; columns carry theirs, or their table column's.
			rr, k := byName(t, cs, s+".running_releases")
			if rr.Summary != "Releases currently running: one row per service and environment, with the version deployed there and since when." ||
				k.Description != rr.Summary || k.SQL.Kind != "view" || k.SQL.Relation != s+".running_releases" {
				t.Fatalf("running_releases: %q %+v", rr.Summary, k)
			}
			if !slices.Equal(k.SQL.Columns, []string{"service", "environment", "region", "version", "replicas", "cpu_cores", "deployed_at", "changelog"}) {
				t.Fatalf("columns %v", k.SQL.Columns)
			}
			prop := func(k contract, col string) map[string]any {
				var m map[string]any
				_ = json.Unmarshal(k.Properties[col], &m)
				return m
			}
			if p := prop(k, "service"); p["type"] != "string" || p["description"] != "Name of the service, as in its repository and dashboards." ||
				p["x-cardex-sql"].(map[string]any)["source"] != s+".services.name" {
				t.Fatalf("service (not null through inner joins, the table's comment): %v", p)
			}
			if p := prop(k, "cpu_cores"); p["x-cardex-sql"].(map[string]any)["type"] != "numeric(6,2)" {
				t.Fatalf("cpu_cores: %v", p)
			}
			if p := prop(k, "deployed_at"); p["format"] != "date-time" || p["description"] != "When this release started running in the environment." {
				t.Fatalf("deployed_at: %v", p)
			}
			if p := prop(k, "changelog"); len(p) != 2 { // any JSON, with its description and SQL type
				t.Fatalf("changelog: %v", p)
			}
			if k.SQL.PrimaryKey != nil || k.SQL.ForeignKeys != nil {
				t.Fatalf("a join view has no keys of its own: %+v", k.SQL)
			}
			// It joins the owners' view: both identify a row of services(name).
			identifies := func(k contract) []string {
				var out []string
				for _, id := range k.SQL.Identifies {
					out = append(out, strings.Join(id.Columns, ",")+"="+strings.TrimPrefix(id.Table, s+".")+"("+strings.Join(id.TableKey, ",")+")")
				}
				return out
			}
			if got := identifies(k); !slices.Equal(got, []string{"environment=environments(name)", "service=services(name)"}) {
				t.Fatalf("identifies %v", got)
			}
			if !strings.Contains(rr.Description, "(service) identifies a row of "+s+".services(name)") {
				t.Fatalf("description: %s", rr.Description)
			}
			if strings.Contains(string(rr.OutputSchema), "service_owners") || strings.Contains(rr.Description, "service_owners") {
				t.Fatalf("a card names another card: %s", rr.Description)
			}
			_, k = byName(t, cs, s+".service_owners")
			if got := identifies(k); !slices.Equal(got, []string{"service=services(name)", "team=teams(slug)"}) {
				t.Fatalf("service_owners identifies %v", got)
			}
			if p := prop(k, "tier"); !slices.Equal(p["enum"].([]any), []any{"critical", "standard", "experimental"}) || p["type"] != "string" {
				t.Fatalf("tier: %v", p)
			}
			if p := prop(k, "oncall_email"); !slices.Equal(p["type"].([]any), []any{"string", "null"}) {
				t.Fatalf("oncall_email is nullable: %v", p)
			}

			// A simple view keeps its table's key and foreign keys; without a comment it says so.
			dh, k := byName(t, cs, s+".deployment_history")
			if !strings.Contains(dh.Summary, "has no description yet (no COMMENT ON VIEW)") || k.Description != "" ||
				!slices.Equal(k.SQL.PrimaryKey, []string{"id"}) || len(k.SQL.ForeignKeys) != 2 ||
				k.SQL.ForeignKeys[1].References != s+".releases" || !slices.Equal(k.SQL.ForeignKeys[1].Columns, []string{"release_id"}) {
				t.Fatalf("deployment_history: %q %+v", dh.Summary, k.SQL)
			}

			// A materialized view: its unique index is its key.
			_, k = byName(t, cs, s+".release_counts")
			if k.SQL.Kind != "materialized_view" || len(k.SQL.Unique) != 1 || !slices.Equal(k.SQL.Unique[0], []string{"service"}) {
				t.Fatalf("release_counts: %+v", k.SQL)
			}

			// The contract holds: every row of every view validates against its card.
			p := sqlquery.New(upstream.Config{Upstreams: []upstream.Upstream{{Server: "inventory", SQL: &upstream.SQL{DatabaseURL: url}}}}, nil)
			defer p.Close()
			for _, c := range cs {
				var k contract
				_ = json.Unmarshal(c.OutputSchema, &k)
				res, err := p.Query(context.Background(), "acme", "inventory", json.RawMessage(`{"sql": "SELECT * FROM `+k.SQL.Relation+`"}`))
				if err != nil || res.RowCount == 0 {
					t.Fatalf("%s: %v %+v", c.Name, err, res)
				}
				schema, err := cards.CompileSchema(c.OutputSchema)
				if err != nil {
					t.Fatal(err)
				}
				var rows []json.RawMessage
				_ = json.Unmarshal(res.Rows, &rows)
				for _, row := range rows {
					if err := schema.Validate(row); err != nil {
						t.Fatalf("%s: row %s breaks the card's contract: %v", c.Name, row, err)
					}
				}
			}

			// With tables: their keys and foreign keys, and the joins to them.
			rels = read(t, url, sqlimport.Options{Schemas: []string{s}, Tables: true})
			cs, _ = sqlimport.ToCards("acme", "inventory", rels)
			if len(cs) != 9 {
				t.Fatalf("%d cards with tables", len(cs))
			}
			_, k = byName(t, cs, s+".releases")
			if k.SQL.Kind != "table" || !slices.Equal(k.SQL.PrimaryKey, []string{"id"}) || len(k.SQL.Unique) != 1 ||
				!slices.Equal(k.SQL.Unique[0], []string{"service_id", "version"}) || len(k.SQL.ForeignKeys) != 1 {
				t.Fatalf("releases: %+v", k.SQL)
			}
			if p := prop(k, "commit_sha"); p["contentEncoding"] != "base64" {
				t.Fatalf("bytea: %v", p)
			}
			_, k = byName(t, cs, s+".deployment_history")
			var fks []string
			for _, f := range k.SQL.ForeignKeys {
				fks = append(fks, strings.Join(f.Columns, ",")+"->"+strings.TrimPrefix(f.References, s+".")+"("+strings.Join(f.ReferencedColumns, ",")+")")
			}
			if got := identifies(k); !slices.Equal(got, []string{"id=deployments(id)"}) ||
				!slices.Equal(fks, []string{"environment_id->environments(id)", "release_id->releases(id)"}) {
				t.Fatalf("deployment_history: identifies %v, foreign keys %v", got, fks)
			}
			_, k = byName(t, cs, s+".releases")
			if got := identifies(k); !slices.Equal(got, []string{"id=releases(id)", "service_id,version=releases(service_id,version)"}) {
				t.Fatalf("releases identifies %v", got)
			}
		})
	}
}

// TestImportEdges: outer joins make columns nullable, set operations keep
// no keys, names that cannot be cards are skipped with the reason.
func TestImportEdges(t *testing.T) {
	for _, db := range databases {
		t.Run(db.name, func(t *testing.T) {
			url := db.url(t)
			s := pgtest.Inventory(t, url)
			pgtest.Exec(t, url, strings.NewReplacer("S.", s+".").Replace(`
				CREATE VIEW S.services_left AS SELECT s.name, t.slug FROM S.services s LEFT JOIN S.teams t ON t.id = s.team_id;
				CREATE VIEW S.names AS SELECT name FROM S.services UNION SELECT slug FROM S.teams;
				CREATE VIEW S."Odd View" AS SELECT id AS "Service ID", name FROM S.services;
				CREATE VIEW S.nested AS SELECT name AS service_name, "Service ID" AS id FROM S."Odd View" WHERE name <> '';
				CREATE VIEW S.computed AS SELECT upper(name) AS loud, id + 0 AS id FROM S.services;`))
			rels := read(t, url, sqlimport.Options{Schemas: []string{s}})
			cs, skipped := sqlimport.ToCards("acme", "inventory", rels)
			if len(skipped) != 1 || skipped[0].Name != s+".Odd View" || !strings.Contains(skipped[0].Reason, "card-name rule") {
				t.Fatalf("skipped %v", skipped)
			}
			nullable := func(k contract, col string) bool {
				var m map[string]any
				_ = json.Unmarshal(k.Properties[col], &m)
				ty, _ := m["type"].([]any)
				return slices.Contains(ty, "null")
			}
			_, k := byName(t, cs, s+".services_left")
			if !nullable(k, "name") || !nullable(k, "slug") {
				t.Fatalf("an outer join's columns may be null: %s", k.Properties)
			}
			_, k = byName(t, cs, s+".names")
			if k.SQL.PrimaryKey != nil || k.SQL.Unique != nil || k.SQL.Identifies != nil {
				t.Fatalf("a UNION keeps no keys: %+v", k.SQL)
			}
			// Through a view whose name needs quotes, keys and sources follow.
			_, k = byName(t, cs, s+".nested")
			var m map[string]any
			_ = json.Unmarshal(k.Properties["service_name"], &m)
			if !slices.Equal(k.SQL.PrimaryKey, []string{"id"}) || m["x-cardex-sql"].(map[string]any)["source"] != s+".services.name" || nullable(k, "service_name") {
				t.Fatalf("nested: %+v %v", k.SQL, m)
			}
			_, k = byName(t, cs, s+".computed")
			_ = json.Unmarshal(k.Properties["loud"], &m)
			if k.SQL.PrimaryKey != nil || m["x-cardex-sql"].(map[string]any)["source"] != nil {
				t.Fatalf("computed columns come from nowhere: %+v %v", k.SQL, m)
			}
			// A schema that is not there is an error, not an empty import.
			ctx := context.Background()
			c, err := pgx.Connect(ctx, url)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close(ctx)
			if _, err := sqlimport.Read(ctx, c, sqlimport.Options{Schemas: []string{s + "_nope"}}); err == nil || !strings.Contains(err.Error(), "does not exist") {
				t.Fatalf("missing schema: %v", err)
			}
		})
	}
}

// TestImportAsReadOnlyRole: the role the gateway holds sees only what it
// was granted, and still learns where the columns come from (the catalogue,
// not the base tables, says so). Native PostgreSQL: roles are real there.
func TestImportAsReadOnlyRole(t *testing.T) {
	url := pgtest.NativeURL(t)
	s := pgtest.Inventory(t, url)
	role := s + "_reader"
	pgtest.Exec(t, url, `CREATE ROLE `+role+` LOGIN; GRANT USAGE ON SCHEMA `+s+` TO `+role+`;
		GRANT SELECT ON `+s+`.running_releases, `+s+`.service_owners TO `+role)
	t.Cleanup(func() {
		pgtest.Exec(t, url, `DROP OWNED BY `+role+`; DROP ROLE `+role)
	})
	readerURL := strings.Replace(url, "postgres://postgres@", "postgres://"+role+"@", 1)
	if !strings.Contains(readerURL, role) {
		t.Fatalf("cannot build the reader's URL from %s", url)
	}
	rels := read(t, readerURL, sqlimport.Options{Schemas: []string{s}})
	cs, skipped := sqlimport.ToCards("acme", "inventory", rels)
	var names []string
	for _, c := range cs {
		names = append(names, c.Name)
	}
	if !slices.Equal(names, []string{s + ".running_releases", s + ".service_owners"}) || len(skipped) != 2 ||
		!strings.Contains(skipped[0].Reason, "may not SELECT") {
		t.Fatalf("cards %v, skipped %v", names, skipped)
	}
	_, k := byName(t, cs, s+".running_releases")
	if len(k.SQL.Identifies) != 2 || k.SQL.Identifies[1].Table != s+".services" {
		t.Fatalf("identifies: %+v", k.SQL.Identifies)
	}
}

// TestReimport: changed views updated, new ones created, vanished ones
// revoked, curated fields kept, and the query card requires every view's
// scopes — in one atomic write.
func TestReimport(t *testing.T) {
	url := pgtest.NativeURL(t)
	s := pgtest.Inventory(t, url)
	store, err := embedded.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	cat := catalogsync.StoreCatalog{Store: store}
	ctx := context.Background()
	importOnce := func(opt catalogsync.Options) catalogsync.Plan {
		t.Helper()
		cs, skipped := sqlimport.ToCards("acme", "inventory", read(t, url, sqlimport.Options{Schemas: []string{s}}))
		stored, err := cat.List(ctx, "acme", "inventory")
		if err != nil {
			t.Fatal(err)
		}
		plan, err := sqlimport.Plan("acme", "inventory", stored, cs, skipped, []string{"region"}, opt)
		if err != nil {
			t.Fatal(err)
		}
		if err := catalogsync.Apply(ctx, cat, plan); err != nil {
			t.Fatal(err)
		}
		return plan
	}
	summary := func(p catalogsync.Plan) map[string]string {
		out := map[string]string{}
		for _, c := range p.Changes {
			out[strings.TrimPrefix(c.Card.Name, s+".")] = string(c.Action)
		}
		return out
	}
	plan := importOnce(catalogsync.Options{Scopes: []string{"inventory:read"}})
	if plan.Count(catalogsync.Create) != 5 {
		t.Fatalf("first import: %v", summary(plan))
	}
	q, err := store.Get(ctx, cards.Key{Tenant: "acme", Server: "inventory", Name: "query"})
	if err != nil || q.Kind != cards.KindFunction || !slices.Equal(q.RequiredScopes, []string{"inventory:read"}) ||
		strings.Contains(q.Description, s+".") || !strings.Contains(q.Description, ":region") {
		t.Fatalf("query card: %v %+v", err, q)
	}
	if plan = importOnce(catalogsync.Options{Scopes: []string{"inventory:read"}}); plan.Count(catalogsync.Unchanged) != 5 {
		t.Fatalf("second import: %v", summary(plan))
	}

	// The platform team curates a card; the schema changes.
	owners, _ := store.Get(ctx, cards.Key{Tenant: "acme", Server: "inventory", Name: s + ".service_owners"})
	owners.Aliases = []string{"who is on call for a service"}
	owners.RequiredScopes = append(owners.RequiredScopes, "pii:read")
	if _, err := store.Put(ctx, []cards.Card{owners}); err != nil {
		t.Fatal(err)
	}
	pgtest.Exec(t, url, strings.NewReplacer("S.", s+".").Replace(`
		COMMENT ON VIEW S.deployment_history IS 'Every deployment there has been, one row per deployment.';
		DROP MATERIALIZED VIEW S.release_counts;
		CREATE VIEW S.teams_view AS SELECT slug, name FROM S.teams;`))
	plan = importOnce(catalogsync.Options{Scopes: []string{"inventory:read"}})
	got := summary(plan)
	want := map[string]string{"deployment_history": "update", "release_counts": "revoke", "teams_view": "create",
		"running_releases": "unchanged", "service_owners": "unchanged", "query": "update"}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("re-import: %v, want %v", got, want)
		}
	}
	owners, _ = store.Get(ctx, cards.Key{Tenant: "acme", Server: "inventory", Name: s + ".service_owners"})
	if !slices.Equal(owners.Aliases, []string{"who is on call for a service"}) || !slices.Contains(owners.RequiredScopes, "pii:read") {
		t.Fatalf("curated fields lost: %+v", owners)
	}
	q, _ = store.Get(ctx, cards.Key{Tenant: "acme", Server: "inventory", Name: "query"})
	if !slices.Equal(q.RequiredScopes, []string{"inventory:read", "pii:read"}) {
		t.Fatalf("the query card must require every view's scopes: %+v", q)
	}
	rc, _ := store.Get(ctx, cards.Key{Tenant: "acme", Server: "inventory", Name: s + ".release_counts"})
	if rc.Status != cards.StatusRevoked {
		t.Fatalf("vanished view: %s", rc.Status)
	}

	// One atomic write: a conflicting change in the middle writes nothing.
	pgtest.Exec(t, url, "COMMENT ON VIEW "+s+".teams_view IS 'Teams, by slug.'")
	cs, skipped := sqlimport.ToCards("acme", "inventory", read(t, url, sqlimport.Options{Schemas: []string{s}}))
	stored, _ := cat.List(ctx, "acme", "inventory")
	plan, err = sqlimport.Plan("acme", "inventory", stored, cs, skipped, nil, catalogsync.Options{})
	if err != nil {
		t.Fatal(err)
	}
	dh, _ := store.Get(ctx, cards.Key{Tenant: "acme", Server: "inventory", Name: s + ".running_releases"})
	dh.Tags = append(dh.Tags, "moved")
	if _, err := store.Put(ctx, []cards.Card{dh}); err != nil {
		t.Fatal(err)
	}
	before, _ := store.Get(ctx, cards.Key{Tenant: "acme", Server: "inventory", Name: s + ".teams_view"})
	for i := range plan.Changes { // make the plan write the moved card too
		if plan.Changes[i].Card.Name == s+".running_releases" {
			plan.Changes[i].Action = catalogsync.Update
		}
	}
	if err := catalogsync.Apply(ctx, cat, plan); err == nil {
		t.Fatal("a stale plan was written")
	}
	after, _ := store.Get(ctx, cards.Key{Tenant: "acme", Server: "inventory", Name: s + ".teams_view"})
	if after.Version != before.Version || after.Summary != before.Summary {
		t.Fatal("a failed import wrote part of its change")
	}
}
