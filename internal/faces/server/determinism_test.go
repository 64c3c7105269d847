package server_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/seed0cff8200/cardex/cards"
	pb "github.com/seed0cff8200/cardex/proto/cardex/v1"
	"github.com/seed0cff8200/cardex/retriever"
)

func TestDiscoverToolsIsDeterministic(t *testing.T) {
	e := newEnv(t, envOptions{cards: slices.Concat(acmeCards(t), globexCards(t))})
	alpha := 0.3
	reqs := []*pb.DiscoverToolsRequest{
		{Caller: supportCaller(), Query: "customer wants their money back for order 1234"},
		{Caller: adminCaller(), Query: "where is my package", TopK: 50},
		{Caller: adminCaller(), Query: "search", TopK: 20, Fusion: "relative", Alpha: &alpha},
		{Caller: adminCaller(), Query: "restart the payments service", TopK: 8,
			AlwaysLoad: []*pb.ToolRef{{Server: "infra", Name: "get_service_status"}, {Server: "github", Name: "search"}}},
		{Caller: globexAdmin(), Query: "order", TopK: 50},
	}
	for _, req := range reqs {
		t.Run(req.GetCaller().GetTenant()+"/"+req.GetQuery(), func(t *testing.T) {
			first := stable(e.discover(t, req))
			if len(first.GetTools()) == 0 {
				t.Fatalf("no tools for %q", req.GetQuery())
			}
			for i := 1; i < 20; i++ {
				got := stable(e.discover(t, req))
				if !protoEqual(got, first) {
					t.Fatalf("run %d differs from run 1: %s", i+1, firstDiff(got.GetTools(), first.GetTools()))
				}
			}
		})
	}
}

// TestDiscoverToolsTiesBreakByServerThenName builds cards that score exactly
// the same (identical text, only the server or name differs, and a query that
// matches neither) and checks that ties come back in (server, name) order.
// Server names are chosen so that "-" and "." (both sort before "/") expose
// an order taken from the "tenant/server/name" string instead.
func TestDiscoverToolsTiesBreakByServerThenName(t *testing.T) {
	var cs []cards.Card
	for _, srv := range []string{"ops.eu", "ops", "opsx", "ops-eu", "alpha"} {
		for _, name := range []string{"frob_b", "frob", "frob_a"} {
			cs = append(cs, cards.Card{Tenant: "tiecorp", Server: srv, Name: name,
				Summary: "Frobnicate the quantum widget registry."})
		}
	}
	want := []string{}
	for _, srv := range []string{"alpha", "ops", "ops-eu", "ops.eu", "opsx"} {
		for _, name := range []string{"frob", "frob_a", "frob_b"} {
			want = append(want, srv+"/"+name)
		}
	}
	// Identical tools on several servers are near-duplicates, which a
	// shortlist collapses (TestDiscoverToolsCollapsesNearDuplicates); here
	// every one must be ranked on its own.
	e := newEnv(t, envOptions{cards: cs, retriever: []retriever.Option{retriever.WithCollapse(false)}})
	caller := &pb.Caller{Tenant: "tiecorp", Scopes: []string{"*"}}
	zero := 0.0
	t.Run("DiscoverTools/relative_alpha0", func(t *testing.T) {
		res := e.discover(t, &pb.DiscoverToolsRequest{Caller: caller, Query: "quantum widget registry", TopK: 50, Fusion: "relative", Alpha: &zero})
		for _, x := range res.GetTools() {
			if x.GetScores().GetFused() != res.GetTools()[0].GetScores().GetFused() {
				t.Fatalf("not a tie: %s vs %s; the test's premise is broken", fmtTool(x), fmtTool(res.GetTools()[0]))
			}
		}
		mustEqualStrings(t, "tied tools in (server, name) order", toolNames(res.GetTools()), want)
	})
	t.Run("SearchTools/no_query", func(t *testing.T) {
		// Documented as "(server, name) order".
		mustEqualStrings(t, "every tool in (server, name) order", summaryNames(e.searchAll(t, caller, "", 4)), want)
	})
	t.Run("ListCards", func(t *testing.T) {
		var got []string
		for _, c := range e.listAll(t, "tiecorp") {
			got = append(got, c.GetServer()+"/"+c.GetName())
		}
		mustEqualStrings(t, "ListCards in (server, name) order", got, want)
	})
}

// TestSearchToolsPagesAreConsistent: paging through a ranked SearchTools
// with small pages must give the same rows as one big page, each row once.
func TestSearchToolsPagesAreConsistent(t *testing.T) {
	e := newEnv(t, envOptions{cards: slices.Concat(acmeCards(t), globexCards(t))})
	for _, caller := range []*pb.Caller{adminCaller(), supportCaller()} {
		for _, q := range []string{"order", "customer", "invoice refund payment", "list", "the"} {
			t.Run(fmt.Sprintf("%s/%s", strings.Join(caller.GetScopes(), ","), q), func(t *testing.T) {
				one := summaryNames(e.searchAll(t, caller, q, 100))
				for _, ps := range []int32{1, 3, 5, 7} {
					paged := summaryNames(e.searchAll(t, caller, q, ps))
					seen := map[string]bool{}
					for _, n := range paged {
						if seen[n] {
							t.Errorf("page_size %d: %s returned twice", ps, n)
						}
						seen[n] = true
					}
					mustEqualStrings(t, fmt.Sprintf("page_size %d vs one page", ps), paged, one)
				}
			})
		}
	}
}

// TestDiscoverToolsCollapsesNearDuplicates: tools that are the same on
// several servers take one slot, held by the first in (server, name) order
// when they tie, which names the others as alternatives in that order; a
// caller who may not use one of them never sees it named.
func TestDiscoverToolsCollapsesNearDuplicates(t *testing.T) {
	var cs []cards.Card
	for _, srv := range []string{"ops.eu", "ops", "opsx", "ops-eu", "alpha"} {
		c := cards.Card{Tenant: "tiecorp", Server: srv, Name: "frob", Summary: "Frobnicate the quantum widget registry."}
		if srv == "opsx" {
			c.RequiredScopes = []string{"ops:admin"}
		}
		cs = append(cs, c)
	}
	cs = append(cs, cards.Card{Tenant: "tiecorp", Server: "alpha", Name: "frob_other", Summary: "Count the quantum widget registry entries."})
	e := newEnv(t, envOptions{cards: cs})
	zero := 0.0
	for _, tc := range []struct {
		scopes []string
		alts   []string
	}{
		{[]string{"*"}, []string{"ops/frob", "ops-eu/frob", "ops.eu/frob", "opsx/frob"}},
		{nil, []string{"ops/frob", "ops-eu/frob", "ops.eu/frob"}},
	} {
		res := e.discover(t, &pb.DiscoverToolsRequest{Caller: &pb.Caller{Tenant: "tiecorp", Scopes: tc.scopes},
			Query: "frobnicate the quantum widget registry", TopK: 50, Fusion: "relative", Alpha: &zero})
		got := toolNames(res.GetTools())
		mustEqualStrings(t, "one slot for the near-duplicates", got, []string{"alpha/frob", "alpha/frob_other"})
		var alts []string
		for _, a := range res.GetTools()[0].GetAlternatives() {
			alts = append(alts, a.GetServer()+"/"+a.GetName())
		}
		mustEqualStrings(t, fmt.Sprintf("alternatives for scopes %v", tc.scopes), alts, tc.alts)
	}
}
