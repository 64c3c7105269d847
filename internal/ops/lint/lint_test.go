package lint

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/seed0cff8200/cardex/cards"
	"github.com/seed0cff8200/cardex/embed"
	"github.com/seed0cff8200/cardex/internal/telemetry/feedback"
)

func c(server, name, summary string, aliases []string, wnu string) cards.Card {
	return cards.Card{Tenant: "acme", Server: server, Name: name, Summary: summary, Aliases: aliases, WhenNotToUse: wnu, Status: cards.StatusActive}
}

func kinds(fs []Finding, kind string) []Finding {
	var out []Finding
	for _, f := range fs {
		if f.Kind == kind {
			out = append(out, f)
		}
	}
	return out
}

func TestLookalikes(t *testing.T) {
	emb := embed.NewHashed(embed.DefaultDim)
	a := c("orders", "search_orders", "Find a customer's orders by email or date range.", []string{"find orders"}, "")
	b := c("orders", "get_order", "Get one customer order by its order id.", []string{"order details"}, "")
	far := c("infra", "restart_service", "Restart a running service.", []string{"bounce the api"}, "")
	cases := []struct {
		name    string
		a, b    cards.Card
		want    int
		lacking string
	}{
		{"neither has guidance", a, b, 1, "add when_not_to_use to orders/get_order and orders/search_orders"},
		{"one has guidance", with(a, "Not for a known order id; use get_order."), b, 1, "add when_not_to_use to orders/get_order"},
		{"both have guidance", with(a, "x"), with(b, "y"), 0, ""},
		{"unrelated", a, far, 0, ""},
		{"other tenant", a, func() cards.Card { x := b; x.Tenant = "globex"; return x }(), 0, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fs, err := Run(context.Background(), []cards.Card{tc.a, tc.b}, nil, emb, Options{})
			if err != nil {
				t.Fatal(err)
			}
			got := kinds(fs, KindLookalike)
			if len(got) != tc.want {
				t.Fatalf("%d look-alike findings, want %d: %+v", len(got), tc.want, got)
			}
			if tc.want == 1 && (!strings.Contains(got[0].Message, tc.lacking) || got[0].Similarity < DefaultSimilarity) {
				t.Errorf("message %q (similarity %v) should contain %q", got[0].Message, got[0].Similarity, tc.lacking)
			}
		})
	}
}

func with(x cards.Card, wnu string) cards.Card { x.WhenNotToUse = wnu; return x }

func TestNoAliasesAndMisses(t *testing.T) {
	emb := embed.NewHashed(embed.DefaultDim)
	track := c("orders", "track_shipment", "Track a package with the carrier.", []string{"where is my package"}, "")
	bare := c("crm", "get_contact", "Read a contact.", nil, "")
	revoked := c("crm", "old_tool", "Old.", nil, "")
	revoked.Status = cards.StatusRevoked
	tool := &feedback.Tool{Server: "orders", Name: "track_shipment"}
	events := []feedback.Event{
		{Type: feedback.TypeOutcome, Tenant: "acme", Tool: tool, Miss: true, Query: "my parcel is late"},
		{Type: feedback.TypeImplicitMiss, Tenant: "acme", Tool: tool, Miss: true, Query: "My parcel is LATE"},
		{Type: feedback.TypeImplicitMiss, Tenant: "acme", Tool: tool, Miss: true, Query: "where is my package"},
		{Type: feedback.TypeOutcome, Tenant: "acme", Tool: tool, Miss: false, Query: "track it"},
		{Type: feedback.TypeOutcome, Tenant: "globex", Tool: tool, Miss: true, Query: "globex query"},
		{Type: feedback.TypeOutcome, Tenant: "acme", NoneFit: true, Miss: true, Query: "nothing fits"},
	}
	fs, err := Run(context.Background(), []cards.Card{track, bare, revoked}, events, emb, Options{})
	if err != nil {
		t.Fatal(err)
	}
	na := kinds(fs, KindNoAliases)
	if len(na) != 1 || na[0].Card.Name != "get_contact" {
		t.Errorf("no-alias findings %+v; want get_contact only (revoked cards are not linted)", na)
	}
	m := kinds(fs, KindMissed)
	if len(m) != 1 || m[0].Misses != 3 {
		t.Fatalf("missed findings %+v; want track_shipment with 3 misses (other tenants and hits ignored)", m)
	}
	if !slices.Equal(m[0].SuggestedAliases, []string{"my parcel is late"}) {
		t.Errorf("suggested %q; want the missed query once, existing aliases left out", m[0].SuggestedAliases)
	}
}
