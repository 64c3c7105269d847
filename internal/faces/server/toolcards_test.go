package server_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/seed0cff8200/cardex/cards"
	"github.com/seed0cff8200/cardex/internal/codec/apiconv"
	"github.com/seed0cff8200/cardex/internal/codec/toolformat"
	pb "github.com/seed0cff8200/cardex/proto/cardex/v1"
)

// TestDiscoveredCardsFollowChanges: the API form of a card that discovery
// answers keep (toolCards) never outlives the card. After each change of a
// card (text, schema, annotations, status back to active) the next answer
// holds the card as GetCard gives it, with its definition and the answer in
// every provider format as made afresh from that card, and two tenants'
// cards of the same server and name each answer with their own.
func TestDiscoveredCardsFollowChanges(t *testing.T) {
	zebra := cards.Card{Tenant: "acme", Server: "zoo", Name: "feed_zebra", Kind: cards.KindFunction, Status: cards.StatusActive,
		Summary: "Feed the zebrafrobnicator in the zoo enclosure.", RequiredScopes: []string{"zoo:write"},
		InputSchema: json.RawMessage(`{"type":"object","properties":{"kg":{"type":"number"}},"required":["kg"]}`)}
	other := zebra.Clone()
	other.Tenant, other.Summary = "globex", "Feed the zebrafrobnicator of globex."
	e := newEnv(t, envOptions{cards: []cards.Card{zebra, other}})
	yes := true
	changes := []func(c *cards.Card){
		func(c *cards.Card) {},
		func(c *cards.Card) { c.Summary = "Feed the zebrafrobnicator, twice a day." },
		func(c *cards.Card) { c.Description = "Feeds the zebrafrobnicator."; c.WhenNotToUse = "other animals" },
		func(c *cards.Card) {
			c.InputSchema = json.RawMessage(`{"type":"object","properties":{"kg":{"type":"integer"}},"required":["kg"]}`)
		},
		func(c *cards.Card) { c.Annotations.Idempotent = &yes },
		func(c *cards.Card) { c.Status = cards.StatusPending },
		func(c *cards.Card) { c.Status = cards.StatusActive; c.Aliases = []string{"zebra_food"} },
	}
	for i, change := range changes {
		change(&zebra)
		e.put(t, zebra)
		if zebra.Status != cards.StatusActive {
			continue
		}
		for _, tenant := range []string{"acme", "globex", "acme"} {
			res := e.discover(t, &pb.DiscoverToolsRequest{Caller: &pb.Caller{Tenant: tenant, Scopes: []string{"*"}}, Query: "zebrafrobnicator", TopK: 1})
			if len(res.GetTools()) != 1 {
				t.Fatalf("change %d, %s: %d tools", i, tenant, len(res.GetTools()))
			}
			got, err := e.cat.GetCard(rpcCtx(t), &pb.GetCardRequest{Tenant: tenant, Server: "zoo", Name: "feed_zebra"})
			if err != nil {
				t.Fatal(err)
			}
			sameProto(t, fmt.Sprintf("change %d, %s: discovered card vs GetCard", i, tenant), res.GetTools()[0].GetCard(), got.GetCard())
			if p := res.GetTools()[0].GetProviderName(); p != "zoo__feed_zebra" {
				t.Errorf("provider name %q", p)
			}
			// Each provider format's definition and answer, as made afresh
			// from the card GetCard gives.
			card := apiconv.CardFromProto(got.GetCard())
			for _, f := range toolformat.Formats {
				callID := ""
				if f.Search() {
					callID = "call_1"
				}
				res := e.discover(t, &pb.DiscoverToolsRequest{Caller: &pb.Caller{Tenant: tenant, Scopes: []string{"*"}}, Query: "zebrafrobnicator", TopK: 1,
					Format: string(f), CallId: callID})
				def := toolformat.Definition(f, &card)
				if got := res.GetTools()[0].GetDefinitionJson(); got != string(def) {
					t.Errorf("change %d, %s, %s: definition\n got: %s\nwant: %s", i, tenant, f, got, def)
				}
				if got, want := res.GetProviderJson(), toolformat.Answer(f, []cards.Card{card}, []json.RawMessage{def}, callID); got != string(want) {
					t.Errorf("change %d, %s, %s: provider_json\n got: %s\nwant: %s", i, tenant, f, got, want)
				}
			}
		}
	}
}
