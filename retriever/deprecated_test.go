package retriever_test

import (
	"context"
	"slices"
	"testing"

	"github.com/seed0cff8200/cardex/cards"
	"github.com/seed0cff8200/cardex/retriever"
)

// A deprecated tool (tag deprecated) ranks below the tool that does the
// same work, though its text matches the request as well or better; it is
// still found when nothing else fits.
func TestDeprecatedRanksBelowItsReplacement(t *testing.T) {
	dep := func(c cards.Card) cards.Card {
		return with(c, func(c *cards.Card) { c.Tags = []string{cards.TagDeprecated} })
	}
	st := newStore(t,
		dep(card("users", "get_user", "Get a user by id.")),
		card("users", "get_user_record", "Get a user record by its id."),
		dep(card("users", "purge_cache", "Purge the user cache.")),
		card("users", "list_groups", "List the groups."),
	)
	r := newRetriever(t, st, nil)
	for _, tc := range []struct{ query, first string }{
		{"get a user by id", "get_user_record"},
		{"purge the user cache", "purge_cache"}, // no replacement: still first
	} {
		res, err := r.Discover(context.Background(), retriever.Request{Query: tc.query, Caller: admin, TopK: 5})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, s := range res.Tools {
			got = append(got, s.Card.Name)
		}
		if len(got) == 0 || got[0] != tc.first {
			t.Errorf("%q: %v, want %s first", tc.query, got, tc.first)
		}
		if tc.first == "get_user_record" && !slices.Contains(got, "get_user") {
			t.Errorf("%q: %v: the deprecated tool is still listed", tc.query, got)
		}
	}
}
