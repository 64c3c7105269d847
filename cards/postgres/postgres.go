// Package postgres is the production cards.Store: cards, server entries,
// learned phrasings, the change sequence and card embeddings in PostgreSQL
// with pgvector, shared by any number of cardex replicas. The schema lives in migrations/ and is applied
// with goose (Store.Migrate, `cardex migrate up`).
//
// It runs with the ordinary extended protocol and statement cache as well as
// with default_query_exec_mode=simple_protocol (needed by PGlite, whose
// connections share one session): the connection URL decides. Every write
// is one transaction; writers serialise on the change counter row, so a
// failed batch writes nothing and change sequence numbers commit in order.
package postgres

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/pgvector/pgvector-go"
	pgxvec "github.com/pgvector/pgvector-go/pgx"

	"github.com/seed0cff8200/cardex/cards"
)

// DefaultSchema is the schema the tables live in unless Config.Schema says
// otherwise.
const DefaultSchema = "public"

// Config configures Open.
type Config struct {
	// URL is a PostgreSQL connection URL or DSN (pgx syntax). Add
	// default_query_exec_mode=simple_protocol for PGlite or PgBouncer in
	// transaction mode.
	URL string
	// Schema holds cardex's tables (default "public"): lower-case letters,
	// digits and underscores.
	Schema string
	// MaxConns bounds the pool (0: pgx's default, max(4, CPUs)).
	MaxConns int32
	Logger   *slog.Logger
}

// Store is the PostgreSQL cards.Store. It is safe for concurrent use.
type Store struct {
	pool   *pgxpool.Pool
	schema string
	log    *slog.Logger
}

var _ cards.Store = (*Store)(nil)

var schemaRE = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

// Open parses the configuration and creates the connection pool. It does not
// wait for the database: connections are made when first needed, so a
// server can start (and report not-ready) while the database is down.
func Open(cfg Config) (*Store, error) {
	if cfg.URL == "" {
		return nil, errors.New("postgres store: a database URL is required")
	}
	schema := cfg.Schema
	if schema == "" {
		schema = DefaultSchema
	}
	if !schemaRE.MatchString(schema) {
		return nil, fmt.Errorf("postgres store: schema %q must match %s", schema, schemaRE)
	}
	pc, err := pgxpool.ParseConfig(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("postgres store: database URL: %w", err)
	}
	if pc.ConnConfig.ConnectTimeout == 0 {
		pc.ConnConfig.ConnectTimeout = 5 * time.Second
	}
	if cfg.MaxConns > 0 {
		pc.MaxConns = cfg.MaxConns
	}
	// pgvector's types, where the database has them, so that a query
	// vector goes in its binary form under the extended protocol rather
	// than as decimals for the server to parse (where they are missing, or
	// under the simple protocol, it goes as text).
	pc.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
		_ = pgxvec.RegisterTypes(ctx, c)
		return nil
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), pc)
	if err != nil {
		return nil, fmt.Errorf("postgres store: %w", err)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Store{pool: pool, schema: schema, log: log}, nil
}

// Close closes the pool.
func (s *Store) Close() error { s.pool.Close(); return nil }

// Pool is the connection pool (shared with Vectors and the change listener).
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Schema is the schema holding the tables.
func (s *Store) Schema() string { return s.schema }

// Ping checks that the database answers.
func (s *Store) Ping(ctx context.Context) error { return s.wrap(ctx, "ping", s.pool.Ping(ctx)) }

func quoteIdent(s string) string { return pgx.Identifier{s}.Sanitize() }

// sql replaces {s} with the quoted schema name.
func (s *Store) sql(q string) string { return strings.ReplaceAll(q, "{s}", quoteIdent(s.schema)) }

// wrap maps driver errors to the cards sentinels: an unreachable database,
// a dropped connection or a missing schema is cards.ErrUnavailable.
func (s *Store) wrap(ctx context.Context, op string, err error) error {
	if err == nil {
		return nil
	}
	for _, sentinel := range []error{cards.ErrNotFound, cards.ErrConflict, cards.ErrInvalid, cards.ErrUnavailable} {
		if errors.Is(err, sentinel) {
			return err
		}
	}
	if ctx.Err() != nil {
		return fmt.Errorf("postgres store: %s: %w", op, ctx.Err())
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case pe.Code == "42P01" || pe.Code == "3F000" || pe.Code == "42883":
			return fmt.Errorf("%w: postgres store: %s: %v (is the schema migrated? run `cardex migrate up`)", cards.ErrUnavailable, op, err)
		case strings.HasPrefix(pe.Code, "08"), strings.HasPrefix(pe.Code, "57P"), pe.Code == "53300", pe.Code == "25006":
			return fmt.Errorf("%w: postgres store: %s: %v", cards.ErrUnavailable, op, err)
		}
		return fmt.Errorf("postgres store: %s: %w", op, err)
	}
	// Anything else (refused or dropped connections, timeouts, a closed
	// pool) means the database cannot be reached.
	return fmt.Errorf("%w: postgres store: %s: %v", cards.ErrUnavailable, op, err)
}

func validKey(k cards.Key) bool {
	return cards.ValidName(k.Tenant) && cards.ValidName(k.Server) && cards.ValidName(k.Name)
}

// keyArrays splits keys into three parallel arrays for unnest.
func keyArrays(keys []cards.Key) (t, sv, n []string) {
	t, sv, n = make([]string, len(keys)), make([]string, len(keys)), make([]string, len(keys))
	for i, k := range keys {
		t[i], sv[i], n[i] = k.Tenant, k.Server, k.Name
	}
	return t, sv, n
}

// --- cards --------------------------------------------------------------

const cardColumns = `tenant, server, name, kind, summary, description, aliases, tags, when_not_to_use,
	required_scopes, status, read_only, destructive, idempotent, open_world, input_schema, output_schema,
	version, updated_at, search_examples, search_examples_source`

func scanCard(row pgx.Row) (cards.Card, error) {
	var c cards.Card
	var kind, status string
	var aliases, tags, scopes, examples []string
	var in, out, source []byte
	err := row.Scan(&c.Tenant, &c.Server, &c.Name, &kind, &c.Summary, &c.Description, &aliases, &tags, &c.WhenNotToUse,
		&scopes, &status, &c.Annotations.ReadOnly, &c.Annotations.Destructive, &c.Annotations.Idempotent,
		&c.Annotations.OpenWorld, &in, &out, &c.Version, &c.UpdatedAt, &examples, &source)
	if err != nil {
		return cards.Card{}, err
	}
	if len(examples) > 0 {
		c.SearchExamples = examples
	}
	if len(source) > 0 && string(source) != "null" {
		c.ExamplesSource = new(cards.ExamplesSource)
		if err := json.Unmarshal(source, c.ExamplesSource); err != nil {
			return cards.Card{}, fmt.Errorf("card %s: search_examples_source: %w", c.Key(), err)
		}
	}
	c.Kind, c.Status = cards.Kind(kind), cards.Status(status)
	if len(aliases) > 0 {
		c.Aliases = aliases
	}
	if len(tags) > 0 {
		c.Tags = tags
	}
	if len(scopes) > 0 {
		c.RequiredScopes = scopes
	}
	if len(in) > 0 {
		c.InputSchema = json.RawMessage(in)
	}
	if len(out) > 0 {
		c.OutputSchema = json.RawMessage(out)
	}
	c.UpdatedAt = c.UpdatedAt.UTC()
	return c, nil
}

// row is a card as written through jsonb_to_recordset: the whole batch is
// one statement, JSON passed as text ($1::jsonb) so that it works under the
// simple protocol too. Schemas travel base64-encoded, so they arrive as the
// exact bytes.
type row struct {
	Tenant         string   `json:"tenant"`
	Server         string   `json:"server"`
	Name           string   `json:"name"`
	Kind           string   `json:"kind"`
	Summary        string   `json:"summary"`
	Description    string   `json:"description"`
	Aliases        []string `json:"aliases"`
	Tags           []string `json:"tags"`
	WhenNotToUse   string   `json:"when_not_to_use"`
	RequiredScopes []string `json:"required_scopes"`
	Status         string   `json:"status"`
	ReadOnly       *bool    `json:"read_only"`
	Destructive    *bool    `json:"destructive"`
	Idempotent     *bool    `json:"idempotent"`
	OpenWorld      *bool    `json:"open_world"`
	InputSchema    []byte   `json:"input_schema"`
	OutputSchema   []byte   `json:"output_schema"`
	Version        int64    `json:"version"`
	Seq            int64    `json:"seq"`
	SearchExamples []string `json:"search_examples"`
	// ExamplesSource is nil (JSON null, SQL NULL) without examples.
	ExamplesSource *cards.ExamplesSource `json:"search_examples_source"`
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func toRow(c *cards.Card, seq int64) row {
	return row{
		Tenant: c.Tenant, Server: c.Server, Name: c.Name, Kind: string(c.Kind), Summary: c.Summary,
		Description: c.Description, Aliases: nonNil(c.Aliases), Tags: nonNil(c.Tags), WhenNotToUse: c.WhenNotToUse,
		RequiredScopes: nonNil(c.RequiredScopes), Status: string(c.Status),
		ReadOnly: c.Annotations.ReadOnly, Destructive: c.Annotations.Destructive,
		Idempotent: c.Annotations.Idempotent, OpenWorld: c.Annotations.OpenWorld,
		InputSchema: c.InputSchema, OutputSchema: c.OutputSchema, Version: c.Version, Seq: seq,
		SearchExamples: nonNil(c.SearchExamples), ExamplesSource: c.ExamplesSource,
	}
}

const textArray = `ARRAY(SELECT e FROM jsonb_array_elements_text(r.%s) WITH ORDINALITY AS a(e, i) ORDER BY i)`

var upsertCards = `INSERT INTO {s}.cards (` + cardColumns + `)
SELECT r.tenant, r.server, r.name, r.kind, r.summary, r.description,
	` + fmt.Sprintf(textArray, "aliases") + `, ` + fmt.Sprintf(textArray, "tags") + `, r.when_not_to_use,
	` + fmt.Sprintf(textArray, "required_scopes") + `, r.status, r.read_only, r.destructive, r.idempotent, r.open_world,
	decode(r.input_schema, 'base64'), decode(r.output_schema, 'base64'), r.version, $2::timestamptz,
	` + fmt.Sprintf(textArray, "search_examples") + `, r.search_examples_source
FROM jsonb_to_recordset($1::jsonb) AS r(tenant text, server text, name text, kind text, summary text,
	description text, aliases jsonb, tags jsonb, when_not_to_use text, required_scopes jsonb, status text,
	read_only boolean, destructive boolean, idempotent boolean, open_world boolean, input_schema text,
	output_schema text, version bigint, search_examples jsonb, search_examples_source jsonb)
ON CONFLICT (tenant, server, name) DO UPDATE SET
	kind = EXCLUDED.kind, summary = EXCLUDED.summary, description = EXCLUDED.description,
	aliases = EXCLUDED.aliases, tags = EXCLUDED.tags, when_not_to_use = EXCLUDED.when_not_to_use,
	required_scopes = EXCLUDED.required_scopes, status = EXCLUDED.status, read_only = EXCLUDED.read_only,
	destructive = EXCLUDED.destructive, idempotent = EXCLUDED.idempotent, open_world = EXCLUDED.open_world,
	input_schema = EXCLUDED.input_schema, output_schema = EXCLUDED.output_schema,
	version = EXCLUDED.version, updated_at = EXCLUDED.updated_at,
	search_examples = EXCLUDED.search_examples, search_examples_source = EXCLUDED.search_examples_source`

const upsertChanges = `INSERT INTO {s}.card_changes (tenant, server, name, seq, deleted, version)
SELECT r.tenant, r.server, r.name, r.seq, $2::boolean, r.version
FROM jsonb_to_recordset($1::jsonb) AS r(tenant text, server text, name text, seq bigint, version bigint)
ON CONFLICT (tenant, server, name) DO UPDATE SET seq = EXCLUDED.seq, deleted = EXCLUDED.deleted, version = EXCLUDED.version`

// lockCounter takes the change counter's row lock (held to the end of the
// transaction: writers serialise here) and returns the current sequence.
func (s *Store) lockCounter(ctx context.Context, tx pgx.Tx) (int64, error) {
	var seq int64
	err := tx.QueryRow(ctx, s.sql(`SELECT seq FROM {s}.change_counter WHERE id FOR UPDATE`)).Scan(&seq)
	return seq, err
}

func (s *Store) setCounter(ctx context.Context, tx pgx.Tx, seq int64) error {
	_, err := tx.Exec(ctx, s.sql(`UPDATE {s}.change_counter SET seq = $1 WHERE id`), seq)
	return err
}

// lockedVersion takes the change counter's lock and reads one stored
// version with query: the current sequence number and that version, or
// notFound.
func (s *Store) lockedVersion(ctx context.Context, tx pgx.Tx, notFound error, query string, args ...any) (seq, version int64, err error) {
	if seq, err = s.lockCounter(ctx, tx); err != nil {
		return 0, 0, err
	}
	err = tx.QueryRow(ctx, s.sql(query), args...).Scan(&version)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, 0, notFound
	}
	return seq, version, err
}

// recordChange records one change (r, at sequence r.Seq) in the change log
// and moves the counter to it.
func (s *Store) recordChange(ctx context.Context, tx pgx.Tx, r row, deleted bool) error {
	return s.recordChanges(ctx, tx, []row{r}, deleted)
}

// recordChanges writes the changes of rs (their keys, sequence numbers and
// versions; rs in sequence order) and moves the counter to the last one.
func (s *Store) recordChanges(ctx context.Context, tx pgx.Tx, rs []row, deleted bool) error {
	payload, err := json.Marshal(rs)
	if err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, s.sql(upsertChanges), string(payload), deleted); err != nil {
		return err
	}
	return s.setCounter(ctx, tx, rs[len(rs)-1].Seq)
}

// Put implements cards.Store.
func (s *Store) Put(ctx context.Context, cs []cards.Card) ([]cards.PutResult, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	norm, err := cards.NormalizeBatch(ctx, cs)
	if err != nil {
		return nil, err
	}
	return putBatch(ctx, s, cardRecords, norm)
}

var cardRecords = records[cards.Card]{
	op: "put", key: (*cards.Card).Key, plan: cards.PlanPut,
	stored: func(ctx context.Context, s *Store, tx pgx.Tx, keys []cards.Key) (map[cards.Key]cards.Card, error) {
		t, sv, n := keyArrays(keys)
		rows, err := tx.Query(ctx, s.sql(`SELECT `+cardColumns+` FROM {s}.cards
			WHERE (tenant, server, name) IN (SELECT * FROM unnest($1::text[], $2::text[], $3::text[]))`), t, sv, n)
		if err != nil {
			return nil, err
		}
		return collect(rows, scanCard, (*cards.Card).Key)
	},
	write: func(ctx context.Context, s *Store, tx pgx.Tx, cs []*cards.Card, seqs []int64) error {
		rs := make([]row, len(cs))
		for i, c := range cs {
			rs[i] = toRow(c, seqs[i])
		}
		payload, err := json.Marshal(rs)
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, s.sql(upsertCards), string(payload), cards.Now())
		return err
	},
}

// records says how one kind of catalogue entry (cards, server entries) is
// read and written by a put.
type records[T any] struct {
	op   string // names the put in errors
	key  func(*T) cards.Key
	plan func(i int, x, stored *T, lastDeleted int64) (cards.PutResult, bool, error)
	// stored reads the stored entries of keys.
	stored func(ctx context.Context, s *Store, tx pgx.Tx, keys []cards.Key) (map[cards.Key]T, error)
	// write stores entries, each with its sequence number.
	write func(ctx context.Context, s *Store, tx pgx.Tx, xs []*T, seqs []int64) error
}

// putBatch writes a normalised batch of cards or server entries in one
// transaction under the change counter's lock: the stored entries and the
// last deleted versions of their keys go to the put rule, the entries to
// write get the next sequence numbers, and their changes are recorded. A
// failure writes nothing.
func putBatch[T any](ctx context.Context, s *Store, r records[T], norm []T) ([]cards.PutResult, error) {
	if len(norm) == 0 {
		return []cards.PutResult{}, nil
	}
	keys := make([]cards.Key, len(norm))
	for i := range norm {
		keys[i] = r.key(&norm[i])
	}
	var results []cards.PutResult
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		seq, err := s.lockCounter(ctx, tx)
		if err != nil {
			return err
		}
		stored, err := r.stored(ctx, s, tx, keys)
		if err != nil {
			return err
		}
		graves, err := s.lastDeleted(ctx, tx, keys)
		if err != nil {
			return err
		}
		var writes []int
		if results, writes, err = cards.PlanBatch(norm, r.key, stored, graves, r.plan); err != nil || len(writes) == 0 {
			return err
		}
		xs, seqs, changes := make([]*T, len(writes)), make([]int64, len(writes)), make([]row, len(writes))
		for j, i := range writes {
			seq++
			k := keys[i]
			xs[j], seqs[j] = &norm[i], seq
			changes[j] = row{Tenant: k.Tenant, Server: k.Server, Name: k.Name, Seq: seq, Version: results[i].Version}
		}
		if err := r.write(ctx, s, tx, xs, seqs); err != nil {
			return err
		}
		return s.recordChanges(ctx, tx, changes, false)
	})
	if err != nil {
		return nil, s.wrap(ctx, r.op, err)
	}
	return results, nil
}

// lastDeleted returns the last version of every deleted card or server
// entry (a server entry's key has no name) among keys.
func (s *Store) lastDeleted(ctx context.Context, tx pgx.Tx, keys []cards.Key) (map[cards.Key]int64, error) {
	t, sv, n := keyArrays(keys)
	rows, err := tx.Query(ctx, s.sql(`SELECT tenant, server, name, version FROM {s}.card_changes
		WHERE deleted AND (tenant, server, name) IN (SELECT * FROM unnest($1::text[], $2::text[], $3::text[]))`), t, sv, n)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	graves := map[cards.Key]int64{}
	for rows.Next() {
		var k cards.Key
		var v int64
		if err := rows.Scan(&k.Tenant, &k.Server, &k.Name, &v); err != nil {
			return nil, err
		}
		graves[k] = v
	}
	return graves, rows.Err()
}

// collect scans rows into a map by key.
func collect[T any](rows pgx.Rows, scan func(pgx.Row) (T, error), key func(*T) cards.Key) (map[cards.Key]T, error) {
	defer rows.Close()
	out := map[cards.Key]T{}
	for rows.Next() {
		x, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out[key(&x)] = x
	}
	return out, rows.Err()
}

// Get implements cards.Store.
func (s *Store) Get(ctx context.Context, k cards.Key) (cards.Card, error) {
	if err := ctx.Err(); err != nil {
		return cards.Card{}, err
	}
	notFound := fmt.Errorf("%w: card %s", cards.ErrNotFound, k)
	if !validKey(k) {
		return cards.Card{}, notFound
	}
	c, err := scanCard(s.pool.QueryRow(ctx, s.sql(`SELECT `+cardColumns+` FROM {s}.cards
		WHERE tenant = $1 AND server = $2 AND name = $3`), k.Tenant, k.Server, k.Name))
	if errors.Is(err, pgx.ErrNoRows) {
		return cards.Card{}, notFound
	}
	if err != nil {
		return cards.Card{}, s.wrap(ctx, "get", err)
	}
	return c, nil
}

// The cursor is the base64url (unpadded) of the last card's server\x00name,
// as in the embedded store.
func encodeCursor(c *cards.Card) string {
	return base64.RawURLEncoding.EncodeToString([]byte(c.Server + "\x00" + c.Name))
}

func decodeCursor(s string) (server, name string, err error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	bad := cards.Invalid("cursor", "is not a cursor returned by a previous page")
	if err != nil {
		return "", "", bad
	}
	server, name, ok := strings.Cut(string(b), "\x00")
	if !ok || !cards.ValidName(server) || !cards.ValidName(name) {
		return "", "", bad
	}
	return server, name, nil
}

// List implements cards.Store.
func (s *Store) List(ctx context.Context, q cards.ListQuery) (cards.ListPage, error) {
	if err := ctx.Err(); err != nil {
		return cards.ListPage{}, err
	}
	limit, err := q.PageSize()
	if err != nil {
		return cards.ListPage{}, err
	}
	var afterServer, afterName string
	if q.Cursor != "" {
		if afterServer, afterName, err = decodeCursor(q.Cursor); err != nil {
			return cards.ListPage{}, err
		}
	}
	page := cards.ListPage{Cards: []cards.Card{}}
	if !cards.ValidName(q.Tenant) || (q.Server != "" && !cards.ValidName(q.Server)) {
		return page, nil
	}
	where := []string{"tenant = $1"}
	args := []any{q.Tenant}
	if q.Server != "" {
		args = append(args, q.Server)
		where = append(where, fmt.Sprintf("server = $%d", len(args)))
	}
	if len(q.Status) > 0 {
		st := make([]string, len(q.Status))
		for i, x := range q.Status {
			st[i] = string(x)
		}
		args = append(args, st)
		where = append(where, fmt.Sprintf("status = ANY($%d::text[])", len(args)))
	}
	if q.Cursor != "" {
		args = append(args, afterServer, afterName)
		where = append(where, fmt.Sprintf("(server, name) > ($%d::text COLLATE \"C\", $%d::text COLLATE \"C\")", len(args)-1, len(args)))
	}
	args = append(args, limit+1)
	rows, err := s.pool.Query(ctx, s.sql(`SELECT `+cardColumns+` FROM {s}.cards WHERE `+strings.Join(where, " AND ")+
		fmt.Sprintf(` ORDER BY server, name LIMIT $%d`, len(args))), args...)
	if err != nil {
		return cards.ListPage{}, s.wrap(ctx, "list", err)
	}
	defer rows.Close()
	for rows.Next() {
		c, err := scanCard(rows)
		if err != nil {
			return cards.ListPage{}, s.wrap(ctx, "list", err)
		}
		page.Cards = append(page.Cards, c)
	}
	if err := rows.Err(); err != nil {
		return cards.ListPage{}, s.wrap(ctx, "list", err)
	}
	if len(page.Cards) > limit {
		page.Cards = page.Cards[:limit]
		page.NextCursor = encodeCursor(&page.Cards[limit-1])
	}
	return page, nil
}

// Delete implements cards.Store.
func (s *Store) Delete(ctx context.Context, k cards.Key, expectedVersion int64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	notFound := fmt.Errorf("%w: card %s", cards.ErrNotFound, k)
	if !validKey(k) {
		return notFound
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		seq, version, err := s.lockedVersion(ctx, tx, notFound, `SELECT version FROM {s}.cards WHERE tenant = $1 AND server = $2 AND name = $3`,
			k.Tenant, k.Server, k.Name)
		if err != nil {
			return err
		}
		if expectedVersion > 0 && version != expectedVersion {
			return fmt.Errorf("%w: card %s: expected version %d, stored version is %d",
				cards.ErrConflict, k, expectedVersion, version)
		}
		// The card's embeddings go with it (ON DELETE CASCADE).
		if _, err := tx.Exec(ctx, s.sql(`DELETE FROM {s}.cards WHERE tenant = $1 AND server = $2 AND name = $3`),
			k.Tenant, k.Server, k.Name); err != nil {
			return err
		}
		return s.recordChange(ctx, tx, row{Tenant: k.Tenant, Server: k.Server, Name: k.Name, Seq: seq + 1, Version: version}, true)
	})
	return s.wrap(ctx, "delete", err)
}

// --- change sequence ----------------------------------------------------

// Seq implements cards.Store.
func (s *Store) Seq(ctx context.Context) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	var seq int64
	if err := s.pool.QueryRow(ctx, s.sql(`SELECT seq FROM {s}.change_counter WHERE id`)).Scan(&seq); err != nil {
		return 0, s.wrap(ctx, "seq", err)
	}
	return uint64(seq), nil
}

// Changes implements cards.Store. A limit <= 0 means no limit.
func (s *Store) Changes(ctx context.Context, since uint64, limit int) ([]cards.Change, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out := []cards.Change{}
	if since >= math.MaxInt64 {
		return out, nil
	}
	lim := any(nil) // LIMIT NULL is no limit
	if limit > 0 {
		lim = int64(limit)
	}
	rows, err := s.pool.Query(ctx, s.sql(`SELECT seq, tenant, server, name, deleted FROM {s}.card_changes
		WHERE seq > $1 ORDER BY seq LIMIT $2::bigint`), int64(since), lim)
	if err != nil {
		return nil, s.wrap(ctx, "changes", err)
	}
	defer rows.Close()
	for rows.Next() {
		var c cards.Change
		var seq int64
		if err := rows.Scan(&seq, &c.Key.Tenant, &c.Key.Server, &c.Key.Name, &c.Deleted); err != nil {
			return nil, s.wrap(ctx, "changes", err)
		}
		c.Seq = uint64(seq)
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, s.wrap(ctx, "changes", err)
	}
	return out, nil
}

// --- embeddings ---------------------------------------------------------

// PutEmbeddings implements cards.Store. Vectors of cards that do not exist
// (or are deleted concurrently) are skipped.
func (s *Store) PutEmbeddings(ctx context.Context, es []cards.Embedding) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	for i := range es {
		if es[i].Model == "" {
			return cards.Invalid(fmt.Sprintf("embeddings[%d].model", i), "is required")
		}
	}
	// The last vector for a (key, model) wins, as if applied in order.
	type mk struct {
		k     cards.Key
		model string
	}
	last := map[mk]int{}
	for i := range es {
		if validKey(es[i].Key) {
			last[mk{es[i].Key, es[i].Model}] = i
		}
	}
	var t, sv, n, models, hashes, vecs []string
	for i := range es {
		e := &es[i]
		if j, ok := last[mk{e.Key, e.Model}]; !ok || j != i {
			continue
		}
		t, sv, n = append(t, e.Key.Tenant), append(sv, e.Key.Server), append(n, e.Key.Name)
		models, hashes = append(models, e.Model), append(hashes, e.TextHash)
		vecs = append(vecs, pgvector.NewVector(e.Vector).String())
	}
	if len(t) == 0 {
		return nil
	}
	_, err := s.pool.Exec(ctx, s.sql(`INSERT INTO {s}.card_embeddings (tenant, server, name, model, text_hash, embedding)
		SELECT e.tenant, e.server, e.name, e.model, e.text_hash, e.embedding::vector
		FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[])
			AS e(tenant, server, name, model, text_hash, embedding)
		WHERE EXISTS (SELECT 1 FROM {s}.cards c
			WHERE c.tenant = e.tenant AND c.server = e.server AND c.name = e.name FOR KEY SHARE)
		ON CONFLICT (tenant, server, name, model) DO UPDATE SET text_hash = EXCLUDED.text_hash, embedding = EXCLUDED.embedding`),
		t, sv, n, models, hashes, vecs)
	return s.wrap(ctx, "put embeddings", err)
}

// Embeddings implements cards.Store.
func (s *Store) Embeddings(ctx context.Context, model string, keys []cards.Key) (map[cards.Key]cards.Embedding, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out := make(map[cards.Key]cards.Embedding, len(keys))
	keys = slices.DeleteFunc(slices.Clone(keys), func(k cards.Key) bool { return !validKey(k) })
	if model == "" || len(keys) == 0 {
		return out, nil
	}
	t, sv, n := keyArrays(keys)
	// vector_send is pgvector's binary form: decoding it is far cheaper
	// than parsing the text form's decimals (a tenant's load reads
	// thousands of vectors), and it passes the simple protocol as bytea.
	rows, err := s.pool.Query(ctx, s.sql(`SELECT tenant, server, name, text_hash, vector_send(embedding) FROM {s}.card_embeddings
		WHERE model = $1 AND (tenant, server, name) IN (SELECT * FROM unnest($2::text[], $3::text[], $4::text[]))`),
		model, t, sv, n)
	if err != nil {
		return nil, s.wrap(ctx, "embeddings", err)
	}
	defer rows.Close()
	for rows.Next() {
		var e cards.Embedding
		var v pgvector.Vector
		var raw []byte
		if err := rows.Scan(&e.Key.Tenant, &e.Key.Server, &e.Key.Name, &e.TextHash, &raw); err != nil {
			return nil, s.wrap(ctx, "embeddings", err)
		}
		if err := v.DecodeBinary(raw); err != nil {
			return nil, s.wrap(ctx, "embeddings", err)
		}
		e.Model, e.Vector = model, v.Slice()
		out[e.Key] = e
	}
	if err := rows.Err(); err != nil {
		return nil, s.wrap(ctx, "embeddings", err)
	}
	return out, nil
}
