package enrich

import (
	"context"
	"errors"

	"github.com/seed0cff8200/cardex/cards"
	"github.com/seed0cff8200/cardex/internal/sources/catalogsync"
)

// StoreCatalog is a Catalog on a cards.Store (the service's own store).
// It lists like the importers' catalogue.
type StoreCatalog struct{ catalogsync.StoreCatalog }

// NewStoreCatalog wraps a store.
func NewStoreCatalog(st cards.Store) StoreCatalog {
	return StoreCatalog{catalogsync.StoreCatalog{Store: st}}
}

// Get reads one card.
func (s StoreCatalog) Get(ctx context.Context, k cards.Key) (cards.Card, error) {
	return s.Store.Get(ctx, k)
}

// Put writes one card with its version check.
func (s StoreCatalog) Put(ctx context.Context, c cards.Card) (cards.PutResult, error) {
	rs, err := s.Store.Put(ctx, []cards.Card{c})
	if err != nil {
		return cards.PutResult{}, err
	}
	return rs[0], nil
}

// Server reads a server entry (nil when there is none).
func (s StoreCatalog) Server(ctx context.Context, tenant, name string) (*cards.ServerInfo, error) {
	si, err := s.Store.GetServer(ctx, tenant, name)
	if errors.Is(err, cards.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &si, nil
}
