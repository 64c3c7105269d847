// Package storetest is the conformance suite every cards.Store backend
// passes. A backend's test calls Run with a function that opens a new, empty
// store (and arranges, with t.Cleanup, to close and discard it).
//
// The suite checks the contract of cards.Store only; what is specific to one
// backend (persistence across restarts, locking, connection handling) is
// tested beside the backend.
package storetest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seed0cff8200/cardex/cards"
)

// Run runs the conformance suite. open must return a new, empty store for
// each call; the suite does not close it.
func Run(t *testing.T, open func(t *testing.T) cards.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s cards.Store)
	}{
		{"CreateGetRoundtrip", testCreateGetRoundtrip},
		{"NormalisationApplied", testNormalisationApplied},
		{"PutDoesNotMutateInput", testPutDoesNotMutateInput},
		{"UnchangedOnIdenticalPut", testUnchanged},
		{"VersionIncrements", testVersionIncrements},
		{"ResultsInInputOrder", testResultsInInputOrder},
		{"OptimisticConcurrency", testOptimisticConcurrency},
		{"ConflictOnMissingCard", testConflictOnMissingCard},
		{"AtomicBatchInvalid", testAtomicBatchInvalid},
		{"AtomicBatchConflict", testAtomicBatchConflict},
		{"DuplicateKeysInBatch", testDuplicateKeys},
		{"EmptyBatch", testEmptyBatch},
		{"GetNotFound", testGetNotFound},
		{"TenantIsolation", testTenantIsolation},
		{"ListOrderAndPagination", testListOrderAndPagination},
		{"ListFilters", testListFilters},
		{"ListCursorIsKeyset", testListCursorIsKeyset},
		{"ListPageSize", testListPageSize},
		{"ListBadInput", testListBadInput},
		{"Delete", testDelete},
		{"ChangeSequence", testChangeSequence},
		{"ChangesSinceAndLimit", testChangesSinceAndLimit},
		{"EmbeddingsRoundtrip", testEmbeddingsRoundtrip},
		{"EmbeddingsForMissingCardsIgnored", testEmbeddingsMissingCards},
		{"EmbeddingsRemovedOnDelete", testEmbeddingsRemovedOnDelete},
		{"CancelledContext", testCancelledContext},
		{"ConcurrentConditionalUpdates", testConcurrentConditionalUpdates},
	}
	tests = append(tests, serverTests...)
	tests = append(tests, examplesTests...)
	tests = append(tests, companionTests...)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.fn(t, open(t))
		})
	}
}

// --- fixtures and helpers -----------------------------------------------

const tenant = "acme"

func ptr[T any](v T) *T { return &v }

// simple is a minimal valid card.
func simple(tenant, server, name string) cards.Card {
	return cards.Card{
		Tenant:  tenant,
		Server:  server,
		Name:    name,
		Kind:    cards.KindMCPTool,
		Summary: "Do the " + name + " thing on " + server,
	}
}

// full is a card with every field set, including schemas that are not in
// canonical form and that hold text JSON encoders like to rewrite.
func full() cards.Card {
	return cards.Card{
		Tenant:         tenant,
		Server:         "billing",
		Name:           "refund_payment",
		Kind:           cards.KindRESTOperation,
		Summary:        "Refund a payment to the customer",
		Description:    "Issues a full or partial refund of a settled payment.",
		Aliases:        []string{"give money back", "reverse a charge"},
		Tags:           []string{"payments", "money"},
		WhenNotToUse:   "Not for cancelling subscriptions; use cancel_subscription.",
		RequiredScopes: []string{"billing:write", "billing:read"},
		Status:         cards.StatusPending,
		Annotations: cards.Annotations{
			ReadOnly:    ptr(false),
			Destructive: ptr(true),
			Idempotent:  ptr(true),
		},
		InputSchema: json.RawMessage(`{
			"type": "object",
			"required": ["payment_id"],
			"properties": {
				"payment_id": {"type": "string", "description": "<b>id</b> & \"ref\" \u00e9"},
				"amount": {"type": "number", "maximum": 1.0e6, "multipleOf": 0.01},
				"ledger": {"type": "integer", "examples": [123456789012345678901234567890]}
			}
		}`),
		OutputSchema:   json.RawMessage(` {"type":"object", "properties": {"ok": {"type": "boolean"}}, "additionalProperties": false} `),
		SearchExamples: []string{"give the customer their money back", "  refund order\u200b 1234  ", "Refund order 1234"},
		ExamplesSource: &cards.ExamplesSource{Author: cards.AuthorModel, Model: "m-1", PromptVersion: "enrich-v1"},
	}
}

// normalised returns what Normalize makes of c.
func normalised(t *testing.T, c cards.Card) cards.Card {
	t.Helper()
	n := c.Clone()
	if err := cards.Normalize(&n); err != nil {
		t.Fatalf("fixture does not normalise: %v", err)
	}
	return n
}

func put(t *testing.T, s cards.Store, cs ...cards.Card) []cards.PutResult {
	t.Helper()
	res, err := s.Put(t.Context(), cs)
	if err != nil {
		t.Fatalf("Put: %v", err)
	}
	if len(res) != len(cs) {
		t.Fatalf("Put returned %d results for %d cards", len(res), len(cs))
	}
	return res
}

func get(t *testing.T, s cards.Store, k cards.Key) cards.Card {
	t.Helper()
	c, err := s.Get(t.Context(), k)
	if err != nil {
		t.Fatalf("Get(%s): %v", k, err)
	}
	return c
}

func mustNotFound(t *testing.T, s cards.Store, k cards.Key) {
	t.Helper()
	c, err := s.Get(t.Context(), k)
	if !errors.Is(err, cards.ErrNotFound) {
		t.Fatalf("Get(%s) = %+v, %v; want ErrNotFound", k, c, err)
	}
}

func seq(t *testing.T, s cards.Store) uint64 {
	t.Helper()
	n, err := s.Seq(t.Context())
	if err != nil {
		t.Fatalf("Seq: %v", err)
	}
	return n
}

func changes(t *testing.T, s cards.Store, since uint64, limit int) []cards.Change {
	t.Helper()
	cs, err := s.Changes(t.Context(), since, limit)
	if err != nil {
		t.Fatalf("Changes(%d, %d): %v", since, limit, err)
	}
	return cs
}

func key(tenant, server, name string) cards.Key {
	return cards.Key{Tenant: tenant, Server: server, Name: name}
}

func fieldError(t *testing.T, err error) *cards.FieldError {
	t.Helper()
	if !errors.Is(err, cards.ErrInvalid) {
		t.Fatalf("error %v: want errors.Is(err, cards.ErrInvalid)", err)
	}
	var fe *cards.FieldError
	if !errors.As(err, &fe) {
		t.Fatalf("error %v (%T): want a *cards.FieldError", err, err)
	}
	return fe
}

// containsNumber reports whether msg holds n as a whole number.
func containsNumber(msg string, n int64) bool {
	return regexp.MustCompile(`(^|[^0-9])` + fmt.Sprint(n) + `([^0-9]|$)`).MatchString(msg)
}

// contentJSON renders a card without Version, UpdatedAt and schemas, with
// empty and nil lists alike.
func contentJSON(c cards.Card) string {
	c = c.Clone()
	c.Version, c.UpdatedAt = 0, time.Time{}
	c.InputSchema, c.OutputSchema = nil, nil
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(c)
	return buf.String()
}

// assertCard checks got against want field by field: content, schemas
// byte-for-byte, Version, and UpdatedAt (as an instant) when want has one.
func assertCard(t *testing.T, got, want cards.Card) {
	t.Helper()
	if g, w := contentJSON(got), contentJSON(want); g != w {
		t.Errorf("card content:\n got  %s\n want %s", g, w)
	}
	if !bytes.Equal(got.InputSchema, want.InputSchema) {
		t.Errorf("input_schema not byte-for-byte:\n got  %s\n want %s", got.InputSchema, want.InputSchema)
	}
	if !bytes.Equal(got.OutputSchema, want.OutputSchema) {
		t.Errorf("output_schema not byte-for-byte:\n got  %s\n want %s", got.OutputSchema, want.OutputSchema)
	}
	if got.Version != want.Version {
		t.Errorf("version = %d, want %d", got.Version, want.Version)
	}
	if !want.UpdatedAt.IsZero() && !got.UpdatedAt.Equal(want.UpdatedAt) {
		t.Errorf("updated_at = %v, want %v", got.UpdatedAt, want.UpdatedAt)
	}
}

func keysOf(cs []cards.Card) []string {
	out := make([]string, len(cs))
	for i := range cs {
		out[i] = cs[i].Key().String()
	}
	return out
}

// listAll pages through q with page size limit and checks the paging rules:
// every page but the last is full, and the last has no cursor.
func listAll(t *testing.T, s cards.Store, q cards.ListQuery) []cards.Card {
	t.Helper()
	var out []cards.Card
	for pages := 0; ; pages++ {
		if pages > 1000 {
			t.Fatalf("List %+v: more than 1000 pages: the cursor does not advance", q)
		}
		p, err := s.List(t.Context(), q)
		if err != nil {
			t.Fatalf("List %+v: %v", q, err)
		}
		limit := q.Limit
		if limit <= 0 {
			limit = cards.DefaultPageSize
		}
		if len(p.Cards) > limit {
			t.Fatalf("List %+v: %d cards on a page of %d", q, len(p.Cards), limit)
		}
		out = append(out, p.Cards...)
		if p.NextCursor == "" {
			return out
		}
		if len(p.Cards) != limit {
			t.Fatalf("List %+v: a page with a cursor holds %d cards, want %d", q, len(p.Cards), limit)
		}
		q.Cursor = p.NextCursor
	}
}

// sortedKeys returns the keys of cs in (server, name) byte order.
func sortedKeys(cs []cards.Card) []string {
	cs = slices.Clone(cs)
	slices.SortFunc(cs, func(a, b cards.Card) int {
		if c := strings.Compare(a.Server, b.Server); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	return keysOf(cs)
}

// --- put and get --------------------------------------------------------

func testCreateGetRoundtrip(t *testing.T, s cards.Store) {
	in := full()
	want := normalised(t, in)
	// Guard the fixture: the canonical schema keeps numbers as written and
	// does not HTML-escape, so a backend that re-encodes it is caught.
	for _, frag := range []string{`1.0e6`, `123456789012345678901234567890`, `<b>id</b> & \"ref\"`, `0.01`} {
		if !bytes.Contains(want.InputSchema, []byte(frag)) {
			t.Fatalf("fixture: canonical input schema %s lacks %s", want.InputSchema, frag)
		}
	}

	before := time.Now().Add(-time.Millisecond)
	res := put(t, s, in)
	after := time.Now().Add(time.Millisecond)
	if res[0].Outcome != cards.Created || res[0].Version != 1 || res[0].Key != want.Key() {
		t.Fatalf("Put result = %+v, want created version 1 of %s", res[0], want.Key())
	}
	got := get(t, s, want.Key())
	want.Version = 1
	assertCard(t, got, want)
	if got.UpdatedAt.Before(before) || got.UpdatedAt.After(after) {
		t.Errorf("updated_at = %v, want between %v and %v", got.UpdatedAt, before, after)
	}
	if !got.UpdatedAt.Equal(got.UpdatedAt.Truncate(time.Microsecond)) {
		t.Errorf("updated_at %v has sub-microsecond precision", got.UpdatedAt)
	}
	if got.Annotations.ReadOnly == nil || *got.Annotations.ReadOnly ||
		got.Annotations.Destructive == nil || !*got.Annotations.Destructive ||
		got.Annotations.Idempotent == nil || !*got.Annotations.Idempotent ||
		got.Annotations.OpenWorld != nil {
		t.Errorf("annotations = %s, want read_only=false destructive=true idempotent=true open_world unset", contentJSON(got))
	}

	// A card without schemas or optional fields round-trips too.
	bare := simple(tenant, "misc", "ping")
	put(t, s, bare)
	gotBare := get(t, s, bare.Key())
	wantBare := normalised(t, bare)
	wantBare.Version = 1
	assertCard(t, gotBare, wantBare)
	if len(gotBare.InputSchema) != 0 || len(gotBare.OutputSchema) != 0 {
		t.Errorf("bare card has schemas %q %q", gotBare.InputSchema, gotBare.OutputSchema)
	}
}

func testNormalisationApplied(t *testing.T, s cards.Store) {
	in := cards.Card{
		Tenant:         " acme ",
		Server:         "billing ",
		Name:           " refund",
		Summary:        "Refund\u200b a \u202epayment\u202c\n\tnow\x07",
		Aliases:        []string{"give\u2066 back", "", "Give back"},
		Tags:           []string{"Money", "money", "PAY"},
		RequiredScopes: []string{"billing:write", "billing:read", "billing:write"},
		InputSchema:    json.RawMessage(`{ "type" : "object",  "properties": {"b": {}, "a": {}} }`),
	}
	res := put(t, s, in)
	k := key("acme", "billing", "refund")
	if res[0].Key != k {
		t.Fatalf("result key = %v, want %v", res[0].Key, k)
	}
	got := get(t, s, k)
	checks := []struct {
		field     string
		got, want any
	}{
		{"summary", got.Summary, "Refund a payment now"},
		{"aliases", got.Aliases, []string{"give back"}},
		{"tags", got.Tags, []string{"money", "pay"}},
		{"required_scopes", got.RequiredScopes, []string{"billing:read", "billing:write"}},
		{"kind", got.Kind, cards.KindFunction},
		{"status", got.Status, cards.StatusActive},
		{"input_schema", string(got.InputSchema), `{"properties":{"a":{},"b":{}},"type":"object"}`},
	}
	for _, c := range checks {
		if fmt.Sprint(c.got) != fmt.Sprint(c.want) {
			t.Errorf("%s = %q, want %q", c.field, c.got, c.want)
		}
	}
}

func testPutDoesNotMutateInput(t *testing.T, s cards.Store) {
	in := []cards.Card{full()}
	before := contentJSON(in[0]) + string(in[0].InputSchema)
	put(t, s, in...)
	if after := contentJSON(in[0]) + string(in[0].InputSchema); after != before || in[0].Version != 0 || !in[0].UpdatedAt.IsZero() {
		t.Errorf("Put changed its input:\n before %s\n after  %s", before, after)
	}
}

func testUnchanged(t *testing.T, s cards.Store) {
	c := full()
	put(t, s, c)
	first := get(t, s, c.Key())
	seq0 := seq(t, s)

	// The same card, and the same card in another spelling that normalises
	// to the same content, are both unchanged.
	respelled := c.Clone()
	respelled.Summary = "  Refund a payment\u200b to the customer "
	respelled.RequiredScopes = []string{"billing:read", "billing:write"}
	respelled.InputSchema = json.RawMessage(strings.ReplaceAll(string(c.InputSchema), "\n", " "))
	for i, again := range []cards.Card{c, respelled} {
		time.Sleep(2 * time.Millisecond) // a bumped UpdatedAt would differ
		res := put(t, s, again)
		if res[0].Outcome != cards.Unchanged || res[0].Version != 1 {
			t.Errorf("put #%d result = %+v, want unchanged version 1", i, res[0])
		}
	}
	got := get(t, s, c.Key())
	assertCard(t, got, first)
	if n := seq(t, s); n != seq0 {
		t.Errorf("Seq moved from %d to %d on unchanged puts", seq0, n)
	}
	if ch := changes(t, s, seq0, 100); len(ch) != 0 {
		t.Errorf("unchanged puts added changes: %+v", ch)
	}

	// Unchanged with a matching expected version is fine too.
	withVersion := c.Clone()
	withVersion.Version = 1
	if res := put(t, s, withVersion); res[0].Outcome != cards.Unchanged || res[0].Version != 1 {
		t.Errorf("put with version 1 = %+v, want unchanged version 1", res[0])
	}
}

func testVersionIncrements(t *testing.T, s cards.Store) {
	c := full()
	put(t, s, c)
	prev := get(t, s, c.Key())
	for v := int64(2); v <= 4; v++ {
		time.Sleep(2 * time.Millisecond)
		c.Summary = fmt.Sprintf("Refund a payment, revision %d", v)
		res := put(t, s, c)
		if res[0].Outcome != cards.Updated || res[0].Version != v {
			t.Fatalf("update %d result = %+v, want updated version %d", v, res[0], v)
		}
		got := get(t, s, c.Key())
		want := normalised(t, c)
		want.Version = v
		assertCard(t, got, want)
		if !got.UpdatedAt.After(prev.UpdatedAt) {
			t.Errorf("version %d updated_at %v is not after %v", v, got.UpdatedAt, prev.UpdatedAt)
		}
		prev = got
	}
	// A change of any field, not only text, is an update.
	c.Annotations.OpenWorld = ptr(true)
	if res := put(t, s, c); res[0].Outcome != cards.Updated || res[0].Version != 5 {
		t.Errorf("annotation change = %+v, want updated version 5", res[0])
	}
	c.Status = cards.StatusRevoked
	if res := put(t, s, c); res[0].Outcome != cards.Updated || res[0].Version != 6 {
		t.Errorf("status change = %+v, want updated version 6", res[0])
	}
}

func testResultsInInputOrder(t *testing.T, s cards.Store) {
	put(t, s, simple(tenant, "srv", "b"))
	batch := []cards.Card{simple(tenant, "srv", "z"), simple(tenant, "srv", "b"), simple(tenant, "aaa", "a")}
	batch[1].Summary = "changed"
	res := put(t, s, batch...)
	want := []cards.PutResult{
		{Key: key(tenant, "srv", "z"), Version: 1, Outcome: cards.Created},
		{Key: key(tenant, "srv", "b"), Version: 2, Outcome: cards.Updated},
		{Key: key(tenant, "aaa", "a"), Version: 1, Outcome: cards.Created},
	}
	if !slices.Equal(res, want) {
		t.Errorf("results = %+v, want %+v", res, want)
	}
}

func testOptimisticConcurrency(t *testing.T, s cards.Store) {
	c := full()
	put(t, s, c)
	c.Summary = "second revision"
	put(t, s, c) // version 2
	stored := get(t, s, c.Key())

	stale := c.Clone()
	stale.Version = 1
	stale.Summary = "lost update"
	_, err := s.Put(t.Context(), []cards.Card{stale})
	if !errors.Is(err, cards.ErrConflict) {
		t.Fatalf("stale put error = %v, want ErrConflict", err)
	}
	msg := err.Error()
	if !strings.Contains(msg, "refund_payment") || !containsNumber(msg, 1) || !containsNumber(msg, 2) {
		t.Errorf("conflict message %q should name the card and both versions (1 and 2)", msg)
	}
	assertCard(t, get(t, s, c.Key()), stored)

	ahead := c.Clone()
	ahead.Version = 7
	ahead.Summary = "from the future"
	if _, err := s.Put(t.Context(), []cards.Card{ahead}); !errors.Is(err, cards.ErrConflict) {
		t.Fatalf("put with version 7 over 2: error = %v, want ErrConflict", err)
	} else if !containsNumber(err.Error(), 7) || !containsNumber(err.Error(), 2) {
		t.Errorf("conflict message %q should name versions 7 and 2", err)
	}

	fresh := c.Clone()
	fresh.Version = 2
	fresh.Summary = "third revision"
	if res := put(t, s, fresh); res[0].Outcome != cards.Updated || res[0].Version != 3 {
		t.Errorf("put with the current version = %+v, want updated version 3", res[0])
	}

	// Version 0 means no check: it overwrites.
	blind := c.Clone()
	blind.Version = 0
	blind.Summary = "blind overwrite"
	if res := put(t, s, blind); res[0].Outcome != cards.Updated || res[0].Version != 4 {
		t.Errorf("put with version 0 = %+v, want updated version 4", res[0])
	}
}

func testConflictOnMissingCard(t *testing.T, s cards.Store) {
	c := simple(tenant, "srv", "ghost")
	c.Version = 3
	_, err := s.Put(t.Context(), []cards.Card{c})
	if !errors.Is(err, cards.ErrConflict) {
		t.Fatalf("put with version 3 of a missing card: error = %v, want ErrConflict", err)
	}
	if !strings.Contains(err.Error(), "ghost") {
		t.Errorf("conflict message %q should name the card", err)
	}
	mustNotFound(t, s, c.Key())
	if n := seq(t, s); n != 0 {
		t.Errorf("Seq = %d after a failed put on an empty store", n)
	}
}

func testAtomicBatchInvalid(t *testing.T, s cards.Store) {
	existing := simple(tenant, "billing", "charge")
	put(t, s, existing)
	before := get(t, s, existing.Key())
	seq0 := seq(t, s)

	tests := []struct {
		name  string
		bad   func(c *cards.Card)
		field string
	}{
		{"empty summary", func(c *cards.Card) { c.Summary = " \u200b " }, "summary"},
		{"bad name", func(c *cards.Card) { c.Name = "has space" }, "name"},
		{"reserved name", func(c *cards.Card) { c.Name = "cardex__search_tools" }, "name"},
		{"bad schema", func(c *cards.Card) { c.InputSchema = json.RawMessage(`{"type": 12}`) }, "input_schema"},
		{"bad kind", func(c *cards.Card) { c.Kind = "lambda" }, "kind"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			update := existing.Clone()
			update.Summary = "should not be written"
			bad := simple(tenant, "billing", "refund")
			tc.bad(&bad)
			batch := []cards.Card{simple(tenant, "billing", "new_one"), update, simple(tenant, "billing", "new_two"), bad}
			res, err := s.Put(t.Context(), batch)
			if err == nil {
				t.Fatalf("Put succeeded with %+v", res)
			}
			fe := fieldError(t, err)
			if !strings.Contains(fe.Item, "cards[3]") {
				t.Errorf("FieldError.Item = %q, want it to name cards[3]", fe.Item)
			}
			if fe.Field != tc.field {
				t.Errorf("FieldError.Field = %q, want %q", fe.Field, tc.field)
			}
			if !strings.Contains(err.Error(), "cards[3]") || !strings.Contains(err.Error(), tc.field) {
				t.Errorf("error %q should name cards[3] and %s", err, tc.field)
			}
			mustNotFound(t, s, key(tenant, "billing", "new_one"))
			mustNotFound(t, s, key(tenant, "billing", "new_two"))
			assertCard(t, get(t, s, existing.Key()), before)
			if n := seq(t, s); n != seq0 {
				t.Errorf("Seq moved from %d to %d on a failed batch", seq0, n)
			}
		})
	}

	// The item names the server and name of the card too.
	bad := simple(tenant, "billing", "refund")
	bad.Summary = ""
	_, err := s.Put(t.Context(), []cards.Card{simple(tenant, "a", "b"), bad})
	if fe := fieldError(t, err); !strings.Contains(fe.Item, "cards[1]") || !strings.Contains(fe.Item, "billing/refund") {
		t.Errorf("FieldError.Item = %q, want cards[1] billing/refund", fe.Item)
	}
}

func testAtomicBatchConflict(t *testing.T, s cards.Store) {
	a := simple(tenant, "srv", "a")
	b := simple(tenant, "srv", "b")
	put(t, s, a, b)
	beforeA, beforeB := get(t, s, a.Key()), get(t, s, b.Key())
	seq0 := seq(t, s)

	a2 := a.Clone()
	a2.Summary = "updated a"
	a2.Version = 1 // correct
	b2 := b.Clone()
	b2.Summary = "updated b"
	b2.Version = 5 // stale
	batch := []cards.Card{simple(tenant, "srv", "new"), a2, b2}
	if _, err := s.Put(t.Context(), batch); !errors.Is(err, cards.ErrConflict) {
		t.Fatalf("error = %v, want ErrConflict", err)
	} else if !strings.Contains(err.Error(), "srv/b") && !strings.Contains(err.Error(), "cards[2]") {
		t.Errorf("conflict %q should name the conflicting card", err)
	}
	mustNotFound(t, s, key(tenant, "srv", "new"))
	assertCard(t, get(t, s, a.Key()), beforeA)
	assertCard(t, get(t, s, b.Key()), beforeB)
	if n := seq(t, s); n != seq0 {
		t.Errorf("Seq moved from %d to %d on a failed batch", seq0, n)
	}
}

func testDuplicateKeys(t *testing.T, s cards.Store) {
	tests := []struct {
		name  string
		batch []cards.Card
		i, j  int
	}{
		{"same key", []cards.Card{simple(tenant, "s", "x"), simple(tenant, "s", "y"), simple(tenant, "s", "x")}, 0, 2},
		{"same key after trimming", []cards.Card{simple(tenant, "s", "y"), simple(tenant, "s", "x"), simple(tenant, "s ", " x")}, 1, 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.Put(t.Context(), tc.batch)
			fieldError(t, err)
			for _, idx := range []int{tc.i, tc.j} {
				if want := fmt.Sprintf("cards[%d]", idx); !strings.Contains(err.Error(), want) {
					t.Errorf("error %q should name %s", err, want)
				}
			}
			for _, c := range tc.batch {
				mustNotFound(t, s, key(tenant, strings.TrimSpace(c.Server), strings.TrimSpace(c.Name)))
			}
		})
	}
	// The same name under two servers or two tenants is no duplicate.
	put(t, s, simple(tenant, "s1", "x"), simple(tenant, "s2", "x"), simple("other", "s1", "x"))
}

func testEmptyBatch(t *testing.T, s cards.Store) {
	res, err := s.Put(t.Context(), nil)
	if err != nil || len(res) != 0 {
		t.Errorf("Put(nil) = %+v, %v; want no results, no error", res, err)
	}
	if n := seq(t, s); n != 0 {
		t.Errorf("Seq = %d after an empty put", n)
	}
}

func testGetNotFound(t *testing.T, s cards.Store) {
	put(t, s, simple(tenant, "srv", "here"))
	for _, k := range []cards.Key{
		key(tenant, "srv", "missing"),
		key(tenant, "other", "here"),
		key("nobody", "srv", "here"),
		key(tenant, "srv", "HERE"),
		{},
		key(tenant, "srv\x00here", ""),
	} {
		mustNotFound(t, s, k)
	}
}

func testTenantIsolation(t *testing.T, s cards.Store) {
	a := simple("t1", "srv", "tool")
	a.Summary = "tenant one's tool"
	b := simple("t2", "srv", "tool")
	b.Summary = "tenant two's tool"
	// A tenant whose name extends another's must not leak into it.
	c := simple("t1x", "srv", "tool")
	put(t, s, a, b, c)
	if got := get(t, s, a.Key()); got.Summary != a.Summary {
		t.Errorf("t1 Get summary = %q", got.Summary)
	}
	if got := get(t, s, b.Key()); got.Summary != b.Summary {
		t.Errorf("t2 Get summary = %q", got.Summary)
	}
	for _, tn := range []string{"t1", "t2"} {
		got := listAll(t, s, cards.ListQuery{Tenant: tn})
		if len(got) != 1 || got[0].Tenant != tn {
			t.Errorf("List(%s) = %v", tn, keysOf(got))
		}
	}
	if got := listAll(t, s, cards.ListQuery{Tenant: "t"}); len(got) != 0 {
		t.Errorf("List(t) = %v, want nothing", keysOf(got))
	}
	if err := s.Delete(t.Context(), a.Key(), 0); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	mustNotFound(t, s, a.Key())
	get(t, s, b.Key())
	get(t, s, c.Key())
}

// catalogue writes 36 cards for tenant acme whose servers and names sort
// differently as (server, name) pairs than as joined strings, plus cards of
// neighbouring tenants.
func catalogue(t *testing.T, s cards.Store) []cards.Card {
	t.Helper()
	servers := []string{"b", "a-b", "B", "a", "b_c", "a.b"}
	names := []string{"zz", "a_b", "Z", "a", "a.b", "a-b"}
	statuses := []cards.Status{cards.StatusActive, cards.StatusPending, cards.StatusActive, cards.StatusRevoked, cards.StatusActive}
	var all []cards.Card
	n := 0
	for _, srv := range servers {
		for _, nm := range names {
			c := simple(tenant, srv, nm)
			c.Status = statuses[n%len(statuses)]
			n++
			all = append(all, c)
		}
	}
	put(t, s, all...)
	put(t, s, simple("acme2", "a", "a"), simple("acm", "a", "a"), simple("zeta", "a", "a"))
	out := make([]cards.Card, len(all))
	for i := range all {
		out[i] = normalised(t, all[i])
	}
	return out
}

func filter(cs []cards.Card, keep func(c cards.Card) bool) []cards.Card {
	var out []cards.Card
	for _, c := range cs {
		if keep(c) {
			out = append(out, c)
		}
	}
	return out
}

func testListOrderAndPagination(t *testing.T, s cards.Store) {
	all := catalogue(t, s)
	want := sortedKeys(all)
	for _, size := range []int{1, 5, 7, 12, 36, 100} {
		t.Run(fmt.Sprintf("page size %d", size), func(t *testing.T) {
			got := listAll(t, s, cards.ListQuery{Tenant: tenant, Limit: size})
			if !slices.Equal(keysOf(got), want) {
				t.Errorf("order:\n got  %v\n want %v", keysOf(got), want)
			}
		})
	}
	// Listed cards are whole cards.
	p, err := s.List(t.Context(), cards.ListQuery{Tenant: tenant, Limit: 1})
	if err != nil || len(p.Cards) != 1 {
		t.Fatalf("List = %+v, %v", p, err)
	}
	assertCard(t, p.Cards[0], get(t, s, p.Cards[0].Key()))
	if p.Cards[0].Version != 1 || p.Cards[0].UpdatedAt.IsZero() {
		t.Errorf("listed card lacks version or updated_at: %+v", p.Cards[0])
	}
	// An empty tenant lists nothing.
	p, err = s.List(t.Context(), cards.ListQuery{Tenant: "empty"})
	if err != nil || len(p.Cards) != 0 || p.NextCursor != "" {
		t.Errorf("List(empty tenant) = %+v, %v", p, err)
	}
}

func testListFilters(t *testing.T, s cards.Store) {
	all := catalogue(t, s)
	tests := []struct {
		name   string
		server string
		status []cards.Status
		size   int
	}{
		{"server", "a", nil, 4},
		{"server with neighbours", "a-b", nil, 5},
		{"pending", "", []cards.Status{cards.StatusPending}, 3},
		{"pending or revoked", "", []cards.Status{cards.StatusPending, cards.StatusRevoked}, 4},
		{"server and status", "b", []cards.Status{cards.StatusActive}, 2},
		{"active default page", "", []cards.Status{cards.StatusActive}, 0},
		{"unknown server", "nope", nil, 3},
		{"no revoked on server", "B", []cards.Status{cards.StatusRevoked}, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			want := sortedKeys(filter(all, func(c cards.Card) bool {
				return (tc.server == "" || c.Server == tc.server) &&
					(len(tc.status) == 0 || slices.Contains(tc.status, c.Status))
			}))
			if tc.server != "nope" && len(want) == 0 {
				t.Fatalf("fixture: filter matches nothing")
			}
			got := listAll(t, s, cards.ListQuery{Tenant: tenant, Server: tc.server, Status: tc.status, Limit: tc.size})
			if !slices.Equal(keysOf(got), want) {
				t.Errorf("got  %v\nwant %v", keysOf(got), want)
			}
		})
	}
}

func testListCursorIsKeyset(t *testing.T, s cards.Store) {
	all := catalogue(t, s)
	want := sortedKeys(all)
	p1, err := s.List(t.Context(), cards.ListQuery{Tenant: tenant, Limit: 5})
	if err != nil || len(p1.Cards) != 5 || p1.NextCursor == "" {
		t.Fatalf("first page = %v, %v", keysOf(p1.Cards), err)
	}
	// Between pages: a card appears before the cursor, one after it, and
	// the card the cursor points at is deleted. The next pages continue
	// after the cursor, without repeats or gaps.
	before := simple(tenant, "0", "first")
	after := simple(tenant, "zzz", "last")
	put(t, s, before, after)
	last := p1.Cards[4].Key()
	if err := s.Delete(t.Context(), last, 0); err != nil {
		t.Fatal(err)
	}
	rest := listAll(t, s, cards.ListQuery{Tenant: tenant, Limit: 5, Cursor: p1.NextCursor})
	got := append(keysOf(p1.Cards), keysOf(rest)...)
	want = append(want, after.Key().String())
	if !slices.Equal(got, want) {
		t.Errorf("got  %v\nwant %v", got, want)
	}
}

func testListPageSize(t *testing.T, s cards.Store) {
	all := catalogue(t, s)
	p, err := s.List(t.Context(), cards.ListQuery{Tenant: tenant})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Cards) != cards.DefaultPageSize || p.NextCursor == "" {
		t.Errorf("default page: %d cards, cursor %q; want %d and a cursor", len(p.Cards), p.NextCursor, cards.DefaultPageSize)
	}
	p, err = s.List(t.Context(), cards.ListQuery{Tenant: tenant, Limit: -3})
	if err != nil || len(p.Cards) != cards.DefaultPageSize {
		t.Errorf("negative limit: %d cards, %v; want the default page", len(p.Cards), err)
	}
	p, err = s.List(t.Context(), cards.ListQuery{Tenant: tenant, Limit: cards.MaxPageSize})
	if err != nil || len(p.Cards) != len(all) || p.NextCursor != "" {
		t.Errorf("max page: %d cards, cursor %q, %v; want %d and no cursor", len(p.Cards), p.NextCursor, err, len(all))
	}
	// Exactly one page's worth: no cursor to an empty page.
	p, err = s.List(t.Context(), cards.ListQuery{Tenant: tenant, Limit: len(all)})
	if err != nil || len(p.Cards) != len(all) || p.NextCursor != "" {
		t.Errorf("exact page: %d cards, cursor %q, %v; want %d and no cursor", len(p.Cards), p.NextCursor, err, len(all))
	}
	_, err = s.List(t.Context(), cards.ListQuery{Tenant: tenant, Limit: cards.MaxPageSize + 1})
	fe := fieldError(t, err)
	if fe.Field != "page_size" || !strings.Contains(fe.Msg, "100") {
		t.Errorf("over-limit error = %v; want field page_size naming the limit 100", err)
	}
}

func testListBadInput(t *testing.T, s cards.Store) {
	catalogue(t, s)
	_, err := s.List(t.Context(), cards.ListQuery{})
	if fe := fieldError(t, err); fe.Field != "tenant" || !strings.Contains(fe.Msg, "required") {
		t.Errorf("no tenant: %v; want tenant is required", err)
	}
	for _, cur := range []string{"!!!", "%%%not-a-cursor%%%", "a b c"} {
		_, err := s.List(t.Context(), cards.ListQuery{Tenant: tenant, Cursor: cur})
		if fe := fieldError(t, err); fe.Field != "cursor" {
			t.Errorf("cursor %q: %v; want a FieldError on cursor", cur, err)
		}
	}
}

// --- delete -------------------------------------------------------------

func testDelete(t *testing.T, s cards.Store) {
	c := simple(tenant, "srv", "doomed")
	put(t, s, c)
	c.Summary = "v2"
	put(t, s, c)
	other := simple(tenant, "srv", "keeper")
	put(t, s, other)

	err := s.Delete(t.Context(), c.Key(), 1)
	if !errors.Is(err, cards.ErrConflict) {
		t.Fatalf("Delete with stale version: %v, want ErrConflict", err)
	}
	if !containsNumber(err.Error(), 1) || !containsNumber(err.Error(), 2) {
		t.Errorf("conflict %q should name versions 1 and 2", err)
	}
	get(t, s, c.Key())

	if err := s.Delete(t.Context(), c.Key(), 2); err != nil {
		t.Fatalf("Delete with current version: %v", err)
	}
	mustNotFound(t, s, c.Key())
	get(t, s, other.Key())
	for _, v := range []int64{0, 2} {
		if err := s.Delete(t.Context(), c.Key(), v); !errors.Is(err, cards.ErrNotFound) {
			t.Errorf("Delete(missing, %d) = %v, want ErrNotFound", v, err)
		}
	}
	if err := s.Delete(t.Context(), other.Key(), 0); err != nil {
		t.Fatalf("Delete with version 0: %v", err)
	}
	if got := listAll(t, s, cards.ListQuery{Tenant: tenant}); len(got) != 0 {
		t.Errorf("List after deletes = %v", keysOf(got))
	}
	// A client still holding the deleted card's version conflicts.
	stale := c
	stale.Version = 2
	if _, err := s.Put(t.Context(), []cards.Card{stale}); !errors.Is(err, cards.ErrConflict) {
		t.Errorf("put of a deleted card with its old version = %v, want ErrConflict", err)
	}
	// A deleted card can be created again; versions stay monotonic, so it
	// continues after the deleted card's last version (2).
	c.Version = 0
	if res := put(t, s, c); res[0].Outcome != cards.Created || res[0].Version != 3 {
		t.Errorf("re-create = %+v, want created version 3", res[0])
	}
}

// --- change sequence ----------------------------------------------------

func testChangeSequence(t *testing.T, s cards.Store) {
	if n := seq(t, s); n != 0 {
		t.Fatalf("empty store Seq = %d", n)
	}
	if ch := changes(t, s, 0, 10); len(ch) != 0 {
		t.Fatalf("empty store Changes = %+v", ch)
	}
	a, b, c := simple(tenant, "s", "a"), simple(tenant, "s", "b"), simple("other", "s", "c")
	put(t, s, a, b)
	s1 := seq(t, s)
	if s1 == 0 {
		t.Fatalf("Seq = 0 after two creates")
	}
	put(t, s, c)
	s2 := seq(t, s)
	a.Summary = "a, updated"
	put(t, s, a)
	s3 := seq(t, s)
	if err := s.Delete(t.Context(), b.Key(), 0); err != nil {
		t.Fatal(err)
	}
	s4 := seq(t, s)
	if !(s1 < s2 && s2 < s3 && s3 < s4) {
		t.Fatalf("Seq does not increase: %d %d %d %d", s1, s2, s3, s4)
	}
	put(t, s, a) // unchanged
	if n := seq(t, s); n != s4 {
		t.Errorf("unchanged put moved Seq from %d to %d", s4, n)
	}

	ch := changes(t, s, 0, 100)
	type entry struct {
		key     cards.Key
		deleted bool
	}
	var got []entry
	for i, e := range ch {
		got = append(got, entry{e.Key, e.Deleted})
		if i > 0 && e.Seq <= ch[i-1].Seq {
			t.Errorf("changes out of order: %+v", ch)
		}
	}
	want := []entry{{c.Key(), false}, {a.Key(), false}, {b.Key(), true}}
	if !slices.Equal(got, want) {
		t.Fatalf("Changes = %+v, want the latest change per key %+v", ch, want)
	}
	if ch[0].Seq != s2 || ch[1].Seq != s3 || ch[2].Seq != s4 {
		t.Errorf("change seqs %d %d %d, want %d %d %d", ch[0].Seq, ch[1].Seq, ch[2].Seq, s2, s3, s4)
	}

	// Re-creating the deleted card replaces its deletion.
	put(t, s, b)
	ch = changes(t, s, s4, 100)
	if len(ch) != 1 || ch[0].Key != b.Key() || ch[0].Deleted || ch[0].Seq != seq(t, s) {
		t.Errorf("after re-create, Changes(since %d) = %+v", s4, ch)
	}
	if all := changes(t, s, 0, 100); len(all) != 3 {
		t.Errorf("Changes keeps more than the latest change per key: %+v", all)
	}
}

func testChangesSinceAndLimit(t *testing.T, s cards.Store) {
	var seqs []uint64
	var keys []cards.Key
	for i := range 6 {
		c := simple(tenant, "s", fmt.Sprintf("c%d", i))
		put(t, s, c)
		seqs = append(seqs, seq(t, s))
		keys = append(keys, c.Key())
	}
	all := changes(t, s, 0, 100)
	if len(all) != 6 {
		t.Fatalf("Changes = %+v, want 6", all)
	}
	for i, e := range all {
		if e.Seq != seqs[i] || e.Key != keys[i] || e.Deleted {
			t.Errorf("change %d = %+v, want seq %d key %s", i, e, seqs[i], keys[i])
		}
	}
	if got := changes(t, s, seqs[2], 100); len(got) != 3 || got[0].Seq != seqs[3] {
		t.Errorf("since %d = %+v, want the last 3", seqs[2], got)
	}
	if got := changes(t, s, seqs[1], 2); len(got) != 2 || got[0].Seq != seqs[2] || got[1].Seq != seqs[3] {
		t.Errorf("since %d limit 2 = %+v", seqs[1], got)
	}
	if got := changes(t, s, seqs[5], 100); len(got) != 0 {
		t.Errorf("since the last seq = %+v, want none", got)
	}
	// Paging through with since = last seen seq visits every change once.
	var paged []cards.Change
	for since := uint64(0); ; {
		page := changes(t, s, since, 4)
		if len(page) == 0 {
			break
		}
		paged = append(paged, page...)
		since = page[len(page)-1].Seq
	}
	if !slices.Equal(paged, all) {
		t.Errorf("paged changes = %+v, want %+v", paged, all)
	}
}

// --- embeddings ---------------------------------------------------------

func vec(xs ...float32) []float32 { return xs }

func assertEmbedding(t *testing.T, got map[cards.Key]cards.Embedding, want cards.Embedding) {
	t.Helper()
	e, ok := got[want.Key]
	if !ok {
		t.Errorf("no %s vector for %s", want.Model, want.Key)
		return
	}
	if e.Key != want.Key || e.Model != want.Model || e.TextHash != want.TextHash || !slices.Equal(e.Vector, want.Vector) {
		t.Errorf("embedding = %+v, want %+v", e, want)
	}
}

func embeddings(t *testing.T, s cards.Store, model string, keys ...cards.Key) map[cards.Key]cards.Embedding {
	t.Helper()
	m, err := s.Embeddings(t.Context(), model, keys)
	if err != nil {
		t.Fatalf("Embeddings(%s): %v", model, err)
	}
	return m
}

func testEmbeddingsRoundtrip(t *testing.T, s cards.Store) {
	a, b := simple(tenant, "s", "a"), simple(tenant, "s", "b")
	other := simple("other", "s", "a")
	put(t, s, a, b, other)
	es := []cards.Embedding{
		{Key: a.Key(), Model: "m1", TextHash: "h-a1", Vector: vec(0.25, -1.5, 1e-30, math.MaxFloat32)},
		{Key: a.Key(), Model: "m2", TextHash: "h-a2", Vector: vec(1, 2, 3, 4)},
		{Key: b.Key(), Model: "m1", TextHash: "h-b1", Vector: vec(-0.125, 0.5, float32(math.Pi), 1.0/3)},
	}
	if err := s.PutEmbeddings(t.Context(), es); err != nil {
		t.Fatalf("PutEmbeddings: %v", err)
	}
	m1 := embeddings(t, s, "m1", a.Key(), b.Key(), other.Key(), key(tenant, "s", "missing"))
	if len(m1) != 2 {
		t.Errorf("m1 = %d vectors, want 2: %+v", len(m1), m1)
	}
	assertEmbedding(t, m1, es[0])
	assertEmbedding(t, m1, es[2])
	m2 := embeddings(t, s, "m2", a.Key(), b.Key())
	if len(m2) != 1 {
		t.Errorf("m2 = %+v, want a's vector only", m2)
	}
	assertEmbedding(t, m2, es[1])
	if m := embeddings(t, s, "m3", a.Key()); len(m) != 0 {
		t.Errorf("unknown model = %+v", m)
	}
	if m := embeddings(t, s, "m1"); len(m) != 0 {
		t.Errorf("no keys = %+v", m)
	}

	// Replacing a vector keeps the other model's.
	repl := cards.Embedding{Key: a.Key(), Model: "m1", TextHash: "h-a1b", Vector: vec(9, 8, 7, 6)}
	if err := s.PutEmbeddings(t.Context(), []cards.Embedding{repl}); err != nil {
		t.Fatal(err)
	}
	assertEmbedding(t, embeddings(t, s, "m1", a.Key()), repl)
	assertEmbedding(t, embeddings(t, s, "m2", a.Key()), es[1])

	// Updating the card keeps its vectors; TextHash tells whether they are stale.
	a.Summary = "a, reworded"
	put(t, s, a)
	assertEmbedding(t, embeddings(t, s, "m1", a.Key()), repl)
}

func testEmbeddingsMissingCards(t *testing.T, s cards.Store) {
	a := simple(tenant, "s", "a")
	put(t, s, a)
	ghost := key(tenant, "s", "ghost")
	es := []cards.Embedding{
		{Key: ghost, Model: "m1", TextHash: "h", Vector: vec(1, 0, 0, 0)},
		{Key: a.Key(), Model: "m1", TextHash: "h", Vector: vec(0, 1, 0, 0)},
	}
	if err := s.PutEmbeddings(t.Context(), es); err != nil {
		t.Fatalf("PutEmbeddings with a missing card: %v", err)
	}
	m := embeddings(t, s, "m1", ghost, a.Key())
	if _, ok := m[ghost]; ok || len(m) != 1 {
		t.Errorf("Embeddings = %+v, want a's vector only", m)
	}
	// Creating the card later does not resurrect the ignored vector.
	put(t, s, simple(tenant, "s", "ghost"))
	if m := embeddings(t, s, "m1", ghost); len(m) != 0 {
		t.Errorf("ignored vector appeared: %+v", m)
	}
}

func testEmbeddingsRemovedOnDelete(t *testing.T, s cards.Store) {
	a, b := simple(tenant, "s", "a"), simple(tenant, "s", "b")
	put(t, s, a, b)
	var es []cards.Embedding
	for _, model := range []string{"m1", "m2", "m3"} {
		for _, k := range []cards.Key{a.Key(), b.Key()} {
			es = append(es, cards.Embedding{Key: k, Model: model, TextHash: "h", Vector: vec(1, 2, 3, 4)})
		}
	}
	if err := s.PutEmbeddings(t.Context(), es); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(t.Context(), a.Key(), 0); err != nil {
		t.Fatal(err)
	}
	for _, model := range []string{"m1", "m2", "m3"} {
		m := embeddings(t, s, model, a.Key(), b.Key())
		if _, ok := m[a.Key()]; ok || len(m) != 1 {
			t.Errorf("%s after deleting a = %+v, want b's vector only", model, m)
		}
	}
	// Re-creating the card does not bring its old vectors back.
	put(t, s, a)
	if m := embeddings(t, s, "m1", a.Key()); len(m) != 0 {
		t.Errorf("vectors survived delete + re-create: %+v", m)
	}
}

// --- context and concurrency --------------------------------------------

func testCancelledContext(t *testing.T, s cards.Store) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	c := simple(tenant, "s", "a")
	if _, err := s.Put(ctx, []cards.Card{c}); err == nil {
		t.Errorf("Put with a cancelled context succeeded")
	}
	mustNotFound(t, s, c.Key())
	if _, err := s.List(ctx, cards.ListQuery{Tenant: tenant}); err == nil {
		t.Errorf("List with a cancelled context succeeded")
	}
}

// testConcurrentConditionalUpdates: writers that all read version v and put
// with Version v: exactly one wins each round, the others get ErrConflict.
func testConcurrentConditionalUpdates(t *testing.T, s cards.Store) {
	c := simple(tenant, "s", "contended")
	put(t, s, c)
	const writers, rounds = 6, 3
	for round := range rounds {
		v := get(t, s, c.Key()).Version
		var wg sync.WaitGroup
		var mu sync.Mutex
		wins, conflicts := 0, 0
		var others []error
		for w := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				u := c.Clone()
				u.Version = v
				u.Summary = fmt.Sprintf("round %d writer %d", round, w)
				_, err := s.Put(context.Background(), []cards.Card{u})
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					wins++
				case errors.Is(err, cards.ErrConflict):
					conflicts++
				default:
					others = append(others, err)
				}
			}()
		}
		wg.Wait()
		if wins != 1 || conflicts != writers-1 || len(others) > 0 {
			t.Fatalf("round %d: %d wins, %d conflicts, errors %v; want 1 and %d", round, wins, conflicts, others, writers-1)
		}
		if got := get(t, s, c.Key()).Version; got != v+1 {
			t.Fatalf("round %d: version %d, want %d", round, got, v+1)
		}
	}
}
