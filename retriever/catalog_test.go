package retriever

import (
	"context"
	"maps"
	"testing"
	"unsafe"

	"github.com/seed0cff8200/cardex/cards"
	"github.com/seed0cff8200/cardex/cards/embedded"
	"github.com/seed0cff8200/cardex/embed"
)

// TestViewFollowsServerEntries: the view's server map follows the store's
// server entries through Sync (put, update, delete), per tenant, and holds
// entries whether or not they have cards.
func TestViewFollowsServerEntries(t *testing.T) {
	ctx := context.Background()
	st, err := embedded.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.Put(ctx, []cards.Card{{Tenant: "acme", Server: "github", Name: "search", Summary: "Search code."}}); err != nil {
		t.Fatal(err)
	}
	put := func(ss ...cards.ServerInfo) {
		t.Helper()
		if _, err := st.PutServers(ctx, ss); err != nil {
			t.Fatal(err)
		}
	}
	put(cards.ServerInfo{Tenant: "acme", Name: "github", Title: "GitHub"}, cards.ServerInfo{Tenant: "globex", Name: "jira", Title: "Jira"})
	r, err := New(ctx, st, embed.NewHashed(embed.DefaultDim), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	view := func() map[string]map[string]string {
		r.mu.RLock()
		defer r.mu.RUnlock()
		out := map[string]map[string]string{}
		for tn, m := range r.servers {
			out[tn] = map[string]string{}
			for n, si := range m {
				if si.Tenant != tn || si.Name != n || si.Version == 0 {
					t.Errorf("view entry %s/%s = %+v", tn, n, si)
				}
				out[tn][n] = si.Title
			}
		}
		return out
	}
	check := func(what string, want map[string]map[string]string) {
		t.Helper()
		got := view()
		if len(got) != len(want) {
			t.Errorf("%s: servers = %v, want %v", what, got, want)
			return
		}
		for tn := range want {
			if !maps.Equal(got[tn], want[tn]) {
				t.Errorf("%s: servers = %v, want %v", what, got, want)
			}
		}
	}
	check("at start", map[string]map[string]string{"acme": {"github": "GitHub"}, "globex": {"jira": "Jira"}})

	put(cards.ServerInfo{Tenant: "acme", Name: "github", Title: "GitHub Enterprise"}, cards.ServerInfo{Tenant: "acme", Name: "slack", Title: "Slack"})
	if err := st.DeleteServer(ctx, "globex", "jira", 0); err != nil {
		t.Fatal(err)
	}
	if err := r.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	check("after put and delete", map[string]map[string]string{"acme": {"github": "GitHub Enterprise", "slack": "Slack"}})
	if r.Len() != 1 {
		t.Errorf("server entries counted as cards: Len = %d", r.Len())
	}
	seq, _ := st.Seq(ctx)
	if r.Seq() != seq {
		t.Errorf("view seq %d, store %d", r.Seq(), seq)
	}
}

// TestEntryKeys: every entry of the view has its number, and the lexical
// document and vector row of its card carry it (the key their hits bring
// to fusion), after a load, after updates and deletions that free and reuse
// numbers, and after a restart from a snapshot (whose documents and rows
// were not indexed again).
func TestEntryKeys(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st, err := embedded.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var cs []cards.Card
	for i := range 40 {
		cs = append(cs, cards.Card{Tenant: []string{"acme", "globex"}[i%2], Server: "s", Name: "tool_" + string(rune('a'+i%26)) + string(rune('a'+i/26)), Summary: "Does a thing."})
	}
	if _, err := st.Put(ctx, cs); err != nil {
		t.Fatal(err)
	}
	emb := embed.NewHashed(embed.DefaultDim)
	snap := WithSnapshot(dir + "/retriever.snap")
	check := func(r *Retriever, want int) {
		t.Helper()
		r.mu.RLock()
		defer r.mu.RUnlock()
		m := r.vec.(memoryIndex).m
		if len(r.byID) != want {
			t.Fatalf("%d entries, want %d", len(r.byID), want)
		}
		seen := map[uint32]bool{}
		for id, e := range r.byID {
			if e.no == 0 || seen[e.no] || r.entries[e.no] != e {
				t.Fatalf("%s: number %d (taken twice: %t)", id, e.no, seen[e.no])
			}
			seen[e.no] = true
			if k := r.lex.docs[r.lex.byID[id]].key; k != e.no {
				t.Errorf("%s: lexical key %d, want %d", id, k, e.no)
			}
			if at := m.rows[id]; at.t.name != e.card.Tenant || at.t.keys[at.i] != e.no {
				t.Errorf("%s: vector row %+v, want key %d in %s", id, at, e.no, e.card.Tenant)
			}
		}
		for no, e := range r.entries {
			if e != nil && e.no != uint32(no) {
				t.Errorf("entries[%d] holds number %d", no, e.no)
			}
		}
	}
	r, err := New(ctx, st, emb, nil, snap)
	if err != nil {
		t.Fatal(err)
	}
	check(r, 40)
	for i := 0; i < 40; i += 3 { // delete some, update others
		if err := st.Delete(ctx, cs[i].Key(), 0); err != nil {
			t.Fatal(err)
		}
	}
	var upd []cards.Card
	for i := 1; i < 40; i += 3 {
		c := cs[i]
		c.Summary = "Does another thing."
		upd = append(upd, c)
	}
	extra := cards.Card{Tenant: "acme", Server: "s2", Name: "late", Summary: "Comes late."}
	if _, err := st.Put(ctx, append(upd, extra)); err != nil {
		t.Fatal(err)
	}
	if err := r.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	check(r, 40-14+1)
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	r, err = New(ctx, st, emb, nil, snap)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	check(r, 40-14+1)
}

// TestEntrySizeClass: an entry fits the 512-byte allocation size class,
// which has no allocation header. One field more puts it in the 576-byte
// class: 64 bytes more per card, past the live-heap budget of
// docs/BENCHMARKS.md (2,048 B a card at 10,000 cards). Grow it only with
// the budget measured again (BenchmarkRestart heap-B/card).
func TestEntrySizeClass(t *testing.T) {
	if n := unsafe.Sizeof(entry{}); n > 512 {
		t.Fatalf("entry is %d bytes, over the 512-byte size class", n)
	}
}
