package sqlimport

import (
	"cmp"
	"slices"
	"strconv"
	"strings"

	"github.com/seed0cff8200/cardex/internal/codec/pgjson"
)

// builder derives what the catalogue implies: where a view's columns come
// from, which keys a view keeps, and which table keys its columns name.
type builder struct {
	rels  map[uint32]*rel
	types map[uint32]pgjson.Type
}

// maxNesting bounds how deep view chains are followed.
const maxNesting = 16

func (b *builder) targetFor(r *rel, attnum int) (target, bool) {
	for _, t := range r.targets {
		if t.resno == attnum {
			return t, true
		}
	}
	return target{}, false
}

// isView: the relation's rows come from a stored query.
func (r *rel) isView() bool { return r.relkind == "v" || r.relkind == "m" }

// source follows a column through views down to the table column it is a
// plain reference to.
func (b *builder) source(r *rel, attnum, depth int) (ref, bool) {
	if !r.isView() {
		return ref{r.oid, attnum}, true
	}
	t, ok := b.targetFor(r, attnum)
	if !ok || t.origTbl == 0 || depth > maxNesting {
		return ref{}, false
	}
	next := b.rels[t.origTbl]
	if next == nil {
		return ref{}, false
	}
	return b.source(next, t.origCol, depth+1)
}

// base is the one relation a simple (automatically updatable) view reads.
func (b *builder) base(r *rel) *rel {
	if r.relkind != "v" || !r.simple {
		return nil
	}
	var oid uint32
	for _, t := range r.targets {
		if t.origTbl == 0 {
			continue
		}
		if oid != 0 && t.origTbl != oid {
			return nil
		}
		oid = t.origTbl
	}
	return b.rels[oid]
}

// keys are the relation's unique keys as its own column numbers. A view
// keeps its base relation's keys only when it is simple: then every row of
// the view is one row of the base relation.
func (b *builder) keys(r *rel, depth int) []key {
	if !r.isView() || r.relkind == "m" {
		return r.keys // tables' and materialized views' unique indexes
	}
	if r.keysDone || depth > maxNesting {
		return r.viewKeys
	}
	r.keysDone = true
	base := b.base(r)
	if base == nil {
		return nil
	}
	for _, k := range b.keys(base, depth+1) {
		var cols []int
		for _, c := range k.cols {
			found := 0
			for _, t := range r.targets {
				if t.origTbl == base.oid && t.origCol == c {
					found = t.resno
					break
				}
			}
			if found == 0 {
				cols = nil
				break
			}
			cols = append(cols, found)
		}
		if cols != nil {
			r.viewKeys = append(r.viewKeys, key{primary: k.primary, cols: cols})
		}
	}
	return r.viewKeys
}

// notNull: a table's NOT NULL, carried through views that join with inner
// joins only (a plain reference to a NOT NULL column stays not null there).
// A materialized view's columns are not traced: its rows are a snapshot.
func (b *builder) notNull(r *rel, attnum, depth int) bool {
	if !r.isView() {
		c := r.cols[attnum]
		return c != nil && c.notNull
	}
	if r.relkind != "v" || !r.innerOnly || depth > maxNesting {
		return false
	}
	t, ok := b.targetFor(r, attnum)
	if !ok || t.origTbl == 0 {
		return false
	}
	next := b.rels[t.origTbl]
	return next != nil && b.notNull(next, t.origCol, depth+1)
}

func (b *builder) colName(relOID uint32, attnum int) string {
	if r := b.rels[relOID]; r != nil {
		if c := r.cols[attnum]; c != nil {
			return c.name
		}
	}
	return "#" + strconv.Itoa(attnum)
}

func (b *builder) relName(oid uint32) string {
	if r := b.rels[oid]; r != nil {
		return quoteIdent(r.schema) + "." + quoteIdent(r.name)
	}
	return "#" + strconv.FormatUint(uint64(oid), 10)
}

// entity is a key of a table: rows that agree on it are the same row.
type entity struct {
	rel  uint32
	cols []int // sorted
}

func (e entity) id() string {
	var s strings.Builder
	s.WriteString(strconv.FormatUint(uint64(e.rel), 10))
	for _, c := range e.cols {
		s.WriteString("," + strconv.Itoa(c))
	}
	return s.String()
}

// exposed maps the table columns a relation's columns come from to its
// column names (the first, when several carry the same one).
func (b *builder) exposed(r *rel) map[ref]string {
	out := map[ref]string{}
	for _, n := range r.order {
		if src, ok := b.source(r, n, 0); ok {
			if _, dup := out[src]; !dup {
				out[src] = r.cols[n].name
			}
		}
	}
	return out
}

// entities lists the table keys a relation exposes (its columns come from
// all of a key's columns: they name one row of the table) and the foreign
// keys among its columns.
func (b *builder) entities(r *rel, exp map[ref]string) ([]Identifies, []ForeignKey) {
	var ids []Identifies
	seen := map[string]bool{}
	var fks []ForeignKey
	tables := map[uint32]bool{}
	for src := range exp {
		tables[src.rel] = true
	}
	order := make([]uint32, 0, len(tables))
	for t := range tables {
		order = append(order, t)
	}
	slices.Sort(order)
	for _, toid := range order {
		t := b.rels[toid]
		if t == nil {
			continue
		}
		for _, k := range t.keys {
			e := entity{rel: toid, cols: slices.Sorted(slices.Values(k.cols))}
			cols, ok := pick(exp, toid, e.cols)
			if !ok || seen[e.id()] {
				continue
			}
			seen[e.id()] = true
			id := Identifies{Columns: cols, Table: b.relName(toid)}
			for _, c := range e.cols {
				id.TableKey = append(id.TableKey, b.colName(toid, c))
			}
			ids = append(ids, id)
		}
		for _, f := range t.fks {
			cols, ok := pick(exp, toid, f.cols)
			if !ok {
				continue
			}
			fkey := ForeignKey{Constraint: f.name, Columns: cols, References: quoteIdent(f.refSchema) + "." + quoteIdent(f.refName)}
			for _, c := range f.refCols {
				fkey.ReferencedColumns = append(fkey.ReferencedColumns, b.colName(f.refRel, c))
			}
			fks = append(fks, fkey)
		}
	}
	slices.SortFunc(ids, func(x, y Identifies) int {
		return cmp.Or(cmp.Compare(x.Table, y.Table), cmp.Compare(strings.Join(x.TableKey, ","), strings.Join(y.TableKey, ",")))
	})
	return ids, fks
}

// pick returns the relation's column names for the table columns, or false
// when it does not expose all of them.
func pick(exp map[ref]string, table uint32, cols []int) ([]string, bool) {
	out := make([]string, 0, len(cols))
	for _, c := range cols {
		n, ok := exp[ref{table, c}]
		if !ok {
			return nil, false
		}
		out = append(out, n)
	}
	return out, true
}

func build(rels map[uint32]*rel, imported []*rel, types map[uint32]pgjson.Type) []Relation {
	b := &builder{rels: rels, types: types}
	out := make([]Relation, 0, len(imported))
	for _, r := range imported {
		rr := Relation{OID: r.oid, Schema: r.schema, Name: r.name, Kind: relkinds[r.relkind], Comment: r.comment, Readable: r.readable}
		for _, n := range r.order {
			c := r.cols[n]
			oc := Column{Name: c.name, SQLType: c.sqlType, Comment: c.comment, Type: types[c.typ], NotNull: b.notNull(r, n, 0)}
			if r.isView() {
				if src, ok := b.source(r, n, 0); ok {
					oc.Source = b.relName(src.rel) + "." + quoteIdent(b.colName(src.rel, src.col))
					// A view's column means what its table column means,
					// unless the view says otherwise.
					if oc.Comment == "" {
						if sc := rels[src.rel].cols[src.col]; sc != nil {
							oc.Comment = sc.comment
						}
					}
				}
			}
			rr.Columns = append(rr.Columns, oc)
		}
		for _, k := range b.keys(r, 0) {
			var cols []string
			for _, c := range k.cols {
				cols = append(cols, b.colName(r.oid, c))
			}
			if k.primary && rr.PrimaryKey == nil {
				rr.PrimaryKey = cols
			} else {
				rr.Unique = append(rr.Unique, cols)
			}
		}
		rr.Identifies, rr.ForeignKeys = b.entities(r, b.exposed(r))
		out = append(out, rr)
	}
	return out
}
