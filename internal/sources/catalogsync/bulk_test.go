package catalogsync_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/seed0cff8200/cardex/cards"
	"github.com/seed0cff8200/cardex/cards/embedded"
	"github.com/seed0cff8200/cardex/internal/sources/catalogsync"
)

func tools(server string, n int) []cards.Card {
	out := make([]cards.Card, n)
	for i := range out {
		c := cards.Card{Tenant: "acme", Server: server, Name: fmt.Sprintf("tool_%04d", i), Kind: cards.KindMCPTool,
			Summary: fmt.Sprintf("Tool %d of %s.", i, server)}
		if err := cards.Normalize(&c); err != nil {
			panic(err)
		}
		out[i] = c
	}
	return out
}

// TestBulkImport: a catalogue of several servers against a real store:
// created in writes that never split a server, idempotent on a rerun,
// vanished tools revoked in their own namespace only, other namespaces and
// tenants untouched.
func TestBulkImport(t *testing.T) {
	ctx := context.Background()
	st, err := embedded.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	cat := catalogsync.StoreCatalog{Store: st}
	// Already stored: a card of server c that the file no longer lists, a
	// card of a server the file does not name, another tenant's card.
	keepOther := cards.Card{Tenant: "acme", Server: "zzz", Name: "other", Kind: cards.KindMCPTool, Summary: "Another namespace."}
	globex := cards.Card{Tenant: "globex", Server: "c", Name: "old", Kind: cards.KindMCPTool, Summary: "Another tenant."}
	if _, err := st.Put(ctx, []cards.Card{tools("c", 11)[10], keepOther, globex}); err != nil {
		t.Fatal(err)
	}
	sources := []catalogsync.Source{{Server: "a", Cards: tools("a", 700)}, {Server: "b", Cards: tools("b", 400)}, {Server: "c", Cards: tools("c", 10)}}
	entries := []cards.ServerInfo{{Tenant: "acme", Name: "a", Title: "A"}, {Tenant: "acme", Name: "b", Title: "B"}, {Tenant: "acme", Name: "d", Description: "No tools yet."}}
	opt := catalogsync.Options{Kind: cards.KindMCPTool, Scopes: []string{"demo:use"}}

	plan, err := catalogsync.PlanBulk(ctx, cat, "acme", sources, entries, opt)
	if err != nil {
		t.Fatal(err)
	}
	if c, r, s := plan.Count(catalogsync.Create), plan.Count(catalogsync.Revoke), plan.ServerCount(catalogsync.Create); c != 1110 || r != 1 || s != 3 {
		t.Fatalf("created %d, revoked %d, entries created %d; want 1110, 1, 3", c, r, s)
	}
	var progress []string
	if err := catalogsync.ApplyBulk(ctx, cat, plan, func(p catalogsync.Progress) {
		progress = append(progress, fmt.Sprintf("%s %d/%d", p.What, p.Done, p.Total))
	}); err != nil {
		t.Fatal(err)
	}
	// a alone (b would make 1,100), then b and c together.
	if want := []string{"cards 700/1111", "cards 1111/1111", "server entries 3/3"}; !slices.Equal(progress, want) {
		t.Errorf("progress %v, want %v", progress, want)
	}
	got, err := cat.List(ctx, "acme", "a")
	if err != nil || len(got) != 700 || !slices.Equal(got[0].RequiredScopes, []string{"demo:use"}) {
		t.Fatalf("server a: %d cards, %v", len(got), err)
	}
	if old, err := st.Get(ctx, cards.Key{Tenant: "acme", Server: "c", Name: "tool_0010"}); err != nil || old.Status != cards.StatusRevoked {
		t.Errorf("c/tool_0010: %+v, %v; want revoked", old.Status, err)
	}
	for _, k := range []cards.Key{keepOther.Key(), globex.Key()} {
		if c, err := st.Get(ctx, k); err != nil || c.Status != cards.StatusActive || c.Version != 1 {
			t.Errorf("%v: %+v, %v; want untouched", k, c, err)
		}
	}
	if d, err := st.GetServer(ctx, "acme", "d"); err != nil || d.Description != "No tools yet." {
		t.Errorf("entry d: %+v, %v", d, err)
	}

	// Rerun: everything unchanged, nothing written.
	again, err := catalogsync.PlanBulk(ctx, cat, "acme", sources, entries, opt)
	if err != nil {
		t.Fatal(err)
	}
	if u, s := again.Count(catalogsync.Unchanged), again.ServerCount(catalogsync.Unchanged); u != 1110 || s != 3 || len(again.Plans[0].Writes())+len(again.Plans[1].Writes())+len(again.Plans[2].Writes()) != 0 {
		t.Errorf("rerun: %d unchanged cards, %d unchanged entries", u, s)
	}
	progress = nil
	if err := catalogsync.ApplyBulk(ctx, cat, again, func(p catalogsync.Progress) { progress = append(progress, p.What) }); err != nil || len(progress) != 0 {
		t.Errorf("rerun wrote %v (%v)", progress, err)
	}

	// The file changes: b's first tool says something else, a's last is gone.
	changed := slices.Clone(sources)
	changed[0].Cards = changed[0].Cards[:699]
	changed[1].Cards = slices.Clone(changed[1].Cards)
	changed[1].Cards[0].Summary = "Tool zero, reworded."
	plan, err = catalogsync.PlanBulk(ctx, cat, "acme", changed, nil, opt)
	if err != nil {
		t.Fatal(err)
	}
	if u, r := plan.Count(catalogsync.Update), plan.Count(catalogsync.Revoke); u != 1 || r != 1 {
		t.Errorf("after the change: %d updated, %d revoked; want 1, 1", u, r)
	}

	// Refusals: a namespace twice; a namespace whose change needs more
	// than one atomic write.
	if _, err := catalogsync.PlanBulk(ctx, cat, "acme", []catalogsync.Source{sources[2], sources[2]}, nil, opt); err == nil || !strings.Contains(err.Error(), "twice") {
		t.Errorf("twice: %v", err)
	}
	if _, err := catalogsync.PlanBulk(ctx, cat, "acme", []catalogsync.Source{{Server: "big", Cards: tools("big", 1001)}}, nil, opt); err == nil || !strings.Contains(err.Error(), "at most 1000") {
		t.Errorf("too big: %v", err)
	}
}
