package server_test

// The query operators (select:, +word) through the real gRPC server, on
// DiscoverTools (query and intents) and SearchTools: a selection is exactly
// the named tools the caller may use, and +word keeps only the tools that
// hold the word, inside the caller's candidate set.

import (
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/seed0cff8200/cardex/cards"
	pb "github.com/seed0cff8200/cardex/proto/cardex/v1"
	"github.com/seed0cff8200/cardex/retriever"
)

// holdsWord is a loose, independent check of +word: the word appears,
// ignoring case, in the card's server, name, summary, description, aliases
// or tags.
func holdsWord(c cards.Card, w string) bool {
	text := strings.ToLower(strings.Join(append([]string{c.Server, c.Name, c.Summary, c.Description}, append(c.Aliases, c.Tags...)...), " "))
	return strings.Contains(text, strings.ToLower(w))
}

func TestQueryOperators(t *testing.T) {
	all := append(acmeCards(t), inactiveCards()...)
	e := newEnv(t, envOptions{cards: all})
	support := supportCaller()
	byName := map[string]cards.Card{}
	for _, c := range all {
		byName[c.Server+"/"+c.Name] = c
	}
	visible := map[string]bool{}
	for _, c := range supportVisible(all) {
		visible[c.Server+"/"+c.Name] = true
	}
	// get_order and get_invoice are the support caller's; cancel_order needs
	// orders:write, export_ticket_archive is revoked, nope/none is no card.
	sel := "select:orders/get_order,orders/cancel_order,support/export_ticket_archive,nope/none,billing/get_invoice"
	if !visible["orders/get_order"] || !visible["billing/get_invoice"] || visible["orders/cancel_order"] || visible["support/export_ticket_archive"] {
		t.Fatal("the example catalogue changed: pick other tools for this test")
	}

	t.Run("DiscoverTools select", func(t *testing.T) {
		res := e.discover(t, &pb.DiscoverToolsRequest{Caller: support, Query: sel, TopK: 1})
		mustEqualStrings(t, "support", toolNames(res.GetTools()), []string{"orders/get_order", "billing/get_invoice"})
		for _, x := range res.GetTools() {
			if x.GetReason() != retriever.SelectedReason || !x.GetForQuery() || x.GetConfidence() != 1 || len(x.GetCard().GetInputSchema()) == 0 {
				t.Errorf("%s: reason %q, for_query %v, confidence %v, schema %d bytes", fmtTool(x), x.GetReason(), x.GetForQuery(), x.GetConfidence(), len(x.GetCard().GetInputSchema()))
			}
		}
		if res.GetAbstained() || res.GetLowConfidence() {
			t.Errorf("abstained %v, low confidence %v", res.GetAbstained(), res.GetLowConfidence())
		}
		res = e.discover(t, &pb.DiscoverToolsRequest{Caller: adminCaller(), Query: sel})
		mustEqualStrings(t, "admin", toolNames(res.GetTools()), []string{"orders/get_order", "orders/cancel_order", "billing/get_invoice"})

		// Unauthorized and unknown answer alike, accounting included.
		a := stable(e.discover(t, &pb.DiscoverToolsRequest{Caller: support, Query: "select:orders/cancel_order"}))
		b := stable(e.discover(t, &pb.DiscoverToolsRequest{Caller: support, Query: "select:nope/none"}))
		a.DiscoveryId, b.DiscoveryId = "", ""
		sameProto(t, "unauthorized vs unknown", a, b)
	})

	t.Run("DiscoverTools intents", func(t *testing.T) {
		res := e.discover(t, &pb.DiscoverToolsRequest{Caller: support, Intents: []string{"select:billing/get_invoice", "+orders where is my package"}, TopK: 3})
		names := toolNames(res.GetTools())
		if len(names) < 2 || names[0] != "billing/get_invoice" || !slices.Equal(res.GetTools()[0].GetIntents(), []int32{0}) {
			t.Fatalf("got %v", names)
		}
		for _, x := range res.GetTools()[1:] {
			if c := byName[x.GetCard().GetServer()+"/"+x.GetCard().GetName()]; !holdsWord(c, "orders") || !visible[x.GetCard().GetServer()+"/"+x.GetCard().GetName()] {
				t.Errorf("+orders reached %s", fmtTool(x))
			}
		}
	})

	t.Run("DiscoverTools +word", func(t *testing.T) {
		res := e.discover(t, &pb.DiscoverToolsRequest{Caller: support, Query: "+billing money", TopK: 50})
		var want []string
		for n := range visible {
			if strings.HasPrefix(n, "billing/") {
				want = append(want, n)
			}
		}
		got := toolNames(res.GetTools())
		for _, n := range want {
			if !slices.Contains(got, n) {
				t.Errorf("+billing: %s missing from %v", n, got)
			}
		}
		for _, n := range got {
			if !visible[n] || !holdsWord(byName[n], "billing") {
				t.Errorf("+billing reached %s", n)
			}
		}
		if int(res.GetCandidateCount()) != len(supportVisible(all)) {
			t.Errorf("candidate_count %d: it counts the caller's whole candidate set (%d)", res.GetCandidateCount(), len(supportVisible(all)))
		}
	})

	t.Run("SearchTools", func(t *testing.T) {
		mustEqualStrings(t, "select", summaryNames(e.searchAll(t, support, sel, 1)), []string{"orders/get_order", "billing/get_invoice"})
		rows := summaryNames(e.searchAll(t, support, "+billing", 3))
		if len(rows) == 0 {
			t.Fatal("+billing: nothing")
		}
		for _, n := range rows {
			if !visible[n] || !holdsWord(byName[n], "billing") {
				t.Errorf("+billing reached %s", n)
			}
		}
	})

	t.Run("errors", func(t *testing.T) {
		_, err := e.disc.DiscoverTools(rpcCtx(t), &pb.DiscoverToolsRequest{Caller: support, Query: "select:"})
		wantCode(t, err, codes.InvalidArgument, "query", "select:")
		_, err = e.disc.DiscoverTools(rpcCtx(t), &pb.DiscoverToolsRequest{Caller: support, Intents: []string{"a", "select:a/b/c"}})
		wantCode(t, err, codes.InvalidArgument, "intents[1]")
		_, err = e.disc.SearchTools(rpcCtx(t), &pb.SearchToolsRequest{Caller: support, Query: "+a +b +c +d +e +f +g +h +i"})
		wantCode(t, err, codes.InvalidArgument, "query", "the limit is 8")
	})
}
