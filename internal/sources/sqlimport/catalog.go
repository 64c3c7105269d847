// Package sqlimport turns a PostgreSQL database's views (and tables, when
// asked) into sql_view cards: columns with types and nullability, keys,
// foreign keys and the joins between the imported relations, and the
// descriptions kept with COMMENT ON; plus the server's `query` card, which
// runs SQL on them through the gateway.
//
// Everything is read from pg_catalog rather than information_schema: the
// latter shows constraints only to a table's owner or to roles with more
// than SELECT on it (so nothing to the read-only role an import should
// run as), and it leaves out materialized views.
package sqlimport

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/seed0cff8200/cardex/internal/codec/pgjson"
)

// Options say what to import.
type Options struct {
	// Schemas to read (default public).
	Schemas []string
	// Tables: import tables too, not only views and materialized views.
	Tables bool
}

// Relation kinds, as the cards name them.
const (
	KindView             = "view"
	KindMaterializedView = "materialized_view"
	KindTable            = "table"
	KindPartitionedTable = "partitioned_table"
	KindForeignTable     = "foreign_table"
)

var relkinds = map[string]string{"v": KindView, "m": KindMaterializedView, "r": KindTable, "p": KindPartitionedTable, "f": KindForeignTable}

// Relation is one imported view or table.
type Relation struct {
	OID     uint32
	Schema  string
	Name    string
	Kind    string
	Comment string
	Columns []Column
	// PrimaryKey and Unique are column names; for a view they are those of
	// its base table when the view is simple enough to keep them (one base
	// relation, no aggregation, DISTINCT, set operation or LIMIT: what
	// PostgreSQL calls automatically updatable).
	PrimaryKey  []string
	Unique      [][]string
	ForeignKeys []ForeignKey
	Identifies  []Identifies
	// Readable: the importing role may SELECT it.
	Readable bool
}

// Qualified is schema.name, quoted where SQL needs it.
func (r *Relation) Qualified() string { return quoteIdent(r.Schema) + "." + quoteIdent(r.Name) }

// Column is one column.
type Column struct {
	Name    string
	SQLType string // format_type: numeric(10,2), text[], inventory.mood
	NotNull bool
	Comment string
	Type    pgjson.Type
	// Source is the table column a view's column is a plain reference to
	// (schema.table.column), followed through nested views.
	Source string
}

// ForeignKey is a foreign key of the relation (for a view: of its base
// tables, when the view exposes all of the key's columns).
type ForeignKey struct {
	Constraint        string   `json:"constraint"`
	Columns           []string `json:"columns"`
	References        string   `json:"references"`
	ReferencedColumns []string `json:"referenced_columns"`
}

// Identifies says that the relation's columns name one row of a table by
// one of its keys. Two relations join on columns that identify, or
// reference (ForeignKey), the same key of the same table. The join is said
// through the table rather than as a pair of cards, so that no card names
// another, which its reader may not be allowed to see.
type Identifies struct {
	Columns  []string `json:"columns"`
	Table    string   `json:"table"`
	TableKey []string `json:"table_key"`
}

// rel is what the catalogue says about one relation, imported or not.
type rel struct {
	oid          uint32
	schema, name string
	relkind      string
	comment      string
	evAction     string
	simple       bool // an automatically updatable view without rules
	readable     bool
	cols         map[int]*col
	order        []int
	keys         []key // unique, primary first
	fks          []fk
	targets      []target
	innerOnly    bool
	imported     bool
	keysDone     bool
	viewKeys     []key
}

type col struct {
	num     int
	name    string
	typ     uint32
	sqlType string
	notNull bool
	comment string
}

type key struct {
	primary bool
	cols    []int
}

type fk struct {
	name      string
	cols      []int
	refRel    uint32
	refCols   []int
	refSchema string
	refName   string
}

// ref is a column of a relation.
type ref struct {
	rel uint32
	col int
}

// ReadURL connects to the database at url and reads it (see Read).
func ReadURL(ctx context.Context, url string, o Options) ([]Relation, error) {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("connect to the database: %w", err)
	}
	defer conn.Close(context.Background())
	return Read(ctx, conn, o)
}

// Read reads the relations of the schemas in one consistent, read-only
// snapshot. Relations the role may not SELECT are returned with Readable
// false (their cards cannot be queried through this role).
func Read(ctx context.Context, conn *pgx.Conn, o Options) ([]Relation, error) {
	if len(o.Schemas) == 0 {
		o.Schemas = []string{"public"}
	}
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, err
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(ctx, "SET LOCAL statement_timeout = 60000"); err != nil {
		return nil, err
	}
	var found []string
	if err := collect(ctx, tx, &found, `SELECT nspname::text FROM pg_catalog.pg_namespace WHERE nspname = ANY($1::text[])`, o.Schemas); err != nil {
		return nil, err
	}
	for _, s := range o.Schemas {
		if !slices.Contains(found, s) {
			return nil, fmt.Errorf("schema %q does not exist (or this role cannot see it)", s)
		}
	}
	kinds := []string{"v", "m"}
	if o.Tables {
		kinds = append(kinds, "r", "p", "f")
	}
	rels := map[uint32]*rel{}
	var imported []*rel
	if err := readRels(ctx, tx, rels, `n.nspname = ANY($1::text[]) AND c.relkind::text = ANY($2::text[]) AND NOT c.relispartition`, o.Schemas, kinds); err != nil {
		return nil, err
	}
	for _, r := range rels {
		r.imported = true
		imported = append(imported, r)
	}
	slices.SortFunc(imported, func(a, b *rel) int { return strings.Compare(a.schema+"."+a.name, b.schema+"."+b.name) })

	// The base relations the views read, through nested views (their
	// lineage), and the tables the foreign keys of those point to (for
	// their names).
	lineage := map[uint32]bool{}
	for _, r := range imported {
		lineage[r.oid] = true
	}
	for round := 0; ; round++ {
		if round == 12 {
			return nil, fmt.Errorf("views nested more than 12 deep")
		}
		var missing []int64
		changed := false
		want := func(oid uint32, viaLineage bool) {
			if oid == 0 {
				return
			}
			if viaLineage && !lineage[oid] {
				lineage[oid], changed = true, true
			}
			if rels[oid] == nil && !slices.Contains(missing, int64(oid)) {
				missing = append(missing, int64(oid))
			}
		}
		for oid := range lineage {
			r := rels[oid]
			if r == nil || r.targets != nil || r.evAction == "" {
				continue
			}
			q, err := viewTargets(r.evAction)
			if err != nil {
				return nil, fmt.Errorf("%s.%s: %w", r.schema, r.name, err)
			}
			r.targets, r.innerOnly = append([]target{}, q.targets...), q.innerOnly
			for _, t := range r.targets {
				want(t.origTbl, true)
			}
		}
		if err := readDetails(ctx, tx, rels); err != nil {
			return nil, err
		}
		for oid := range lineage {
			if r := rels[oid]; r != nil {
				for _, f := range r.fks {
					want(f.refRel, false)
				}
			}
		}
		if len(missing) == 0 && !changed {
			break
		}
		if len(missing) > 0 {
			if err := readRels(ctx, tx, rels, `c.oid = ANY($1::int8[]::oid[])`, missing); err != nil {
				return nil, err
			}
		}
	}
	if err := readDetails(ctx, tx, rels); err != nil {
		return nil, err
	}
	var typeOIDs []uint32
	for _, r := range imported {
		for _, c := range r.cols {
			typeOIDs = append(typeOIDs, c.typ)
		}
	}
	types := map[uint32]pgjson.Type{}
	if err := pgjson.Load(ctx, tx, types, typeOIDs); err != nil {
		return nil, err
	}
	return build(rels, imported, types), nil
}

func collect(ctx context.Context, tx pgx.Tx, out *[]string, sql string, args ...any) error {
	rows, err := tx.Query(ctx, sql, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return err
		}
		*out = append(*out, s)
	}
	return rows.Err()
}

func readRels(ctx context.Context, tx pgx.Tx, rels map[uint32]*rel, where string, args ...any) error {
	rows, err := tx.Query(ctx, `SELECT c.oid::int8, n.nspname::text, c.relname::text, c.relkind::text,
		COALESCE(pg_catalog.obj_description(c.oid, 'pg_class'), ''),
		COALESCE((SELECT r.ev_action::text FROM pg_catalog.pg_rewrite r WHERE r.ev_class = c.oid AND r.rulename = '_RETURN'), ''),
		c.relkind = 'v' AND (pg_catalog.pg_relation_is_updatable(c.oid, false) & 16) <> 0
			AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_rewrite r WHERE r.ev_class = c.oid AND r.rulename <> '_RETURN'),
		pg_catalog.has_table_privilege(c.oid, 'SELECT')
		FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
		WHERE `+where+` ORDER BY 2, 3`, args...)
	if err != nil {
		return fmt.Errorf("read pg_class: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var oid int64
		r := &rel{cols: map[int]*col{}}
		if err := rows.Scan(&oid, &r.schema, &r.name, &r.relkind, &r.comment, &r.evAction, &r.simple, &r.readable); err != nil {
			return fmt.Errorf("read pg_class: %w", err)
		}
		r.oid = uint32(oid)
		if rels[r.oid] == nil {
			rels[r.oid] = r
		}
	}
	return rows.Err()
}

// readDetails reads columns, unique keys and foreign keys of the relations
// that do not have them yet.
func readDetails(ctx context.Context, tx pgx.Tx, rels map[uint32]*rel) error {
	var oids []int64
	for _, r := range rels {
		if len(r.order) == 0 {
			oids = append(oids, int64(r.oid))
		}
	}
	if len(oids) == 0 {
		return nil
	}
	rows, err := tx.Query(ctx, `SELECT a.attrelid::int8, a.attnum::int4, a.attname::text, a.atttypid::int8,
		pg_catalog.format_type(a.atttypid, a.atttypmod), a.attnotnull, COALESCE(pg_catalog.col_description(a.attrelid, a.attnum), '')
		FROM pg_catalog.pg_attribute a WHERE a.attrelid = ANY($1::int8[]::oid[]) AND a.attnum > 0 AND NOT a.attisdropped
		ORDER BY 1, 2`, oids)
	if err != nil {
		return fmt.Errorf("read pg_attribute: %w", err)
	}
	for rows.Next() {
		var relid, typ int64
		c := &col{}
		if err := rows.Scan(&relid, &c.num, &c.name, &typ, &c.sqlType, &c.notNull, &c.comment); err != nil {
			rows.Close()
			return fmt.Errorf("read pg_attribute: %w", err)
		}
		c.typ = uint32(typ)
		r := rels[uint32(relid)]
		r.cols[c.num] = c
		r.order = append(r.order, c.num)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read pg_attribute: %w", err)
	}
	rows, err = tx.Query(ctx, `SELECT i.indrelid::int8, i.indisprimary,
		ARRAY(SELECT k::int4 FROM unnest(i.indkey) WITH ORDINALITY AS u(k, o) WHERE o <= i.indnkeyatts ORDER BY o)
		FROM pg_catalog.pg_index i JOIN pg_catalog.pg_class ic ON ic.oid = i.indexrelid
		WHERE i.indrelid = ANY($1::int8[]::oid[]) AND i.indisunique AND i.indisvalid AND i.indpred IS NULL AND i.indexprs IS NULL
		ORDER BY 1, 2 DESC, ic.relname`, oids)
	if err != nil {
		return fmt.Errorf("read pg_index: %w", err)
	}
	for rows.Next() {
		var relid int64
		var k key
		if err := rows.Scan(&relid, &k.primary, &k.cols); err != nil {
			rows.Close()
			return fmt.Errorf("read pg_index: %w", err)
		}
		r := rels[uint32(relid)]
		r.keys = append(r.keys, k)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read pg_index: %w", err)
	}
	rows, err = tx.Query(ctx, `SELECT c.conrelid::int8, c.conname::text, c.conkey::int4[], c.confrelid::int8, c.confkey::int4[],
		fn.nspname::text, fc.relname::text
		FROM pg_catalog.pg_constraint c JOIN pg_catalog.pg_class fc ON fc.oid = c.confrelid
		JOIN pg_catalog.pg_namespace fn ON fn.oid = fc.relnamespace
		WHERE c.contype = 'f' AND c.conrelid = ANY($1::int8[]::oid[]) ORDER BY 1, 2`, oids)
	if err != nil {
		return fmt.Errorf("read pg_constraint: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var relid, ref int64
		var f fk
		if err := rows.Scan(&relid, &f.name, &f.cols, &ref, &f.refCols, &f.refSchema, &f.refName); err != nil {
			return fmt.Errorf("read pg_constraint: %w", err)
		}
		f.refRel = uint32(ref)
		r := rels[uint32(relid)]
		r.fks = append(r.fks, f)
	}
	return rows.Err()
}

// quoteIdent quotes an identifier unless it is a plain lower-case one.
func quoteIdent(s string) string {
	plain := s != ""
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || (c >= 'a' && c <= 'z') || (i > 0 && c >= '0' && c <= '9')) {
			plain = false
			break
		}
	}
	if plain && !reserved[s] {
		return s
	}
	return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
}

// reserved are SQL key words that cannot name a table or column unquoted.
var reserved = map[string]bool{"all": true, "analyse": true, "analyze": true, "and": true, "any": true, "array": true, "as": true,
	"asc": true, "asymmetric": true, "both": true, "case": true, "cast": true, "check": true, "collate": true, "column": true,
	"constraint": true, "create": true, "current_catalog": true, "current_date": true, "current_role": true, "current_time": true,
	"current_timestamp": true, "current_user": true, "default": true, "deferrable": true, "desc": true, "distinct": true, "do": true,
	"else": true, "end": true, "except": true, "false": true, "fetch": true, "for": true, "foreign": true, "from": true, "grant": true,
	"group": true, "having": true, "in": true, "initially": true, "intersect": true, "into": true, "lateral": true, "leading": true,
	"limit": true, "localtime": true, "localtimestamp": true, "not": true, "null": true, "offset": true, "on": true, "only": true,
	"or": true, "order": true, "placing": true, "primary": true, "references": true, "returning": true, "select": true,
	"session_user": true, "some": true, "symmetric": true, "system_user": true, "table": true, "then": true, "to": true,
	"trailing": true, "true": true, "union": true, "unique": true, "user": true, "using": true, "variadic": true, "when": true,
	"where": true, "window": true, "with": true}
