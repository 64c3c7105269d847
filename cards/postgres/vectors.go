package postgres

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
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
	// Scopes, when non-nil and Keys is nil, restrict the search to the
	// tenant's active cards whose every required scope one of them covers:
	// "*" covers every scope, "p:*" every scope that starts with "p:", any
	// other only itself (the retriever's ScopeCovers).
	Scopes []string
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
// candidate filters are inside the SQL, and the transaction sets
// hnsw.iterative_scan so that the index scan keeps going until K rows pass
// the filter (or hnsw.max_scan_tuples is reached): a selective filter does
// not return fewer rows than exist. relaxed_order may return rows slightly
// out of order, so they are re-sorted outside the materialised CTE.
func (s *Store) searchSQL(q VectorQuery, withKeys bool) string {
	dist := fmt.Sprintf("e.embedding::vector(%d) <=> $1::vector(%d)", q.Dim, q.Dim)
	// Without keys the join to cards keeps the tenant's active cards; the
	// keys are the caller's candidates already.
	filter := `JOIN {s}.cards c ON c.tenant = e.tenant AND c.server = e.server AND c.name = e.name
	WHERE e.model = %s AND e.tenant = $2 AND c.status = 'active'`
	switch {
	case withKeys:
		filter = `WHERE e.model = %s AND e.tenant = $2
		AND (e.server, e.name) IN (SELECT * FROM unnest($3::text[], $4::text[]))`
	case q.Scopes != nil:
		// The caller's candidates by its scopes ($3 held exactly, $4 the
		// prefixes of its "p:*" scopes): no required scope that neither
		// covers.
		filter += `
	AND NOT EXISTS (SELECT 1 FROM unnest(c.required_scopes) AS r(scope)
		WHERE r.scope <> ALL($3::text[])
		AND NOT EXISTS (SELECT 1 FROM unnest($4::text[]) AS p(prefix) WHERE left(r.scope, length(p.prefix)) = p.prefix))`
	}
	return s.sql(fmt.Sprintf(`WITH r AS MATERIALIZED (
	SELECT e.server, e.name, %s AS distance
	FROM {s}.card_embeddings e
	`+filter+`
	ORDER BY %s
	LIMIT %d
)
SELECT server, name, distance FROM r ORDER BY distance, server, name`, dist, quoteLiteral(q.Model), dist, q.K))
}

// setLocal sets the search's planner settings for the transaction only.
func setLocal(ctx context.Context, tx pgx.Tx, q VectorQuery) error {
	set := []string{
		"hnsw.iterative_scan = relaxed_order",
		fmt.Sprintf("hnsw.ef_search = %d", min(max(q.K, 40), MaxEfSearch)),
	}
	if q.NoIterativeScan {
		set[0] = "hnsw.iterative_scan = off"
	}
	if q.ForceIndex {
		set = append(set, "enable_sort = off", "enable_seqscan = off")
	}
	for _, x := range set {
		if _, err := tx.Exec(ctx, "SET LOCAL "+x); err != nil {
			return err
		}
	}
	return nil
}

// SearchVectors returns the K cards most similar to q.Vector (cosine),
// best first, among q.Keys when given (the caller's candidates, taken as
// they are), else among the tenant's active cards,
// through the model's HNSW index with iterative scans.
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
	args := q.args()
	var out []VectorHit
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		// SET LOCAL: the settings end with the transaction, which matters
		// where connections share a session (PGlite, PgBouncer).
		if err := setLocal(ctx, tx, q); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, s.searchSQL(q, q.Keys != nil), args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			h := VectorHit{Key: cards.Key{Tenant: q.Tenant}}
			var d float64
			if err := rows.Scan(&h.Key.Server, &h.Key.Name, &d); err != nil {
				return err
			}
			h.Similarity = 1 - d
			out = append(out, h)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, s.wrap(ctx, "vector search", err)
	}
	return out, nil
}

// args are the query's parameters: the vector and the tenant, then the
// keys' servers and names, or the scopes held exactly and the prefixes of
// the "p:*" ones ("*" holds every scope: no restriction).
func (q *VectorQuery) args() []any {
	args := []any{pgvector.NewVector(q.Vector).String(), q.Tenant}
	switch {
	case q.Keys != nil:
		sv, n := make([]string, len(q.Keys)), make([]string, len(q.Keys))
		for i, k := range q.Keys {
			sv[i], n[i] = k.Server, k.Name
		}
		args = append(args, sv, n)
	case q.Scopes != nil:
		exact, prefixes := []string{}, []string{}
		for _, h := range q.Scopes {
			switch {
			case h == "*":
				prefixes = append(prefixes, "") // every scope starts with ""
			case strings.HasSuffix(h, ":*"):
				prefixes = append(prefixes, h[:len(h)-1])
			default:
				exact = append(exact, h)
			}
		}
		args = append(args, exact, prefixes)
	}
	return args
}

// ExplainVectorSearch returns the query plan of SearchVectors (for tests
// and diagnosis).
func (s *Store) ExplainVectorSearch(ctx context.Context, q VectorQuery) (string, error) {
	args := q.args()
	var plan []string
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := setLocal(ctx, tx, q); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, "EXPLAIN "+s.searchSQL(q, q.Keys != nil), args...)
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
		return rows.Err()
	})
	return strings.Join(plan, "\n"), s.wrap(ctx, "explain", err)
}

// Analyze refreshes the planner's statistics of the card tables (after a
// bulk load, so that vector searches are planned with real row counts;
// autovacuum does this by itself on a server that runs it).
func (s *Store) Analyze(ctx context.Context) error {
	_, err := s.pool.Exec(ctx, s.sql(`ANALYZE {s}.cards, {s}.card_embeddings`))
	return s.wrap(ctx, "analyze", err)
}
