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

// TestLearnedLiveInTheStore: phrasings learned through one view are in the
// store, so a second view over the same store (another replica) ranks the
// same after its next sync, and a view built after a restart starts with
// them; a card's deletion takes them.
func TestLearnedLiveInTheStore(t *testing.T) {
	st := newStore(t,
		card("ship", "track_parcel", "Carrier status of a consignment by tracking number."),
		card("ship", "print_label", "Print a shipping label for a consignment."),
		card("crm", "get_contact", "Read one contact record."),
	)
	a, b := newRetriever(t, st, nil), newRetriever(t, st, nil)
	ctx := context.Background()
	k := cards.Key{Tenant: acme, Server: "ship", Name: "track_parcel"}
	const q = "where the heck is my stuff"
	seq0 := a.Seq()
	if changed, err := a.Learn(ctx, k, "where is my stuff"); err != nil || !changed {
		t.Fatalf("Learn = %v, %v", changed, err)
	}
	if a.Seq() == seq0 {
		t.Errorf("Learn did not move the view's sequence")
	}
	if got, err := st.Learned(ctx, []cards.Key{k}); err != nil || !slices.Equal(got[k], []string{"where is my stuff"}) {
		t.Fatalf("store learned = %q, %v", got, err)
	}
	if got := b.Learned()[k]; len(got) != 0 {
		t.Fatalf("b learned %q before syncing", got)
	}
	syncView(t, b)
	if got := b.Learned()[k]; !slices.Equal(got, []string{"where is my stuff"}) {
		t.Errorf("b after sync learned %q", got)
	}
	ta, tb := topNames(t, a, q, 3), topNames(t, b, q, 3)
	if !slices.Equal(ta, tb) || len(ta) == 0 || ta[0] != "ship/track_parcel" {
		t.Errorf("a ranks %v, b ranks %v; want the same, track_parcel first", ta, tb)
	}
	// A view built later (a restart) has them from the start.
	if got := newRetriever(t, st, nil).Learned()[k]; !slices.Equal(got, []string{"where is my stuff"}) {
		t.Errorf("a new view learned %q", got)
	}
	// Nothing new learned: no change, no sync.
	if changed, err := a.Learn(ctx, k, "WHERE IS MY STUFF"); err != nil || changed {
		t.Errorf("repeated Learn = %v, %v", changed, err)
	}
	if err := st.Delete(ctx, k, 0); err != nil {
		t.Fatal(err)
	}
	syncView(t, a)
	if changed, err := a.Learn(ctx, k, "x"); err != nil || changed {
		t.Errorf("Learn on a deleted card = %v, %v", changed, err)
	}
	put(t, st, card("ship", "track_parcel", "Carrier status of a consignment by tracking number."))
	syncView(t, a)
	if got := a.Learned()[k]; len(got) != 0 {
		t.Errorf("a re-created card has the deleted one's phrasings: %q", got)
	}
}
