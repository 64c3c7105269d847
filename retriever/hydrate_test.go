package retriever

import (
	"reflect"
	"testing"
	"time"

	"github.com/seed0cff8200/cardex/cards"
)

// TestCopyCardsIsClone: copyCards gives every card what cards.Card.Clone
// gives it, and no slice or pointer of a copy shares memory with the card
// copied or with another copy. Every field of cards.Card is set (checked
// through reflection, so a field added later is held too), and a field of
// a kind the copy does not know (a map, an interface) fails the test.
func TestCopyCardsIsClone(t *testing.T) {
	yes, no := true, false
	full := func(i int) cards.Card {
		s := string(rune('a' + i))
		return cards.Card{Tenant: "t", Server: "s" + s, Name: "n" + s, Kind: cards.KindMCPTool, Summary: "sum " + s,
			Description: "desc", Aliases: []string{"a1" + s, "a2"}, Tags: []string{"tag" + s}, WhenNotToUse: "never",
			RequiredScopes: []string{"x:read", "y:" + s}, Status: cards.StatusActive,
			Annotations: cards.Annotations{ReadOnly: &yes, Destructive: &no, Idempotent: &yes, OpenWorld: &no},
			InputSchema: []byte(`{"type":"object","p":"` + s + `"}`), OutputSchema: []byte(`{"type":"string"}`),
			SearchExamples: []string{"ex " + s}, ExamplesSource: &cards.ExamplesSource{Author: "person", CardHash: "ab"},
			Version: int64(i + 1), UpdatedAt: time.Unix(int64(i), 0)}
	}
	src := []cards.Card{full(0), {Tenant: "t", Server: "s", Name: "bare", Aliases: []string{}, InputSchema: []byte{}}, full(2)}
	checkAllSet(t, reflect.ValueOf(src[0]), "Card")
	tools := make([]Scored, len(src))
	for i := range src {
		tools[i].Card = src[i]
	}
	copyCards(tools)
	for i := range src {
		if want := src[i].Clone(); !reflect.DeepEqual(tools[i].Card, want) {
			t.Errorf("card %d: copy\n %+v\nclone\n %+v", i, tools[i].Card, want)
		}
		for j := range src {
			sharesNothing(t, reflect.ValueOf(tools[i].Card), reflect.ValueOf(src[j]), "Card")
			if j != i {
				sharesNothing(t, reflect.ValueOf(tools[i].Card), reflect.ValueOf(tools[j].Card), "Card")
			}
		}
	}
	// An append to one copy's slice does not write into the next one's.
	a := append(tools[0].Card.Aliases, "more")
	b := append(tools[0].Card.InputSchema, '!')
	if tools[2].Card.Aliases[0] != "a1c" || a[2] != "more" || string(tools[1].Card.InputSchema) != "" || b[len(b)-1] != '!' ||
		tools[2].Card.InputSchema[0] != '{' {
		t.Error("an append to a copy reached another")
	}
}

// checkAllSet fails for a zero field of v (a struct), so that the test
// sets every field of cards.Card.
func checkAllSet(t *testing.T, v reflect.Value, path string) {
	for i := range v.NumField() {
		f, name := v.Field(i), path+"."+v.Type().Field(i).Name
		if f.IsZero() {
			t.Errorf("%s is not set in the test card", name)
		}
		if f.Kind() == reflect.Struct && f.Type() != reflect.TypeFor[time.Time]() {
			checkAllSet(t, f, name)
		}
	}
}

// sharesNothing fails when a slice or pointer field of a (a struct) points
// at memory that the same field of b points at.
func sharesNothing(t *testing.T, a, b reflect.Value, path string) {
	for i := range a.NumField() {
		fa, fb, name := a.Field(i), b.Field(i), path+"."+a.Type().Field(i).Name
		switch fa.Kind() {
		case reflect.String, reflect.Int, reflect.Int64, reflect.Int32, reflect.Bool, reflect.Float64:
		case reflect.Slice:
			if fa.Len() > 0 && fb.Len() > 0 && fa.Pointer() == fb.Pointer() {
				t.Errorf("%s shares its elements", name)
			}
		case reflect.Pointer:
			if !fa.IsNil() && fa.Pointer() == fb.Pointer() {
				t.Errorf("%s shares its target", name)
			}
		case reflect.Struct:
			if fa.Type() != reflect.TypeFor[time.Time]() {
				sharesNothing(t, fa, fb, name)
			}
		default:
			t.Errorf("%s: a field of kind %s, which copyCards does not copy", name, fa.Kind())
		}
	}
}
