// Package pgvec adapts the PostgreSQL store's pgvector search to the
// retriever's VectorIndex, so that in PostgreSQL mode the semantic leg runs
// in the database (HNSW, filtered in SQL with iterative index scans) rather
// than over an in-memory copy of every vector.
package pgvec

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/seed0cff8200/cardex/cards"
	"github.com/seed0cff8200/cardex/cards/postgres"
	"github.com/seed0cff8200/cardex/retriever"
)

// DefaultTimeout bounds one search: past it the database counts as
// unavailable and discovery answers from the lexical leg (degraded) rather
// than hang.
const DefaultTimeout = 2 * time.Second

// DefaultExactScanMax is the largest tenant (in cards) whose restricted
// callers are all searched by an exact scan of the rows their scopes select
// rather than through the HNSW index; in a larger tenant, a caller whose
// candidates are at most ExactScanShare of its cards (LargeExactScanShare
// past ExactScanShareMax cards) is searched exactly too. The exact scan
// reads the caller's rows through the index of scope sets (migration 10)
// and computes each one's distance, so it costs about its candidates; the
// filtered HNSW scan visits about K ÷ (the caller's share) index tuples.
// Measured by BenchmarkPlans on native PostgreSQL 15 with pgvector 0.8.1
// (docs/BENCHMARKS.md, "PostgreSQL mode"), the server's CPU per search
// (K = 200), exact against HNSW: at 10,000 cards the exact scan is the
// cheaper at every share measured, 0.4 against 2.8 ms at 3% up to 5.4
// against 6.4 ms at 85%; at 100,000 cards up to 21% (3.3 against 73 ms at
// 3%, 29 against 35 ms at 21%), not from 26% on (79 against 28 ms). Past
// 100,000 cards it was not measured: the share stays the one of the plan
// before the scope sets' index, 5%.
const DefaultExactScanMax = 10_000

// ExactScanShare, ExactScanShareMax and LargeExactScanShare: see
// DefaultExactScanMax.
const (
	ExactScanShare      = 0.20
	ExactScanShareMax   = 100_000
	LargeExactScanShare = 0.05
)

// exactScan says whether a restricted caller with candidates of a tenant of
// tenantCards cards is searched by an exact scan.
func (x *Index) exactScan(candidates, tenantCards int) bool {
	if x.exactMax < 0 || tenantCards <= 0 {
		return false
	}
	share := ExactScanShare
	if tenantCards > ExactScanShareMax {
		share = LargeExactScanShare
	}
	return tenantCards <= x.exactMax || float64(candidates) <= share*float64(tenantCards)
}

// Index is a retriever.VectorIndex over a postgres.Store's card_embeddings.
type Index struct {
	store    *postgres.Store
	model    string
	dim      int
	timeout  time.Duration
	exactMax int
}

var _ retriever.VectorIndex = (*Index)(nil)

// New returns an index over the vectors of one embedder model.
func New(store *postgres.Store, model string, dim int) *Index {
	return &Index{store: store, model: model, dim: dim, timeout: DefaultTimeout, exactMax: DefaultExactScanMax}
}

// WithExactScanMax sets the largest tenant whose restricted callers are all
// searched exactly (negative: no caller is).
func (x *Index) WithExactScanMax(n int) *Index {
	x.exactMax = n
	return x
}

// WithTimeout sets the per-search timeout (0 keeps the default).
func (x *Index) WithTimeout(d time.Duration) *Index {
	if d > 0 {
		x.timeout = d
	}
	return x
}

// Upsert does nothing: the retriever stores every card vector with
// PutEmbeddings before it calls Upsert, and searches read them from there.
func (x *Index) Upsert(context.Context, string, string, []float32) error { return nil }

// Delete does nothing: a deleted card's vectors go with it in the store.
func (x *Index) Delete(context.Context, string) {}

// Search implements retriever.VectorIndex: the filter's tenant and candidate
// IDs become SQL conditions of the nearest-neighbour query.
func (x *Index) Search(ctx context.Context, query []float32, f retriever.Filter, k int) ([]retriever.Hit, error) {
	q := postgres.VectorQuery{Model: x.model, Dim: x.dim, Tenant: f.Tenant, Vector: query, K: k}
	switch {
	case f.Scopes != nil && f.IDs != nil && len(f.IDs) == 0:
		return nil, nil
	case f.Scopes != nil && f.Covered != nil:
		// The candidate set by the caller's scopes, tested in SQL: no list
		// of IDs to send (the pipeline keeps only its candidates' hits).
		// Only scopes the caller's cover are sent, so that the SQL filter
		// alone never selects a card the caller may not see.
		q.Within = make([]string, 0, len(f.Covered))
		for _, s := range f.Covered {
			if retriever.HoldsAll(f.Scopes, []string{s}) {
				q.Within = append(q.Within, s)
			}
		}
		q.Exact = x.exactScan(len(f.IDs), f.TenantCards)
	case f.IDs != nil:
		q.Keys = make([]cards.Key, 0, len(f.IDs))
		for _, id := range f.IDs {
			if key, ok := retriever.ParseDocID(id); ok && key.Tenant == f.Tenant {
				q.Keys = append(q.Keys, key)
			}
		}
	}
	sctx, cancel := context.WithTimeout(ctx, x.timeout)
	defer cancel()
	hits, err := x.store.SearchVectors(sctx, q)
	if err != nil {
		if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
			return nil, fmt.Errorf("%w: vector search took longer than %s: %v", cards.ErrUnavailable, x.timeout, err)
		}
		return nil, err
	}
	out := make([]retriever.Hit, len(hits))
	for i, h := range hits {
		out[i] = retriever.Hit{ID: retriever.DocID(h.Key), Score: h.Similarity}
	}
	return out, nil
}
