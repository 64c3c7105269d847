package retriever_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/seed0cff8200/cardex/cards"
	"github.com/seed0cff8200/cardex/retriever"
)

func topNames(t *testing.T, r *retriever.Retriever, q string, k int) []string {
	t.Helper()
	res, err := r.Discover(context.Background(), retriever.Request{Caller: retriever.Caller{Tenant: acme, Scopes: []string{"*"}}, Query: q, TopK: k})
	if err != nil {
		t.Fatalf("Discover(%q): %v", q, err)
	}
	var out []string
	for _, s := range res.Tools {
		out = append(out, s.Card.Server+"/"+s.Card.Name)
	}
	return out
}

func TestLearnedPhrasingsRankBothLegs(t *testing.T) {
	st := newStore(t,
		card("ship", "track_parcel", "Carrier status of a consignment by tracking number."),
		card("ship", "print_label", "Print a shipping label for a consignment."),
		card("crm", "get_contact", "Read one contact record."),
	)
	r := newRetriever(t, st, nil)
	ctx := context.Background()
	const q = "where the heck is my stuff"
	if got := topNames(t, r, q, 1); len(got) > 0 && got[0] == "ship/track_parcel" {
		t.Fatalf("precondition: track_parcel already first for %q", q)
	}
	changed, err := r.Learn(ctx, cards.Key{Tenant: acme, Server: "ship", Name: "track_parcel"}, "where is my stuff", "Where is my STUFF")
	if err != nil || !changed {
		t.Fatalf("Learn = %v, %v", changed, err)
	}
	if got := topNames(t, r, q, 1); len(got) == 0 || got[0] != "ship/track_parcel" {
		t.Fatalf("after learning, top for %q = %v, want ship/track_parcel", q, got)
	}
	if got := r.Learned()[cards.Key{Tenant: acme, Server: "ship", Name: "track_parcel"}]; !slices.Equal(got, []string{"where is my stuff"}) {
		t.Errorf("learned = %q, want one de-duplicated phrasing", got)
	}
	// Matched fields name the learned phrasings.
	res, _ := r.Discover(ctx, retriever.Request{Caller: retriever.Caller{Tenant: acme, Scopes: []string{"*"}}, Query: "stuff", TopK: 1})
	if len(res.Tools) != 1 || !slices.Contains(res.Tools[0].Scores.Fields, "learned") {
		t.Errorf("matched fields = %+v, want learned", res.Tools)
	}
	// They survive an update of the card, and go when it is revoked.
	put(t, st, with(card("ship", "track_parcel", "Carrier status of a consignment by its tracking number."), func(*cards.Card) {}))
	syncView(t, r)
	if got := topNames(t, r, q, 1); len(got) == 0 || got[0] != "ship/track_parcel" {
		t.Errorf("after an update, top = %v; learned phrasings were lost", got)
	}
	put(t, st, with(card("ship", "track_parcel", "x"), func(c *cards.Card) { c.Status = cards.StatusRevoked }))
	syncView(t, r)
	if len(r.Learned()) != 0 {
		t.Errorf("a revoked card kept learned phrasings: %v", r.Learned())
	}
}

func TestLearnBounds(t *testing.T) {
	st := newStore(t, card("s", "a", "Alpha tool."))
	r := newRetriever(t, st, nil)
	ctx := context.Background()
	k := cards.Key{Tenant: acme, Server: "s", Name: "a"}
	for _, tc := range []struct {
		name    string
		key     cards.Key
		phrases []string
		changed bool
	}{
		{"unknown card", cards.Key{Tenant: acme, Server: "s", Name: "missing"}, []string{"x"}, false},
		{"other tenant", cards.Key{Tenant: "globex", Server: "s", Name: "a"}, []string{"x"}, false},
		{"empty after sanitising", k, []string{"  \u200b\u202e "}, false},
		{"first", k, []string{"first phrasing"}, true},
		{"duplicate, other case", k, []string{"FIRST phrasing"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			changed, err := r.Learn(ctx, tc.key, tc.phrases...)
			if err != nil || changed != tc.changed {
				t.Fatalf("Learn = %v, %v; want %v", changed, err, tc.changed)
			}
		})
	}
	long := strings.Repeat("x", retriever.MaxLearnedLen+50)
	var many []string
	for i := range retriever.MaxLearned + 10 {
		many = append(many, fmt.Sprintf("phrasing number %d", i))
	}
	if _, err := r.Learn(ctx, k, append([]string{long}, many...)...); err != nil {
		t.Fatal(err)
	}
	got := r.Learned()[k]
	if len(got) != retriever.MaxLearned {
		t.Fatalf("%d phrasings kept, want %d", len(got), retriever.MaxLearned)
	}
	if got[len(got)-1] != many[len(many)-1] {
		t.Errorf("the latest phrasing was not kept: %q", got[len(got)-1])
	}
	for _, p := range got {
		if len([]rune(p)) > retriever.MaxLearnedLen {
			t.Errorf("phrasing of %d characters kept", len([]rune(p)))
		}
	}
}
