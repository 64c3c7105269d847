package feedback

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/seed0cff8200/cardex/cards"
	"github.com/seed0cff8200/cardex/cards/embedded"
	"github.com/seed0cff8200/cardex/embed"
	"github.com/seed0cff8200/cardex/retriever"
)

// guardWorld is a real store and retriever with two tenants' worth of
// ledger tools.
func guardWorld(t *testing.T) (*embedded.Store, *retriever.Retriever) {
	t.Helper()
	st, err := embedded.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	var cs []cards.Card
	for _, tenant := range []string{"acme", "globex"} {
		for i, s := range []string{
			"Export the quarterly ledger as a spreadsheet.", "Export a ledger entry.", "Quarterly revenue report.",
			"Print the ledger totals.", "Archive last quarter's ledger.", "Close the books for a quarter.",
			"Send an invoice to a customer.", "Read one contact record.", "Weather forecast for a city.",
			"Track a parcel by its number.", "Translate a text.", "Convert a currency amount.",
		} {
			cs = append(cs, cards.Card{Tenant: tenant, Server: "books", Name: fmt.Sprintf("tool%02d", i), Kind: cards.KindMCPTool, Summary: s})
		}
	}
	if _, err := st.Put(context.Background(), cs); err != nil {
		t.Fatal(err)
	}
	r, err := retriever.New(context.Background(), st, embed.NewHashed(embed.DefaultDim), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return st, r
}

func ranked(t *testing.T, r *retriever.Retriever, tenant, q string) []cards.Key {
	t.Helper()
	res, err := r.Discover(context.Background(), retriever.Request{Caller: retriever.Caller{Tenant: tenant, Scopes: []string{"*"}}, Query: q, TopK: 12})
	if err != nil {
		t.Fatal(err)
	}
	var out []cards.Key
	for _, s := range res.Tools {
		out = append(out, s.Card.Key())
	}
	return out
}

func TestGuardHoldsBackWhatLowersRecall(t *testing.T) {
	st, r := guardWorld(t)
	const q = "export the quarterly ledger"
	order := ranked(t, r, "acme", q)
	if len(order) < 8 {
		t.Fatalf("precondition: %d tools ranked", len(order))
	}
	// The labelled set: the query needs the tool the ranker puts fifth, so
	// a lesson that lifts any tool from below above it costs recall@5.
	fifth, low := order[4], order[7]
	sets := map[string][]LabelledQuery{"acme": {{ID: "l1", Tenant: "acme", Query: q, Expected: []string{fifth.Server + "/" + fifth.Name}}}}
	g := NewGuard(GuardConfig{Target: r, Store: st, Embedder: embed.NewHashed(embed.DefaultDim), Sets: sets})
	ctx := context.Background()

	// Bad: the labelled words taught to a tool the ranker puts eighth.
	if _, err := g.Learn(ctx, low, q); err != nil {
		t.Fatal(err)
	}
	// Good: the needed tool learns its own request.
	if _, err := g.Learn(ctx, fifth, q); err != nil {
		t.Fatal(err)
	}
	// A tenant without a labelled set learns at once.
	other := cards.Key{Tenant: "globex", Server: low.Server, Name: low.Name}
	if changed, err := g.Learn(ctx, other, q); err != nil || !changed {
		t.Fatalf("an unguarded tenant's lesson: %v, %v", changed, err)
	}
	// Co-usage of a harmless pair is evaluated and recorded.
	if _, err := g.RecordCoUse(ctx, []cards.CoUse{{Tools: []cards.Key{order[0], order[1]}}, {Tools: []cards.Key{{Tenant: "globex", Server: "books", Name: "tool00"}, {Tenant: "globex", Server: "books", Name: "tool01"}}}}); err != nil {
		t.Fatal(err)
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}

	held := g.Held()
	if len(held) != 1 || held[0].Kind != "phrasings" || held[0].Cards[0] != low || held[0].Before != 1 || held[0].After != 0 || held[0].Queries != 1 || !slices.Equal(held[0].Phrases, []string{q}) {
		t.Fatalf("held %+v; want the bad lesson, recall 1 → 0", held)
	}
	if ev, ap := g.Counts(); ev != 3 || ap != 2 {
		t.Errorf("evaluated %d, applied %d; want 3 and 2", ev, ap)
	}
	learned, err := st.Learned(ctx, []cards.Key{low, fifth, other})
	if err != nil {
		t.Fatal(err)
	}
	if len(learned[low]) != 0 || len(learned[fifth]) != 1 || len(learned[other]) != 1 {
		t.Errorf("learned %v: want the held-back lesson absent, the good and the unguarded ones present", learned)
	}
	comps, err := st.Companions(ctx, []cards.Key{order[0], {Tenant: "globex", Server: "books", Name: "tool00"}})
	if err != nil || len(comps) != 2 {
		t.Errorf("co-usage recorded for %d cards (%v), want both tenants'", len(comps), err)
	}
	// The shadow wrote nothing but what was applied: the real view ranks
	// the needed tool in the top 5 still.
	syncErr := r.Sync(ctx)
	if got := ranked(t, r, "acme", q); syncErr != nil || !slices.Contains(got[:5], fifth) {
		t.Errorf("after the guard, %v (sync %v): the needed tool left the top 5", got, syncErr)
	}
}

func TestGuardQueueAndLabelledFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "labelled.jsonl")
	rows := `{"id":"a","tenant":"acme","query":"q1","expected":["s/a"]}
{"id":"b","tenant":"acme","query":"q2","expected":[]}
{"id":"c","tenant":"","query":"q3","expected":["s/c"]}
{"id":"d","tenant":"globex","query":"","intents":["i1"],"expected":["s/d"],"source":"outcome","time":"2025-01-01T00:00:00Z"}
`
	if err := os.WriteFile(path, []byte(rows), 0o600); err != nil {
		t.Fatal(err)
	}
	sets, err := LoadLabelled(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(sets) != 2 || len(sets["acme"]) != 1 || sets["acme"][0].ID != "a" || len(sets["globex"]) != 1 {
		t.Errorf("sets %+v: want acme's a and globex's d", sets)
	}
	if err := os.WriteFile(path, []byte("{not json\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadLabelled(path); err == nil {
		t.Error("a malformed file was read")
	}
}
