package retriever

import (
	"reflect"
	"testing"
	"time"

	"github.com/seed0cff8200/cardex/cards"
)

// fill sets every field of v (a pointer to a struct) to a value that is not
// its zero, recursively, varying with seed: a field added to the type is
// filled without a change here.
func fill(v reflect.Value, seed int) {
	switch v.Kind() {
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem(), seed)
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[time.Time]() {
			v.Set(reflect.ValueOf(time.Date(2026, 3, 4, 5, 6, 7, 8000*(seed+1), time.UTC)))
			return
		}
		for i := range v.NumField() {
			fill(v.Field(i), seed+i+1)
		}
	case reflect.String:
		v.SetString("s" + string(rune('a'+seed%26)) + "é")
	case reflect.Slice:
		n := 1 + seed%3
		v.Set(reflect.MakeSlice(v.Type(), n, n))
		for i := range n {
			fill(v.Index(i), seed+i)
		}
	case reflect.Bool:
		v.SetBool(seed%2 == 0)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(int64(seed*7919 + 1))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(uint64(seed*104729 + 1))
	case reflect.Float32, reflect.Float64:
		v.SetFloat(float64(seed) + 0.1)
	default:
		panic("fill: a field of kind " + v.Kind().String())
	}
}

// TestEntryRecordRoundTrip: an entry's snapshot record brings back every
// field of the card (all of them filled, whatever fields the card type
// has, and with the lists nil, empty, and the optional flags unset), its
// examples, learned phrasings, co-usage table, token estimate, duplicate
// key and summary words; a server entry's record, every field of it. A
// record cut short or with bytes after it is refused.
func TestEntryRecordRoundTrip(t *testing.T) {
	full := &entry{}
	fill(reflect.ValueOf(&full.card).Elem(), 3)
	full.card.SearchExamples, full.card.ExamplesSource = nil, nil // held apart: entry.examples
	var stored cards.Companions
	fill(reflect.ValueOf(&stored).Elem(), 5)
	full.co = newCoUsage(stored)
	full.examples, full.learned = []string{"e1", ""}, []string{"l1", "l2", "l3"}
	full.tokens, full.dup, full.words = 1234, "dup key", []uint64{1, 1 << 60, 77}
	full.id = DocID(full.card.Key())

	f := false
	sparse := &entry{card: cards.Card{Tenant: "t", Server: "s", Name: "n", Aliases: []string{}, InputSchema: []byte{}, Annotations: cards.Annotations{OpenWorld: &f}}, learned: []string{}}
	sparse.id = DocID(sparse.card.Key())

	for _, e := range []*entry{full, sparse} {
		var w recWriter
		w.entry(e)
		got := decodeEntry(w.b)
		if got == nil {
			t.Fatalf("%s: the record is refused", e.id)
		}
		// The view's copy of the co-usage table is the stored one decayed
		// to when it was read: now.
		if (got.co == nil) != (e.co == nil) || e.co != nil && (len(got.co.view.Tools) != len(e.co.view.Tools) || !got.co.view.At.After(e.co.view.At)) {
			t.Errorf("%s: the co-usage table is not decayed to now: %+v", e.id, got.co)
		} else if e.co != nil {
			got.co.view = e.co.view
		}
		if !reflect.DeepEqual(got, e) {
			t.Errorf("%s: the record brings back\n%+v\nwant\n%+v", e.id, got, e)
		}
		for _, bad := range [][]byte{w.b[:len(w.b)-1], w.b[:len(w.b)/2], append(w.b[:len(w.b):len(w.b)], 0)} {
			if decodeEntry(bad) != nil {
				t.Errorf("%s: a record of %d bytes (of %d) is taken", e.id, len(bad), len(w.b))
			}
		}
	}

	var si cards.ServerInfo
	fill(reflect.ValueOf(&si).Elem(), 9)
	var w recWriter
	w.server(&si)
	d := recReader{b: w.b}
	if got := d.server(); d.bad || d.i != len(w.b) || !reflect.DeepEqual(got, si) {
		t.Errorf("the server record brings back %+v, want %+v", got, si)
	}
}
