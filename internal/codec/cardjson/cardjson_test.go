package cardjson_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/seed0cff8200/cardex/cards"
	"github.com/seed0cff8200/cardex/internal/codec/cardjson"
)

func TestShapeRoundTrips(t *testing.T) {
	yes := true
	c := cards.Card{Tenant: "acme", Server: "orders", Name: "get_order", Kind: cards.KindMCPTool, Summary: "Show one order.",
		Aliases: []string{"order details"}, Tags: []string{"orders"}, RequiredScopes: []string{"orders:read"}, Status: cards.StatusActive,
		Annotations: cards.Annotations{ReadOnly: &yes}, InputSchema: json.RawMessage(`{"properties":{"order_id":{"type":"string"}},"type":"object"}`),
		SearchExamples: []string{"where is my parcel"}, ExamplesSource: &cards.ExamplesSource{Author: cards.AuthorModel, Model: "m1", PromptVersion: "v1", CardHash: "ab12"},
		Version: 12345678901, UpdatedAt: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)}
	b, err := json.Marshal(cardjson.From(&c))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"input_schema":{"properties":`, `"version":12345678901`, `"required_scopes":["orders:read"]`,
		`"annotations":{"read_only":true}`, `"updated_at":"2025-01-02T03:04:05Z"`, `"search_examples":["where is my parcel"]`,
		`"search_examples_source":{"author":"model","model":"m1","prompt_version":"v1","card_hash":"ab12"}`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("%s lacks %s", b, want)
		}
	}
	if strings.Contains(string(b), `"when_not_to_use"`) || strings.Contains(string(b), `"output_schema"`) {
		t.Errorf("empty fields are left out: %s", b)
	}
	// The printed card is a card file.
	back, err := cards.ParseFile("card.json", b)
	if err != nil || len(back) != 1 || !cards.SameContent(&back[0], &c) || back[0].Version != c.Version {
		t.Fatalf("parse back: %v %+v", err, back)
	}
	m, _ := json.Marshal(cardjson.ForModel(&c))
	for _, gone := range []string{"tenant", "status", "aliases", "tags", "required_scopes", "updated_at", "search_examples", "parcel"} {
		if strings.Contains(string(m), `"`+gone+`"`) {
			t.Errorf("ForModel shows %s: %s", gone, m)
		}
	}
	if !strings.Contains(string(m), `"input_schema":{"properties"`) {
		t.Errorf("ForModel: %s", m)
	}
}
