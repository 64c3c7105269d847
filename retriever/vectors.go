package retriever

import (
	"context"
	"strings"

	"github.com/seed0cff8200/cardex/cards"
)

// VectorIndex is the semantic leg's searcher. The default is MemoryVectors
// (exact scan in memory); the PostgreSQL store provides a pgvector one.
// Search must restrict itself to the filter's candidate set inside the
// search, like the lexical leg. An error that wraps cards.ErrUnavailable
// makes Discover answer from the lexical leg alone, flagged degraded.
type VectorIndex interface {
	// Upsert records a card's vector (the retriever computes vectors; a
	// backend that reads them from the store may ignore this).
	Upsert(ctx context.Context, id, tenant string, vec []float32) error
	Delete(ctx context.Context, id string)
	Search(ctx context.Context, query []float32, f Filter, k int) ([]Hit, error)
}

// ParseDocID splits a DocID back into its key.
func ParseDocID(id string) (cards.Key, bool) {
	parts := strings.Split(id, idSep)
	if len(parts) != 3 {
		return cards.Key{}, false
	}
	return cards.Key{Tenant: parts[0], Server: parts[1], Name: parts[2]}, true
}

// memoryIndex adapts MemoryVectors to VectorIndex.
type memoryIndex struct{ m *MemoryVectors }

func (x memoryIndex) Upsert(_ context.Context, id, tenant string, vec []float32) error {
	return x.m.Upsert(id, tenant, vec)
}
func (x memoryIndex) Delete(_ context.Context, id string) { x.m.Delete(id) }
func (x memoryIndex) Search(_ context.Context, q []float32, f Filter, k int) ([]Hit, error) {
	return x.m.Search(q, f, k)
}

// Option configures New.
type Option func(*Retriever)

// WithVectors replaces the in-memory vector index.
func WithVectors(v VectorIndex) Option { return func(r *Retriever) { r.vec = v } }

// WithLexicalWeights sets the lexical leg's field weights.
func WithLexicalWeights(w LexicalWeights) Option { return func(r *Retriever) { r.lexWeights = w } }

// WithDecompose makes a request that gives only a query, and whose query
// splits into parts (Decompose), rank every part too, with the query as its
// context, merged like intents.
func WithDecompose(on bool) Option { return func(r *Retriever) { r.decompose = on } }

// DefaultQueryContext is the weight of the query in each intent's ranking
// (measured on ../shared/eval, docs/EVAL.md).
const DefaultQueryContext = 0.3

// WithQueryContext sets the weight of the query's words and vector in each
// intent's ranking when a request carries both (0 ranks intents alone).
func WithQueryContext(w float64) Option { return func(r *Retriever) { r.queryContext = w } }
