package postgres

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/pgvector/pgvector-go"

	"github.com/seed0cff8200/cardex/cards"
)

// VectorQuery is a similarity search over stored card embeddings.
type VectorQuery struct {
	Model  string // embedder model id: only its vectors are compared
	Dim    int    // its dimension
	Tenant string
	// Keys, when non-nil, restricts the search to these cards (the caller's
	// authorized candidates); an empty non-nil slice matches nothing. When
	// nil, every active card of the tenant is a candidate.
	Keys []cards.Key
	// Within, when non-nil and Keys is nil, restricts the search to the
	// tenant's active cards whose every required scope is one of these (the
	// scopes a caller's held scopes cover, among those its tenant's cards
	// require): an array containment tested on card_embeddings' own copy
	// of the card's scopes, with no join.
	Within []string
	// Exact searches by an exact ordered scan of the rows the filter
	// selects instead of the HNSW index: cheaper when they are few, and
	// the K nearest exactly.
	Exact  bool
	Vector []float32
	K      int
	// ForceIndex makes the planner take the HNSW index even where an exact
	// scan of few rows would be cheaper (for tests of the iterative scan).
	ForceIndex bool
	// NoIterativeScan turns iterative index scans off (for tests that show
	// what they prevent: a filtered HNSW scan returning too few rows).
	NoIterativeScan bool
}

// VectorHit is one card and its cosine similarity to the query.
type VectorHit struct {
	Key        cards.Key
	Similarity float64
}

// MaxEfSearch bounds hnsw.ef_search (pgvector's own limit is 1000).
const MaxEfSearch = 1000

var nonIdent = regexp.MustCompile(`[^a-z0-9]+`)

// VectorIndexName is the name of the partial HNSW index over one model's
// vectors of one dimension.
func VectorIndexName(model string, dim int) string {
	name := fmt.Sprintf("card_embeddings_hnsw_%s_%d", strings.Trim(nonIdent.ReplaceAllString(strings.ToLower(model), "_"), "_"), dim)
	if len(name) > 63 {
		sum := sha256.Sum256([]byte(fmt.Sprintf("%s/%d", model, dim)))
		name = name[:50] + "_" + hex.EncodeToString(sum[:6])
	}
	return name
}

// quoteLiteral makes a SQL string literal. The model id goes into the SQL
// text (not a parameter) so that the planner can match the partial index's
// predicate whatever the protocol and plan cache do.
func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

func checkDim(dim int) error {
	if dim < 1 || dim > 2000 {
		return fmt.Errorf("postgres store: vector dimension %d: HNSW indexes take 1 to 2000 dimensions", dim)
	}
	return nil
}

// EnsureVectorIndex creates the HNSW (cosine) index for one model's
// vectors if it does not exist. On a table that already holds vectors this
// builds the index, which takes a while: in tests, load first, then index.
func (s *Store) EnsureVectorIndex(ctx context.Context, model string, dim int) error {
	if err := checkDim(dim); err != nil {
		return err
	}
	q := fmt.Sprintf(`CREATE INDEX IF NOT EXISTS %s ON {s}.card_embeddings
		USING hnsw ((embedding::vector(%d)) vector_cosine_ops) WHERE model = %s`,
		quoteIdent(VectorIndexName(model, dim)), dim, quoteLiteral(model))
	_, err := s.pool.Exec(ctx, s.sql(q))
	return s.wrap(ctx, "create vector index", err)
}

// DropVectorIndex drops one model's HNSW index (before a bulk load).
func (s *Store) DropVectorIndex(ctx context.Context, model string, dim int) error {
	_, err := s.pool.Exec(ctx, s.sql(`DROP INDEX IF EXISTS {s}.`+quoteIdent(VectorIndexName(model, dim))))
	return s.wrap(ctx, "drop vector index", err)
}

// searchSQL is the filtered nearest-neighbour query. The tenant, status and
// candidate filters are inside the SQL. Through the HNSW index the
// search's settings (searchSettings) turn hnsw.iterative_scan on so that
// the index scan keeps going until K rows pass the filter (or
// hnsw.max_scan_tuples is reached): a selective filter does not return
// fewer rows than exist. relaxed_order may return rows slightly out of
// order, so they are re-sorted outside the materialised CTE. An exact
// search computes the distance of every row the filter selects and keeps
// the K nearest by a bounded sort, with no CTE between the scan and the
// sort (whose tuple store copied every row once more): its distance is
// taken on the column itself, embedding <=> query, an expression no index
// orders (the HNSW indexes are over embedding::vector(dim)), so no plan can
// answer it through HNSW; the value is the same function of the same two
// vectors as the cast one.
func (s *Store) searchSQL(q VectorQuery) string {
	dist := fmt.Sprintf("e.embedding::vector(%d) <=> $1::vector(%d)", q.Dim, q.Dim)
	// card_embeddings carries its card's status and required scopes
	// (migration 9): the tenant's active cards need no join.
	filter := `WHERE e.model = %[2]s AND e.tenant = $2 AND e.active`
	switch {
	case q.Keys != nil:
		// The caller's candidates already.
		filter = `WHERE e.model = %[2]s AND e.tenant = $2
		AND (e.server, e.name) IN (SELECT * FROM unnest($3::text[], $4::text[]))`
	case q.Within != nil && q.Exact:
		// The tenant's sets of required scopes that Within contains, then
		// the vectors of those sets through their index (migration 10):
		// the same rows as required_scopes <@ Within, since each row's
		// set is its required scopes, without reading the others.
		filter += ` AND e.scope_set = ANY (ARRAY(SELECT x.id FROM {s}.card_scope_sets x
			WHERE x.tenant = $2 AND x.scopes <@ $3::text[]))`
	case q.Within != nil:
		filter += ` AND e.required_scopes <@ $3::text[]`
	}
	if q.Exact {
		return s.sql(fmt.Sprintf(`SELECT e.server, e.name, e.embedding <=> $1::vector(%[1]d) AS distance
	FROM {s}.card_embeddings e
	`+filter+`
	ORDER BY distance, e.server, e.name LIMIT %[3]d`, q.Dim, quoteLiteral(q.Model), q.K))
	}
	return s.sql(fmt.Sprintf(`WITH r AS MATERIALIZED (
	SELECT e.server, e.name, %[1]s AS distance
	FROM {s}.card_embeddings e
	`+filter+`
	ORDER BY %[1]s
	LIMIT %[3]d
)
SELECT server, name, distance FROM r ORDER BY distance, server, name`, dist, quoteLiteral(q.Model), q.K))
}

// searchSettings is the statement that sets the search's settings for its
// transaction only (set_config with is_local is SET LOCAL, which matters
// where connections share a session: PGlite, PgBouncer), with its
// arguments. Every search runs with JIT off (Debian's and other packagers'
// PostgreSQL have jit = on): a plan whose cost passes jit_above_cost would
// be compiled with LLVM at every search, milliseconds for a query that
// runs in less.
func searchSettings(q VectorQuery) (string, []any) {
	if q.Exact {
		if q.Within == nil {
			// JIT off: a tenant-wide exact scan of a large tenant costs
			// past jit_above_cost, and compiling it would cost more than
			// running it.
			return `SELECT set_config('jit', 'off', true)`, nil
		}
		// The scope sets' index, read as a bitmap (the rows in the
		// table's order), whatever the planner makes of the share of the
		// tenant they select: it counts every page read as one from disk,
		// and would scan the whole table for a quarter of its rows. JIT
		// off: the disabled plans' costs would otherwise compile the query.
		// No prefetch of the bitmap's next pages (effective_io_concurrency
		// 0): each page was looked up twice in the buffer table, once to
		// prefetch it, and a page not in shared buffers cost a
		// posix_fadvise call more besides its read, for vectors that are
		// in memory (shared buffers or the OS page cache) on a server
		// sized for them (docs/OPERATIONS.md).
		return `SELECT set_config('enable_seqscan', 'off', true), set_config('enable_indexscan', 'off', true),
			set_config('jit', 'off', true), set_config('effective_io_concurrency', '0', true)`, nil
	}
	iterative := "relaxed_order"
	if q.NoIterativeScan {
		iterative = "off"
	}
	// Bitmap scans off: an index of the tenant's rows must not replace the
	// HNSW scan the search was planned for (the planner takes it for a
	// filter it misjudges as selective, and scans thousands of rows
	// exactly).
	set := `SELECT set_config('hnsw.iterative_scan', $1, true), set_config('hnsw.ef_search', $2, true),
		set_config('enable_bitmapscan', 'off', true), set_config('jit', 'off', true)`
	if q.ForceIndex {
		set += `, set_config('enable_sort', 'off', true), set_config('enable_seqscan', 'off', true)`
	}
	return set, []any{iterative, strconv.Itoa(min(max(q.K, 40), MaxEfSearch))}
}

// searchBatch is a search's batch: its settings, then its query (after
// prefix: "EXPLAIN ..." to explain it): one round trip, one implicit
// transaction, so the settings hold for the query and end with it.
func (s *Store) searchBatch(q VectorQuery, prefix string) *pgx.Batch {
	b := &pgx.Batch{}
	set, setArgs := searchSettings(q)
	b.Queue(set, setArgs...)
	b.Queue(prefix+s.searchSQL(q), q.args()...)
	return b
}

// SearchVectors returns the K cards most similar to q.Vector (cosine),
// best first, among q.Keys when given (the caller's candidates, taken as
// they are), else among the tenant's active cards (those whose required
// scopes are all in q.Within, when given): through the model's HNSW index
// with iterative scans, or by an exact scan when q.Exact. The settings and
// the query go in one batch: one round trip, one implicit transaction.
func (s *Store) SearchVectors(ctx context.Context, q VectorQuery) ([]VectorHit, error) {
	if err := checkDim(q.Dim); err != nil {
		return nil, err
	}
	if len(q.Vector) != q.Dim {
		return nil, fmt.Errorf("postgres store: query vector has %d dimensions, want %d", len(q.Vector), q.Dim)
	}
	if q.K <= 0 || (q.Keys != nil && len(q.Keys) == 0) {
		return nil, nil
	}
	var out []VectorHit
	err := func() error {
		br := s.pool.SendBatch(ctx, s.searchBatch(q, ""))
		defer br.Close()
		if _, err := br.Exec(); err != nil {
			return err
		}
		rows, err := br.Query()
		if err != nil {
			return err
		}
		defer rows.Close()
		// The scan's targets made once (each row's would escape).
		var server, name string
		var d float64
		targets := []any{&server, &name, &d}
		out = make([]VectorHit, 0, min(q.K, 1024))
		for rows.Next() {
			if err := rows.Scan(targets...); err != nil {
				return err
			}
			out = append(out, VectorHit{Key: cards.Key{Tenant: q.Tenant, Server: server, Name: name}, Similarity: 1 - d})
		}
		if err := rows.Err(); err != nil {
			return err
		}
		return br.Close()
	}()
	if err != nil {
		return nil, s.wrap(ctx, "vector search", err)
	}
	return out, nil
}

// args are the query's parameters: the vector and the tenant, then the
// keys' servers and names, or the scopes the cards may require.
func (q *VectorQuery) args() []any {
	args := []any{pgvector.NewVector(q.Vector), q.Tenant}
	switch {
	case q.Keys != nil:
		sv, n := make([]string, len(q.Keys)), make([]string, len(q.Keys))
		for i, k := range q.Keys {
			sv[i], n[i] = k.Server, k.Name
		}
		args = append(args, sv, n)
	case q.Within != nil:
		args = append(args, q.Within)
	}
	return args
}

// ExplainVectorSearch returns the query plan of SearchVectors, sent in the
// same batch after the same settings, with the settings that differ from
// the server's defaults (EXPLAIN's SETTINGS line: jit, enable_*, ...), for
// tests and diagnosis.
func (s *Store) ExplainVectorSearch(ctx context.Context, q VectorQuery) (string, error) {
	var plan []string
	err := func() error {
		br := s.pool.SendBatch(ctx, s.searchBatch(q, "EXPLAIN (SETTINGS) "))
		defer br.Close()
		if _, err := br.Exec(); err != nil {
			return err
		}
		rows, err := br.Query()
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var line string
			if err := rows.Scan(&line); err != nil {
				return err
			}
			plan = append(plan, line)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		return br.Close()
	}()
	return strings.Join(plan, "\n"), s.wrap(ctx, "explain", err)
}

// Analyze refreshes the planner's statistics of the card tables (after a
// bulk load, so that vector searches are planned with real row counts;
// autovacuum does this by itself on a server that runs it).
func (s *Store) Analyze(ctx context.Context) error {
	_, err := s.pool.Exec(ctx, s.sql(`ANALYZE {s}.cards, {s}.card_embeddings`))
	return s.wrap(ctx, "analyze", err)
}
