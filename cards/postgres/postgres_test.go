package postgres_test

import (
	"testing"

	"github.com/seed0cff8200/cardex/cards"
	"github.com/seed0cff8200/cardex/cards/storetest"
	"github.com/seed0cff8200/cardex/internal/pgtest"
)

func TestConformance(t *testing.T) {
	pgtest.URL(t)
	storetest.Run(t, func(t *testing.T) cards.Store {
		return pgtest.Open(t, pgtest.Options{})
	})
}
