package apiconv_test

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/seed0cff8200/cardex/cards"
	"github.com/seed0cff8200/cardex/internal/codec/apiconv"
)

// TestSameToolCard changes each field of a card in turn (the fields of its
// annotations too, each from stated to unstated and to the other value):
// wherever ToolCardToProto's answer changes, SameToolCard must say the cards
// differ, so a conversion kept for one card is never handed out for another.
// A card field added later is covered without touching the test.
func TestSameToolCard(t *testing.T) {
	yes, no := true, false
	base := cards.Card{Tenant: "acme", Server: "billing", Name: "create_invoice", Kind: cards.KindMCPTool, Summary: "Create an invoice",
		Description: "Creates an invoice.", Aliases: []string{"bill"}, Tags: []string{"finance"}, WhenNotToUse: "refunds",
		RequiredScopes: []string{"billing:write"}, Status: cards.StatusActive, Annotations: cards.Annotations{ReadOnly: &no, Destructive: &yes},
		InputSchema: json.RawMessage(`{"type":"object"}`), OutputSchema: json.RawMessage(`{"type":"string"}`), SearchExamples: []string{"bill a client"},
		ExamplesSource: &cards.ExamplesSource{Author: "a"}, Version: 3, UpdatedAt: time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)}
	if c := base.Clone(); !apiconv.SameToolCard(&base, &c) {
		t.Fatal("a card and its clone: SameToolCard is false")
	}
	var changes []func(c *cards.Card) string
	cv := reflect.TypeFor[cards.Card]()
	for i := range cv.NumField() {
		f := cv.Field(i)
		if f.Type == reflect.TypeFor[cards.Annotations]() {
			for j := range f.Type.NumField() {
				for _, to := range []*bool{nil, &yes, &no} {
					changes = append(changes, func(c *cards.Card) string {
						reflect.ValueOf(&c.Annotations).Elem().Field(j).Set(reflect.ValueOf(to))
						return "annotations." + f.Type.Field(j).Name
					})
				}
			}
			continue
		}
		changes = append(changes, func(c *cards.Card) string {
			v := reflect.ValueOf(c).Elem().Field(i)
			switch x := v.Addr().Interface().(type) {
			case *json.RawMessage:
				*x = json.RawMessage(`{"type":"object","title":"other"}`)
			case *[]string:
				*x = append(*x, "other")
			case *time.Time:
				*x = x.Add(time.Nanosecond)
			case *int64:
				*x++
			case **cards.ExamplesSource:
				*x = &cards.ExamplesSource{Author: "b"}
			default:
				if v.Kind() != reflect.String {
					t.Fatalf("field %s (%s): no change written for its type", f.Name, f.Type)
				}
				v.SetString(v.String() + "x")
			}
			return f.Name
		})
	}
	for _, change := range changes {
		c := base.Clone()
		name := change(&c)
		converted := proto.Equal(apiconv.ToolCardToProto(&base, true), apiconv.ToolCardToProto(&c, true))
		if apiconv.SameToolCard(&base, &c) && !converted {
			t.Errorf("%s changed: SameToolCard is true, the conversions differ", name)
		}
		if !apiconv.SameToolCard(&base, &c) && converted {
			t.Logf("%s changed: SameToolCard is false, the conversions are equal (a conversion made again)", name)
		}
	}
	// Unset and empty lists and schemas convert alike.
	a, b := base.Clone(), base.Clone()
	a.Aliases, b.Aliases, a.InputSchema, b.InputSchema = nil, []string{}, nil, json.RawMessage{}
	if !apiconv.SameToolCard(&a, &b) {
		t.Error("nil and empty aliases and schema: SameToolCard is false")
	}
}
