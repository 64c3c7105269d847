package sqlimport

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/seed0cff8200/cardex/cards"
	"github.com/seed0cff8200/cardex/internal/execution/sqlquery"
	"github.com/seed0cff8200/cardex/internal/sources/catalogsync"
	"github.com/seed0cff8200/cardex/internal/sources/mcpimport"
)

// SQLKey is the schema keyword that holds what JSON Schema cannot say
// about a relation's rows: at the root of a card's output schema the
// relation, its kind, column order, keys, and how it joins (the foreign
// keys, and the table keys its columns identify); on each property the
// column's SQL type (and, for a view, the table column it comes from).
const SQLKey = "x-cardex-sql"

// Skipped is a relation that could not become a card.
type Skipped = mcpimport.Skipped

// SQLInfo is the root SQLKey object.
type SQLInfo struct {
	Relation    string       `json:"relation"` // as SQL names it (quoted where needed)
	Kind        string       `json:"kind"`
	Columns     []string     `json:"columns"` // in order
	PrimaryKey  []string     `json:"primary_key,omitempty"`
	Unique      [][]string   `json:"unique,omitempty"`
	ForeignKeys []ForeignKey `json:"foreign_keys,omitempty"`
	Identifies  []Identifies `json:"identifies,omitempty"`
}

// ColumnInfo is a property's SQLKey object.
type ColumnInfo struct {
	Type   string `json:"type"`
	Source string `json:"source,omitempty"`
}

var kindWords = map[string]string{KindView: "view", KindMaterializedView: "materialized view", KindTable: "table",
	KindPartitionedTable: "table", KindForeignTable: "foreign table"}

var commentOn = map[string]string{KindView: "VIEW", KindMaterializedView: "MATERIALIZED VIEW", KindTable: "TABLE",
	KindPartitionedTable: "TABLE", KindForeignTable: "FOREIGN TABLE"}

// ToCards maps relations to sql_view cards of (tenant, server), named
// schema.name. Relations the importing role may not read, whose names
// break the card-name rule, or whose contract is too large are skipped with
// the reason.
func ToCards(tenant, server string, rels []Relation) ([]cards.Card, []Skipped) {
	var out []cards.Card
	var skipped []Skipped
	for i := range rels {
		r := &rels[i]
		name := r.Schema + "." + r.Name
		switch {
		case !cards.ValidName(name):
			skipped = append(skipped, Skipped{Name: cards.Cut(name, 80), Reason: "the name does not follow the card-name rule [A-Za-z0-9_.-]{1,128}"})
			continue
		case !r.Readable:
			skipped = append(skipped, Skipped{Name: name, Reason: "the importing role may not SELECT it"})
			continue
		}
		c, err := card(tenant, server, r)
		if err != nil {
			skipped = append(skipped, Skipped{Name: name, Reason: err.Error()})
			continue
		}
		out = append(out, c)
	}
	return out, skipped
}

func card(tenant, server string, r *Relation) (cards.Card, error) {
	t, f := true, false
	c := cards.Card{
		Tenant: tenant, Server: server, Name: r.Schema + "." + r.Name, Kind: cards.KindSQLView,
		Tags:        []string{"sql", strings.ReplaceAll(r.Kind, "_", "-")},
		Annotations: cards.Annotations{ReadOnly: &t, Destructive: &f, Idempotent: &t, OpenWorld: &f},
	}
	word := kindWords[r.Kind]
	if r.Comment != "" {
		c.Summary = mcpimport.Summary(r.Comment)
	} else {
		c.Summary = fmt.Sprintf("The %s %s has no description yet (no COMMENT ON %s).", word, r.Qualified(), commentOn[r.Kind])
	}
	c.Description = cards.CutAtWord(description(server, r), cards.MaxDescriptionLen)

	info := SQLInfo{Relation: r.Qualified(), Kind: r.Kind, PrimaryKey: r.PrimaryKey, Unique: r.Unique, ForeignKeys: r.ForeignKeys, Identifies: r.Identifies}
	props := map[string]any{}
	required := []string{}
	for _, col := range r.Columns {
		s := col.Type.Schema(!col.NotNull)
		if col.Comment != "" {
			s["description"] = col.Comment
		}
		s[SQLKey] = ColumnInfo{Type: col.SQLType, Source: col.Source}
		props[col.Name] = s
		required = append(required, col.Name)
		info.Columns = append(info.Columns, col.Name)
	}
	schema := map[string]any{
		"type": "object", "title": r.Qualified(), "properties": props, "required": required,
		"additionalProperties": false, SQLKey: info,
	}
	if r.Comment != "" {
		schema["description"] = r.Comment
	}
	b, err := json.Marshal(schema)
	if err != nil {
		return cards.Card{}, err
	}
	c.OutputSchema = b
	if err := cards.Normalize(&c); err != nil {
		return cards.Card{}, err
	}
	return c, nil
}

// description is the card's text for people and models (and the search):
// what a row means, the columns, keys and joins.
func description(server string, r *Relation) string {
	var b strings.Builder
	if r.Comment != "" {
		b.WriteString(r.Comment)
	} else {
		fmt.Fprintf(&b, "No description: COMMENT ON %s %s IS '...' would say what one row means.", commentOn[r.Kind], r.Qualified())
	}
	b.WriteString("\nColumns: ")
	for i, col := range r.Columns {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%s (%s", col.Name, col.SQLType)
		if col.NotNull {
			b.WriteString(", not null")
		}
		b.WriteString(")")
		if col.Comment != "" {
			b.WriteString(": " + strings.TrimRight(col.Comment, ". "))
		}
	}
	b.WriteString(".")
	if r.PrimaryKey != nil {
		fmt.Fprintf(&b, "\nPrimary key: (%s).", strings.Join(r.PrimaryKey, ", "))
	}
	for _, u := range r.Unique {
		fmt.Fprintf(&b, "\nUnique: (%s).", strings.Join(u, ", "))
	}
	for _, fk := range r.ForeignKeys {
		fmt.Fprintf(&b, "\nJoins to %s(%s) on (%s) (foreign key).", fk.References, strings.Join(fk.ReferencedColumns, ", "), strings.Join(fk.Columns, ", "))
	}
	for _, id := range r.Identifies {
		fmt.Fprintf(&b, "\n(%s) identifies a row of %s(%s).", strings.Join(id.Columns, ", "), id.Table, strings.Join(id.TableKey, ", "))
	}
	fmt.Fprintf(&b, "\nRead it with %s/%s.", server, sqlquery.QueryTool)
	return b.String()
}

// QueryCard is the card that runs SQL on the server's database. Its
// required scopes are given (the union of the views' scopes: a query can
// read any of them). It names no view: a view's scopes may be tightened
// after the import, and no card may name another its reader cannot see.
func QueryCard(tenant, server string, reserved, scopes []string) (cards.Card, error) {
	t, f := true, false
	var d strings.Builder
	d.WriteString("Runs one SELECT or WITH statement in a read-only transaction and returns the rows as JSON objects, " +
		"with row_count and complete; a result cut at the row limit, the byte limit or the time-out says so " +
		"(complete false, incomplete_reason row_limit, byte_limit or timeout). Write parameters as :name and give " +
		"their values in params: they are bound as values, never spliced into the SQL (cast them where the query does not imply a type, :n::int).")
	if len(reserved) > 0 {
		fmt.Fprintf(&d, " The connection binds :%s itself; params cannot set them.", strings.Join(reserved, ", :"))
	}
	fmt.Fprintf(&d, " The views it reads are cards of server %s too (kind sql_view): search for what you need, and describe a view for its columns, keys and joins.", server)
	c := cards.Card{
		Tenant: tenant, Server: server, Name: sqlquery.QueryTool, Kind: cards.KindFunction,
		Summary:        fmt.Sprintf("Run a read-only SQL query (SELECT or WITH) on the %s database and get its rows as JSON.", server),
		Description:    cards.CutAtWord(d.String(), cards.MaxDescriptionLen),
		Tags:           []string{"sql"},
		RequiredScopes: scopes,
		Annotations:    cards.Annotations{ReadOnly: &t, Destructive: &f, Idempotent: &t, OpenWorld: &f},
		InputSchema: json.RawMessage(fmt.Sprintf(`{"type":"object","properties":{`+
			`"sql":{"type":"string","minLength":1,"maxLength":%d,"description":"One SELECT or WITH statement; parameters as :name."},`+
			`"params":{"type":["object","null"],"description":"Values of the :name parameters (string, number, boolean, null; an array or object is passed as JSON text).","propertyNames":{"pattern":"^[A-Za-z_][A-Za-z0-9_]{0,62}$"},"maxProperties":%d}},`+
			`"required":["sql"],"additionalProperties":false}`, sqlquery.MaxSQLBytes, sqlquery.MaxParams)),
		OutputSchema: json.RawMessage(`{"type":"object","properties":{` +
			`"columns":{"type":"array","items":{"type":"string"}},` +
			`"rows":{"type":"array","items":{"type":"object"}},` +
			`"row_count":{"type":"integer","minimum":0},` +
			`"complete":{"type":"boolean"},` +
			`"incomplete_reason":{"enum":["row_limit","byte_limit","timeout"]}},` +
			`"required":["columns","rows","row_count","complete"]}`),
	}
	if err := cards.Normalize(&c); err != nil {
		return cards.Card{}, err
	}
	return c, nil
}

// Plan diffs an import against the stored namespace: the views like any
// import (created, updated, vanished ones revoked, curated fields kept), and
// the query card, whose required scopes are always recomputed as --scopes
// plus the scopes of every view card whose relation is still there, so that
// a caller can query only when it may read everything the query could.
func Plan(tenant, server string, stored, views []cards.Card, skipped []Skipped, reserved []string, opt catalogsync.Options) (catalogsync.Plan, error) {
	opt.Kind = cards.KindSQLView
	for _, s := range skipped {
		opt.Keep = append(opt.Keep, s.Name)
	}
	var storedQuery, storedViews []cards.Card
	for _, c := range stored {
		if c.Name == sqlquery.QueryTool {
			storedQuery = append(storedQuery, c)
		} else {
			storedViews = append(storedViews, c)
		}
	}
	plan, err := catalogsync.Diff(tenant, server, storedViews, views, opt)
	if err != nil {
		return catalogsync.Plan{}, err
	}
	scopes := slices.Clone(opt.Scopes)
	for _, ch := range plan.Changes {
		if ch.Action != catalogsync.Revoke {
			scopes = append(scopes, ch.Card.RequiredScopes...)
		}
	}
	for _, c := range storedViews { // skipped, but still in the database
		if slices.Contains(opt.Keep, c.Name) {
			scopes = append(scopes, c.RequiredScopes...)
		}
	}
	q, err := QueryCard(tenant, server, reserved, scopes)
	if err != nil {
		return catalogsync.Plan{}, err
	}
	qplan, err := catalogsync.Diff(tenant, server, storedQuery, []cards.Card{q},
		catalogsync.Options{Kind: cards.KindFunction, OverrideScopes: true, Reactivate: opt.Reactivate})
	if err != nil {
		return catalogsync.Plan{}, err
	}
	plan.Changes = append(plan.Changes, qplan.Changes...)
	slices.SortFunc(plan.Changes, func(a, b catalogsync.Change) int { return strings.Compare(a.Card.Name, b.Card.Name) })
	return plan, nil
}
