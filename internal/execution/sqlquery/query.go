// Package sqlquery runs an agent's query on an SQL upstream: one SELECT or
// WITH statement with :name parameters bound as values, as a cursor inside a
// READ ONLY transaction with a statement timeout, fetched up to the row and
// byte limits of the upstreams file, every value normalised to JSON by
// pgjson. A result that stopped at a limit says so.
package sqlquery

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/seed0cff8200/cardex/cards"
	"github.com/seed0cff8200/cardex/internal/codec/pgjson"
	"github.com/seed0cff8200/cardex/internal/execution/upstream"
)

// QueryTool is the name of the card that runs queries on an SQL upstream.
const QueryTool = "query"

// Why a result is incomplete.
const (
	IncompleteRowLimit  = "row_limit"
	IncompleteByteLimit = "byte_limit"
	IncompleteTimeout   = "timeout"
)

// fetchBatch is how many rows one FETCH asks for. A FETCH hands over its
// rows when it has them all, so a statement timeout loses the rows of the
// batch it interrupts and keeps those of the batches before.
const fetchBatch = 100

// Args are the query card's arguments.
type Args struct {
	SQL    string                     `json:"sql"`
	Params map[string]json.RawMessage `json:"params,omitempty"`
}

// Result is a query's answer. Rows is a JSON array of objects, one per row,
// keyed by column name in column order.
type Result struct {
	Columns  []string
	Rows     json.RawMessage
	RowCount int
	Complete bool
	// IncompleteReason is row_limit, byte_limit or timeout when not Complete.
	IncompleteReason string
}

// JSON is the result as the query card's output: {"columns", "rows",
// "row_count", "complete", "incomplete_reason"}.
func (r Result) JSON() json.RawMessage {
	var b bytes.Buffer
	b.WriteString(`{"columns":[`)
	for i, c := range r.Columns {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(pgjson.AppendString(nil, c))
	}
	b.WriteString(`],"rows":`)
	b.Write(r.Rows)
	fmt.Fprintf(&b, `,"row_count":%d,"complete":%t`, r.RowCount, r.Complete)
	if !r.Complete {
		fmt.Fprintf(&b, `,"incomplete_reason":%q`, r.IncompleteReason)
	}
	b.WriteByte('}')
	return b.Bytes()
}

// Pools holds a connection pool per SQL upstream, opened on first use.
// Safe for concurrent use.
type Pools struct {
	cfg upstream.Config
	log *slog.Logger

	mu     sync.Mutex
	pools  map[string]*pool
	closed bool
}

type pool struct {
	p     *pgxpool.Pool
	mu    sync.Mutex
	types map[uint32]pgjson.Type
}

// New keeps the SQL entries of cfg (no connection is made yet).
func New(cfg upstream.Config, log *slog.Logger) *Pools {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Pools{cfg: cfg, log: log, pools: map[string]*pool{}}
}

// Has reports whether (tenant, server) is an SQL upstream.
func (p *Pools) Has(tenant, server string) bool {
	if p == nil {
		return false
	}
	u, ok := p.cfg.Find(tenant, server)
	return ok && u.SQL != nil
}

// Len is the number of SQL upstreams.
func (p *Pools) Len() int {
	n := 0
	for _, u := range p.cfg.Upstreams {
		if u.SQL != nil {
			n++
		}
	}
	return n
}

// Close closes every pool.
func (p *Pools) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for k, pl := range p.pools {
		pl.p.Close()
		delete(p.pools, k)
	}
}

func (p *Pools) pool(u upstream.Upstream) (*pool, error) {
	key := u.Tenant + "/" + u.Server
	p.mu.Lock()
	defer p.mu.Unlock()
	if pl := p.pools[key]; pl != nil {
		return pl, nil
	}
	if p.closed {
		return nil, errors.New("the SQL upstreams are closed")
	}
	url, err := u.SQL.ConnString()
	if err != nil {
		return nil, err
	}
	pc, err := pgxpool.ParseConfig(url)
	if err != nil {
		// The URL may hold a password: say what is wrong, not what it is.
		return nil, fmt.Errorf("sql.database_url of server %q is not a valid PostgreSQL URL", u.Server)
	}
	pc.MaxConns = u.SQL.PoolSize()
	pp, err := pgxpool.NewWithConfig(context.Background(), pc)
	if err != nil {
		return nil, err
	}
	pl := &pool{p: pp, types: map[uint32]pgjson.Type{}}
	p.pools[key] = pl
	p.log.Info("sql upstream pool opened", "server", u.Server, "tenant", u.Tenant, "max_conns", pc.MaxConns)
	return pl, nil
}

// DecodeArgs reads the query card's arguments strictly.
func DecodeArgs(raw json.RawMessage) (Args, error) {
	var a Args
	if len(bytes.TrimSpace(raw)) == 0 {
		raw = json.RawMessage("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&a); err != nil {
		return Args{}, refuse(RefusedArguments, "arguments: %v (want {\"sql\": \"SELECT ...\", \"params\": {...}})", err)
	}
	if strings.TrimSpace(a.SQL) == "" {
		return Args{}, refuse(RefusedArguments, "arguments: sql is required")
	}
	return a, nil
}

// Bind parses the statement and lines up its parameters' values as
// PostgreSQL text (nil for NULL): the caller's params, and the reserved
// ones the connection binds. A caller's param that names a reserved one is
// refused, as are params the query does not use and :names without a value.
func Bind(a Args, reserved map[string]string) (Statement, [][]byte, error) {
	st, err := Parse(a.SQL)
	if err != nil {
		return Statement{}, nil, err
	}
	if len(a.Params) > MaxParams {
		return Statement{}, nil, refuse(RefusedArguments, "params has %d entries; the limit is %d", len(a.Params), MaxParams)
	}
	for _, k := range slices.Sorted(maps.Keys(a.Params)) {
		if _, ok := reserved[k]; ok {
			return Statement{}, nil, refuse(RefusedReserved, "params.%s: %q is reserved: this connection binds its value", k, k)
		}
		if !upstream.ParamName.MatchString(k) {
			return Statement{}, nil, refuse(RefusedArguments, "params: %q is not a parameter name ([A-Za-z_][A-Za-z0-9_]{0,62})", cards.Cut(k, 70))
		}
		if !slices.Contains(st.Params, k) {
			return Statement{}, nil, refuse(RefusedArguments, "params.%s: the query has no :%s", k, k)
		}
	}
	values := make([][]byte, len(st.Params))
	for i, name := range st.Params {
		if v, ok := reserved[name]; ok {
			values[i] = []byte(v)
			continue
		}
		raw, ok := a.Params[name]
		if !ok {
			return Statement{}, nil, refuse(RefusedArguments, "the query uses :%s, and params has no %q", name, name)
		}
		v, err := textValue(raw)
		if err != nil {
			return Statement{}, nil, refuse(RefusedArguments, "params.%s: %v", name, err)
		}
		values[i] = v
	}
	return st, values, nil
}

// textValue is a JSON value as the text PostgreSQL parses it: a string as
// it is, a number as written, a boolean as true/false, null as NULL, an
// array or object as its JSON text (cast it with ::jsonb).
func textValue(raw json.RawMessage) ([]byte, error) {
	raw = bytes.TrimSpace(raw)
	switch {
	case len(raw) == 0:
		return nil, fmt.Errorf("no value")
	case string(raw) == "null":
		return nil, nil
	case raw[0] == '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, err
		}
		return []byte(s), nil
	case raw[0] == '{' || raw[0] == '[':
		var b bytes.Buffer
		if err := json.Compact(&b, raw); err != nil {
			return nil, err
		}
		return b.Bytes(), nil
	}
	return raw, nil // a number or a boolean, as written
}

// Query runs one query on the SQL upstream of (tenant, server). It returns
// a *Refusal when the query was not run (or the database refused it as a
// write), an *SQLError when it failed, an *upstream.CallError when the
// database could not be reached, and otherwise the rows, complete or cut at
// a limit. closed are relations (SQL names, schema-qualified) that no query
// may read — views whose cards are revoked or pending: while the query role
// may still SELECT any of them, no query runs (RefusedClosedView). A query
// cannot be checked for the relations it reads (views read other views,
// functions read tables), so the database's grants decide, checked in the
// query's own transaction.
func (p *Pools) Query(ctx context.Context, tenant, server string, raw json.RawMessage, closed ...string) (Result, error) {
	u, ok := p.cfg.Find(tenant, server)
	if !ok || u.SQL == nil {
		return Result{}, &upstream.CallError{Kind: upstream.KindNotRegistered, Server: server}
	}
	a, err := DecodeArgs(raw)
	if err != nil {
		return Result{}, err
	}
	reserved, err := u.SQL.ReservedValues()
	if err != nil {
		return Result{}, &upstream.CallError{Kind: upstream.KindNotRegistered, Server: server, Err: err}
	}
	st, values, err := Bind(a, reserved)
	if err != nil {
		return Result{}, err
	}
	pl, err := p.pool(u)
	if err != nil {
		return Result{}, &upstream.CallError{Kind: upstream.KindNotRegistered, Server: server, Err: err}
	}
	timeout := u.SQL.Timeout()
	// The database's statement_timeout ends a query in time; this deadline
	// is the backstop for a database that ignores it or does not answer.
	ctx, cancel := context.WithTimeout(ctx, timeout+2*time.Second)
	defer cancel()
	conn, err := pl.p.Acquire(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return Result{}, &upstream.CallError{Kind: upstream.KindTimeout, Server: server, Err: errors.New("no database connection within the timeout")}
		}
		p.log.Warn("sql upstream: no connection", "server", server, "tenant", tenant, "err", err)
		return Result{}, &upstream.CallError{Kind: upstream.KindUnreachable, Server: server, Err: connectError(err)}
	}
	r := run{pc: conn.Conn().PgConn(), pl: pl, conn: conn.Conn(), timeout: timeout,
		maxRows: u.SQL.RowLimit(), maxBytes: u.SQL.ByteLimit(), closed: closed}
	res, err := r.query(ctx, st, values)
	if !r.end() {
		_ = conn.Conn().Close(context.Background()) // never reused in an unknown state
	}
	conn.Release()
	if err != nil {
		var re *Refusal
		var se *SQLError
		var pe *pgconn.PgError
		switch {
		case errors.As(err, &re), errors.As(err, &se):
			return Result{}, err
		case errors.As(err, &pe):
			return Result{}, classify(err)
		case ctx.Err() != nil:
			return Result{}, &upstream.CallError{Kind: upstream.KindTimeout, Server: server, Err: ctx.Err()}
		}
		p.log.Warn("sql upstream: the query's connection failed", "server", server, "tenant", tenant, "err", err)
		return Result{}, &upstream.CallError{Kind: upstream.KindUnreachable, Server: server, Err: connectError(err)}
	}
	return res, nil
}

// connectError drops what pgconn's and the network's errors say about the
// connection (host, address, user) down to the cause: an agent sees it.
func connectError(err error) error {
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) {
		return errors.New("could not connect to the database")
	}
	return errors.New(upstream.Reason(err))
}

// run is one query on one connection.
type run struct {
	pc       *pgconn.PgConn
	conn     *pgx.Conn
	pl       *pool
	timeout  time.Duration
	maxRows  int
	maxBytes int64
	closed   []string
	began    bool
}

func (r *run) query(ctx context.Context, st Statement, values [][]byte) (Result, error) {
	start := time.Now()
	deadline := start.Add(r.timeout)
	setup := fmt.Sprintf("BEGIN TRANSACTION READ ONLY; SET LOCAL statement_timeout = %d; %s",
		r.timeout.Milliseconds(), pgjson.Settings)
	// No message larger than a result may be is read at all: a row is one
	// message, read whole before any of it can be looked at, so without
	// this a single 120 MB value costs 120 MB (and its JSON as much again)
	// before the byte limit could cut it. A larger message ends the read
	// with an error that closes the connection (fetched says byte_limit).
	r.pc.Frontend().SetMaxBodyLen(maxMessage(r.maxBytes))
	r.began = true
	if _, err := r.pc.Exec(ctx, setup).ReadAll(); err != nil {
		return Result{}, err
	}
	if err := r.checkClosed(ctx); err != nil {
		return Result{}, err
	}
	// One statement only: the extended protocol refuses a second one, and
	// DECLARE takes a query (SELECT, WITH, VALUES) and nothing else.
	_, err := r.pc.ExecParams(ctx, "DECLARE cardex_rows NO SCROLL CURSOR FOR\n"+st.SQL, values, nil, nil, nil).Close()
	var fields []pgconn.FieldDescription
	var types []pgjson.Type
	if err == nil {
		fields, types, err = r.describe(ctx)
	}
	if err != nil {
		if r.isTimeout(err, deadline) {
			return Result{Rows: json.RawMessage("[]"), Columns: []string{}, IncompleteReason: IncompleteTimeout}, nil
		}
		return Result{}, classify(err)
	}
	res := Result{Columns: make([]string, len(fields))}
	names := make([][]byte, len(fields))
	seen := map[string]bool{}
	for i, f := range fields {
		if seen[f.Name] {
			return Result{}, &SQLError{Message: fmt.Sprintf("the result has two columns named %q: give them distinct names with AS", f.Name)}
		}
		seen[f.Name] = true
		res.Columns[i] = f.Name
		names[i] = pgjson.AppendString(nil, f.Name)
	}
	rows := []byte{'['}
	var row []byte
	for {
		left := time.Until(deadline)
		if left <= 0 {
			res.IncompleteReason = IncompleteTimeout
			break
		}
		want := min(fetchBatch, r.maxRows+1-res.RowCount)
		mrr := r.pc.Exec(ctx, fmt.Sprintf("SET LOCAL statement_timeout = %d; FETCH FORWARD %d FROM cardex_rows", max(left.Milliseconds(), 1), want))
		got, stop := 0, ""
		var ferr error
		for mrr.NextResult() {
			rr := mrr.ResultReader()
			for rr.NextRow() {
				got++
				if stop != "" {
					continue
				}
				if res.RowCount == r.maxRows {
					stop = IncompleteRowLimit
					continue
				}
				row = row[:0]
				row = append(row, '{')
				for i, v := range rr.Values() {
					if i > 0 {
						row = append(row, ',')
					}
					row = append(row, names[i]...)
					row = append(row, ':')
					// Room for the value's JSON at once (at most 6 bytes a
					// byte of its text, \u0001): growing a large slice step
					// by step allocates several times its final size.
					row = slices.Grow(row, 6*len(v)+8)
					row = types[i].AppendValue(row, v)
					if int64(len(rows)+len(row)+2) > r.maxBytes {
						break // the row cannot fit: encode no more of it
					}
				}
				row = append(row, '}')
				if int64(len(rows)+len(row)+2) > r.maxBytes {
					stop = IncompleteByteLimit
					continue
				}
				if res.RowCount > 0 {
					rows = append(rows, ',')
				}
				rows = append(rows, row...)
				res.RowCount++
			}
			if _, err := rr.Close(); err != nil && ferr == nil {
				ferr = err
			}
		}
		if err := mrr.Close(); err != nil && ferr == nil {
			ferr = err
		}
		if ferr != nil {
			if r.isTimeout(ferr, deadline) {
				res.IncompleteReason = IncompleteTimeout
				break
			}
			if tooLarge := (*pgproto3.ExceededMaxBodyLenErr)(nil); errors.As(ferr, &tooLarge) {
				res.IncompleteReason = IncompleteByteLimit // the rows before it are kept
				break
			}
			return Result{}, classify(ferr)
		}
		if stop != "" {
			res.IncompleteReason = stop
			break
		}
		if got < want {
			res.Complete = true
			break
		}
	}
	res.Rows = append(rows, ']')
	return res, nil
}

// maxMessage is the largest protocol message a query with the byte limit
// maxBytes reads: a row whose text is longer cannot fit in the result as
// JSON (which is longer than the text, but for bytea: base64 is 2/3 of its
// hex text, so such a row is cut a little early), plus room for the
// messages that are not rows.
func maxMessage(maxBytes int64) int {
	return int(min(maxBytes, 1<<30-1<<16)) + 1<<16
}

// checkClosed refuses the query when the role may read a closed relation
// (one that exists and on which it holds SELECT, on the whole or a column).
func (r *run) checkClosed(ctx context.Context) error {
	if len(r.closed) == 0 {
		return nil
	}
	var arr bytes.Buffer // a text[] literal
	arr.WriteByte('{')
	for i, n := range r.closed {
		if i > 0 {
			arr.WriteByte(',')
		}
		arr.WriteString(`"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(n) + `"`)
	}
	arr.WriteByte('}')
	res := r.pc.ExecParams(ctx, `SELECT n FROM unnest($1::text[]) AS n
		WHERE pg_catalog.to_regclass(n) IS NOT NULL AND pg_catalog.has_any_column_privilege(pg_catalog.to_regclass(n), 'SELECT')`,
		[][]byte{arr.Bytes()}, nil, nil, nil).Read()
	if res.Err != nil {
		return res.Err
	}
	if len(res.Rows) == 0 {
		return nil
	}
	ref := refuse(RefusedClosedView, "this database's query card is not available: a view of it whose card is not active "+
		"(revoked or pending) can still be read by the query role; an administrator must revoke SELECT on it in the database, "+
		"or activate its card again")
	for _, row := range res.Rows {
		ref.Relations = append(ref.Relations, string(row[0]))
	}
	return ref
}

// isTimeout reports whether err is the statement timeout (or the deadline
// passed, on a database that ignores statement_timeout).
func (r *run) isTimeout(err error, deadline time.Time) bool {
	var pe *pgconn.PgError
	return (errors.As(err, &pe) && pe.Code == stateCanceled) || (pe == nil && time.Now().After(deadline))
}

// describe returns the cursor's columns and their types (read from
// pg_type on first sight, then cached per pool).
func (r *run) describe(ctx context.Context) ([]pgconn.FieldDescription, []pgjson.Type, error) {
	sd, err := r.pc.Prepare(ctx, "", "FETCH FORWARD 1 FROM cardex_rows", nil)
	if err != nil {
		return nil, nil, err
	}
	r.pl.mu.Lock()
	defer r.pl.mu.Unlock()
	var unknown []uint32
	for _, f := range sd.Fields {
		if _, ok := r.pl.types[f.DataTypeOID]; !ok && !slices.Contains(unknown, f.DataTypeOID) {
			unknown = append(unknown, f.DataTypeOID)
		}
	}
	if len(unknown) > 0 {
		if err := pgjson.Load(ctx, r.conn, r.pl.types, unknown); err != nil {
			return nil, nil, err
		}
	}
	types := make([]pgjson.Type, len(sd.Fields))
	for i, f := range sd.Fields {
		types[i] = r.pl.types[f.DataTypeOID]
	}
	return sd.Fields, types, nil
}

// end rolls the transaction back and releases any session-level advisory
// lock the query took (a rollback does not), and reports whether the
// connection is clean enough to reuse.
func (r *run) end() bool {
	if !r.began {
		return true
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if r.pc.IsClosed() {
		return false
	}
	if _, err := r.pc.Exec(ctx, "ROLLBACK; SELECT pg_advisory_unlock_all()").ReadAll(); err != nil {
		return false
	}
	return r.pc.TxStatus() == 'I'
}
