package pgtest

import (
	"context"
	"sync"

	"github.com/seed0cff8200/cardex/cards"
	"github.com/seed0cff8200/cardex/cards/postgres"
)

// WithoutVectors wraps a store on a database without pgvector (the native
// PostgreSQL here, migrated without version 2): embeddings are kept in memory
// with the store's semantics (ignored for missing cards, dropped on delete),
// everything else goes to PostgreSQL.
func WithoutVectors(s *postgres.Store) cards.Store {
	return &noVectors{Store: s, m: map[cards.Key]map[string]cards.Embedding{}}
}

type noVectors struct {
	*postgres.Store
	mu sync.Mutex
	m  map[cards.Key]map[string]cards.Embedding
}

func (n *noVectors) Delete(ctx context.Context, k cards.Key, v int64) error {
	if err := n.Store.Delete(ctx, k, v); err != nil {
		return err
	}
	n.mu.Lock()
	delete(n.m, k)
	n.mu.Unlock()
	return nil
}

func (n *noVectors) PutEmbeddings(ctx context.Context, es []cards.Embedding) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	for i := range es {
		if es[i].Model == "" {
			return cards.Invalid("embeddings.model", "is required")
		}
	}
	for _, e := range es {
		if _, err := n.Store.Get(ctx, e.Key); err != nil {
			continue
		}
		n.mu.Lock()
		if n.m[e.Key] == nil {
			n.m[e.Key] = map[string]cards.Embedding{}
		}
		e.Vector = append([]float32(nil), e.Vector...)
		n.m[e.Key][e.Model] = e
		n.mu.Unlock()
	}
	return nil
}

func (n *noVectors) Embeddings(ctx context.Context, model string, keys []cards.Key) (map[cards.Key]cards.Embedding, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	out := map[cards.Key]cards.Embedding{}
	for _, k := range keys {
		if e, ok := n.m[k][model]; ok {
			out[k] = e
		}
	}
	return out, nil
}
