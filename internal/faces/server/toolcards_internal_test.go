package server

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/seed0cff8200/cardex/cards"
	"github.com/seed0cff8200/cardex/internal/codec/apiconv"
	"github.com/seed0cff8200/cardex/internal/codec/toolformat"
)

// TestToolCardsBounded: toolCards keeps at most MaxConvertedCards cards and
// about MaxConvertedBytes, converts a card once while it is unchanged, and
// answers a card too large to keep all the same.
func TestToolCardsBounded(t *testing.T) {
	var tc toolCards
	card := func(i int, schema int) cards.Card {
		return cards.Card{Tenant: "acme", Server: "s", Name: fmt.Sprintf("tool_%d", i), Summary: "a tool", Status: cards.StatusActive,
			InputSchema: json.RawMessage(`{"description":"` + strings.Repeat("x", schema) + `"}`)}
	}
	first := card(0, 10)
	if a, b := tc.get(&first), tc.get(&first); a != b {
		t.Error("an unchanged card was converted twice")
	}
	for i := range MaxConvertedCards + 100 {
		c := card(i, 10)
		got := tc.get(&c)
		if !proto.Equal(got.pb, apiconv.ToolCardToProto(&c, true)) || got.provider != "s__"+c.Name {
			t.Fatalf("card %d: %v, provider %q", i, got.pb, got.provider)
		}
	}
	if n := tc.len(); n > MaxConvertedCards || n < MaxConvertedCards-1 {
		t.Errorf("%d cards kept, want about MaxConvertedCards (%d)", n, MaxConvertedCards)
	}
	big := MaxConvertedBytes / 8
	for i := range 10 {
		c := card(i, big)
		if got := tc.get(&c); got.pb.GetInputSchema() != string(c.InputSchema) {
			t.Fatalf("big card %d: wrong schema", i)
		}
		if tc.bytes > MaxConvertedBytes {
			t.Fatalf("%d bytes kept, over MaxConvertedBytes", tc.bytes)
		}
	}
	for i := range 3 {
		c := card(i, big)
		e := tc.get(&c)
		for _, f := range toolformat.Formats {
			if d := tc.definition(e, f); len(d) < big {
				t.Fatalf("big card %d, %s: a definition of %d bytes", i, f, len(d))
			}
			if tc.bytes > MaxConvertedBytes {
				t.Fatalf("with definitions: %d bytes kept, over MaxConvertedBytes", tc.bytes)
			}
		}
	}
	huge := card(1, MaxConvertedBytes)
	kept := tc.len()
	if tc.byKey[huge.Key()] != nil {
		kept-- // its entry, stale
	}
	if got := tc.get(&huge); got.pb.GetInputSchema() != string(huge.InputSchema) {
		t.Fatal("a card over MaxConvertedBytes: wrong schema")
	}
	if tc.bytes > MaxConvertedBytes || tc.len() != kept {
		t.Errorf("after a card over MaxConvertedBytes: %d bytes, %d cards kept (want its stale entry gone, the others kept: %d)", tc.bytes, tc.len(), kept)
	}
}
