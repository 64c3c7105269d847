package retriever

import (
	"context"
	"maps"
	"testing"

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
