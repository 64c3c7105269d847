package retriever_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/seed0cff8200/cardex/cards"
	"github.com/seed0cff8200/cardex/cards/embedded"
	"github.com/seed0cff8200/cardex/embed"
	"github.com/seed0cff8200/cardex/retriever"
)

const acme = "acme"

// --- helpers ----------------------------------------------------------------

func openStore(t testing.TB, dir string) *embedded.Store {
	t.Helper()
	st, err := embedded.Open(dir)
	if err != nil {
		t.Fatalf("embedded.Open: %v", err)
	}
	return st
}

// newStore opens a store in a fresh directory, closed at the end of the test.
func newStore(t testing.TB, cs ...cards.Card) *embedded.Store {
	t.Helper()
	st := openStore(t, t.TempDir())
	t.Cleanup(func() { _ = st.Close() })
	put(t, st, cs...)
	return st
}

func put(t testing.TB, st cards.Store, cs ...cards.Card) []cards.PutResult {
	t.Helper()
	if len(cs) == 0 {
		return nil
	}
	res, err := st.Put(context.Background(), cs)
	if err != nil {
		t.Fatalf("Put: %v", err)
	}
	return res
}

func newRetriever(t testing.TB, st cards.Store, emb embed.Embedder) *retriever.Retriever {
	t.Helper()
	if emb == nil {
		emb = embed.NewHashed(embed.DefaultDim)
	}
	r, err := retriever.New(context.Background(), st, emb, nil)
	if err != nil {
		t.Fatalf("retriever.New: %v", err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

func newRetrieverWith(t testing.TB, st cards.Store, opts ...retriever.Option) *retriever.Retriever {
	t.Helper()
	r, err := retriever.New(context.Background(), st, embed.NewHashed(embed.DefaultDim), nil, opts...)
	if err != nil {
		t.Fatalf("retriever.New: %v", err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

func syncView(t testing.TB, r *retriever.Retriever) {
	t.Helper()
	if err := r.Sync(context.Background()); err != nil {
		t.Fatalf("Sync: %v", err)
	}
}

// card is an active acme card; scopes are its required scopes.
func card(server, name, summary string, scopes ...string) cards.Card {
	return cards.Card{Tenant: acme, Server: server, Name: name, Kind: cards.KindMCPTool, Summary: summary, RequiredScopes: scopes}
}

func with(c cards.Card, f func(*cards.Card)) cards.Card {
	f(&c)
	return c
}

func caller(scopes ...string) retriever.Caller {
	return retriever.Caller{Tenant: acme, Subject: "u1", Scopes: scopes}
}

var admin = caller("*")

func key(server, name string) cards.Key { return cards.Key{Tenant: acme, Server: server, Name: name} }

func discover(t testing.TB, r *retriever.Retriever, req retriever.Request) retriever.Result {
	t.Helper()
	res, err := r.Discover(context.Background(), req)
	if err != nil {
		t.Fatalf("Discover(%q): %v", req.Query, err)
	}
	res.Timings = retriever.Timings{} // wall time, different on every run
	return res
}

// names lists a shortlist as server/name.
func names(res retriever.Result) []string {
	out := make([]string, len(res.Tools))
	for i, s := range res.Tools {
		out[i] = s.Card.Server + "/" + s.Card.Name
	}
	return out
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

func summaryNames(ss []retriever.Summary) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = s.Server + "/" + s.Name
	}
	return out
}

// countingEmbedder wraps an embedder, counts the texts it embeds and can
// pose as another model.
type countingEmbedder struct {
	embed.Embedder
	model string

	mu    sync.Mutex
	texts []string
}

func (c *countingEmbedder) Model() string {
	if c.model != "" {
		return c.model
	}
	return c.Embedder.Model()
}

func (c *countingEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	c.mu.Lock()
	c.texts = append(c.texts, texts...)
	c.mu.Unlock()
	return c.Embedder.Embed(ctx, texts)
}

func (c *countingEmbedder) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.texts)
}

// since returns the texts embedded after the first n.
func (c *countingEmbedder) since(n int) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.texts[n:])
}

func counting(model string) *countingEmbedder {
	return &countingEmbedder{Embedder: embed.NewHashed(embed.DefaultDim), model: model}
}

// syncEmbeds runs Sync and returns the texts it embedded.
func syncEmbeds(t *testing.T, r *retriever.Retriever, emb *countingEmbedder) []string {
	t.Helper()
	n := emb.count()
	syncView(t, r)
	return emb.since(n)
}

func wantInvalid(t *testing.T, err error, field string) {
	t.Helper()
	if err == nil {
		t.Fatalf("want an invalid-argument error naming %q, got nil", field)
	}
	if !errors.Is(err, cards.ErrInvalid) {
		t.Fatalf("error %q: want errors.Is(err, cards.ErrInvalid)", err)
	}
	var fe *cards.FieldError
	if !errors.As(err, &fe) || fe.Field != field {
		t.Errorf("error %q: want field %q", err, field)
	}
	if !strings.Contains(err.Error(), field) {
		t.Errorf("error %q does not name the field %q", err, field)
	}
}

// --- the candidate set is applied inside both legs -------------------------------

// forbiddenLookalikes are 300 cards that match the export query far better
// than any allowed card, each kept out of the caller's candidate set for a
// different reason: missing scope, other tenant, pending or revoked status.
func forbiddenLookalikes() []cards.Card {
	var out []cards.Card
	for i := range 300 {
		c := card(fmt.Sprintf("ledger%02d", i%10), fmt.Sprintf("export_invoice_ledger_pdf_%d", i),
			"Export the customer invoice ledger as a PDF document.")
		c.Aliases = []string{"export invoice ledger", "invoice ledger pdf", "download customer invoices"}
		c.Tags = []string{"invoice", "export"}
		c.InputSchema = []byte(`{"type":"object","properties":{"invoice_id":{"type":"string"},"customer":{"type":"string"}}}`)
		switch i % 4 {
		case 0:
			c.RequiredScopes = []string{"finance:admin"}
		case 1:
			c.Tenant = "globex"
		case 2:
			c.Status = cards.StatusPending
		case 3:
			c.Status = cards.StatusRevoked
		}
		out = append(out, c)
	}
	return out
}

func allowedWeakMatches() []cards.Card {
	return []cards.Card{
		card("shop", "order_status", "Look up the delivery status of a customer order.", "shop:read"),
		card("shop", "product_catalog", "Browse products by category for a customer.", "shop:read"),
		card("shop", "export_cart", "Save the shopping cart as a wish list.", "shop:read"),
	}
}

func TestCandidateSetInsideBothLegs(t *testing.T) {
	ctx := context.Background()
	allowed := allowedWeakMatches()
	// Weak matches are all the shopper may see: without a minimum
	// confidence they come back rather than an abstention.
	full := newRetrieverWith(t, newStore(t, append(forbiddenLookalikes(), allowed...)...), retriever.WithMinConfidence(0))
	only := newRetrieverWith(t, newStore(t, allowed...), retriever.WithMinConfidence(0))
	shopper := caller("shop:read", "billing:*")
	const q = "export the customer invoice ledger as pdf"

	// The lookalikes do outrank the allowed cards for a caller who may see
	// the ones in its tenant that carry a scope: the test is not vacuous.
	fin := discover(t, full, retriever.Request{Caller: caller("shop:read", "finance:admin"), Query: q, TopK: 3})
	for _, s := range fin.Tools {
		if !strings.HasPrefix(s.Card.Name, "export_invoice_ledger_pdf_") {
			t.Fatalf("finance caller: %v; want only lookalikes on top", names(fin))
		}
	}

	res := discover(t, full, retriever.Request{Caller: shopper, Query: q, TopK: 3})
	want := []string{"shop/export_cart", "shop/order_status", "shop/product_catalog"}
	if got := sorted(names(res)); !slices.Equal(got, want) {
		t.Fatalf("Discover = %v, want exactly the allowed %v", names(res), want)
	}
	ref := discover(t, only, retriever.Request{Caller: shopper, Query: q, TopK: 3})
	if res.CandidateCount != 3 || res.CandidateCount != ref.CandidateCount {
		t.Errorf("CandidateCount = %d, store with only the allowed cards: %d, want 3", res.CandidateCount, ref.CandidateCount)
	}
	if res.CatalogTokens != ref.CatalogTokens || res.CatalogTokens <= 0 {
		t.Errorf("CatalogTokens = %d, store with only the allowed cards: %d", res.CatalogTokens, ref.CatalogTokens)
	}
	if res.ShortlistTokens != ref.ShortlistTokens {
		t.Errorf("ShortlistTokens = %d, store with only the allowed cards: %d", res.ShortlistTokens, ref.ShortlistTokens)
	}
	for _, s := range res.Tools {
		if s.Scores.LexicalRank > 3 || s.Scores.SemanticRank > 3 {
			t.Errorf("%s/%s ranks %d/%d in its legs; a leg searched outside the 3 candidates",
				s.Card.Server, s.Card.Name, s.Scores.LexicalRank, s.Scores.SemanticRank)
		}
	}

	// A larger top_k still returns only the candidates.
	res = discover(t, full, retriever.Request{Caller: shopper, Query: q, TopK: 50})
	if got := sorted(names(res)); !slices.Equal(got, want) {
		t.Errorf("top_k 50: %v, want %v", names(res), want)
	}

	// SearchTools, ranked and listed, sees the same set.
	for _, query := range []string{q, ""} {
		page, next, err := full.Search(ctx, shopper, query, 100, "")
		if err != nil {
			t.Fatal(err)
		}
		if got := sorted(summaryNames(page)); !slices.Equal(got, want) || next != "" {
			t.Errorf("Search(%q) = %v (next %q), want %v", query, summaryNames(page), next, want)
		}
	}
}

// --- determinism and tie-breaks -----------------------------------------------

func TestDiscoverDeterministic(t *testing.T) {
	st := newStore(t, synthCatalogue(300, 3, acme)...)
	r := newRetriever(t, st, nil)
	other := newRetriever(t, st, nil) // a second replica over the same store
	for _, c := range []retriever.Caller{admin, caller(benchRestrictedScopes...)} {
		for _, q := range synthQueries(5, 11) {
			for _, fusion := range []string{"", retriever.FusionRelative} {
				req := retriever.Request{Caller: c, Query: q, TopK: 10, Fusion: fusion,
					AlwaysLoad: []cards.Key{key("billing-core", "get_invoice")}}
				first := discover(t, r, req)
				if len(first.Tools) == 0 {
					t.Fatalf("%q: no tools", q)
				}
				for i := range 20 {
					if got := discover(t, r, req); !reflect.DeepEqual(got, first) {
						t.Fatalf("%q (fusion %q) run %d differs:\n%v\nfirst:\n%v", q, fusion, i, names(got), names(first))
					}
				}
				if got := discover(t, other, req); !reflect.DeepEqual(got, first) {
					t.Errorf("%q (fusion %q): a second retriever over the same store answers differently:\n%v\nvs\n%v",
						q, fusion, names(got), names(first))
				}
			}
		}
	}
}

// identicalOn returns the same card on several servers.
func identicalOn(name string, servers ...string) []cards.Card {
	var out []cards.Card
	for _, s := range servers {
		c := card(s, name, "Create a ticket in the issue tracker with a title and a body.")
		c.Aliases = []string{"open a ticket", "file a bug"}
		out = append(out, c)
	}
	return out
}

func TestTieBreakByServerThenName(t *testing.T) {
	// Stored in an order that is neither alphabetical nor reverse.
	cs := identicalOn("create_ticket", "tracker", "alpha", "omega", "beta", "gamma")
	cs = append(cs, identicalOn("new_ticket", "alpha")...)
	// Identical tools on several servers are near-duplicates; collapsing
	// them is tested in TestCollapseNearDuplicates. Here each must rank.
	r := newRetrieverWith(t, newStore(t, cs...), retriever.WithCollapse(false))

	// Relative fusion with alpha 0 is pure lexical: identical cards score the
	// same, so the order is the tie-break alone.
	res := discover(t, r, retriever.Request{Caller: admin, Query: "create a ticket", TopK: 10,
		Fusion: retriever.FusionRelative, Alpha: 0, AlphaSet: true})
	var got []string
	for _, s := range res.Tools {
		if s.Card.Name == "create_ticket" {
			got = append(got, s.Card.Server)
		}
	}
	if want := []string{"alpha", "beta", "gamma", "omega", "tracker"}; !slices.Equal(got, want) {
		t.Errorf("tied servers in order %v, want %v (full list %v)", got, want, names(res))
	}
	for i := 1; i < len(res.Tools); i++ {
		if res.Tools[i].Scores.Score > res.Tools[i-1].Scores.Score {
			t.Errorf("scores not descending at %d: %v", i, names(res))
		}
	}

	// With RRF and exactly two identical cards the lexical tie puts the
	// first server first, and no semantic order can overturn it.
	r2 := newRetrieverWith(t, newStore(t, identicalOn("create_ticket", "zeta", "delta")...), retriever.WithCollapse(false))
	for range 5 {
		res := discover(t, r2, retriever.Request{Caller: admin, Query: "create a ticket", TopK: 2, Fusion: retriever.FusionRRF})
		if got := names(res); !slices.Equal(got, []string{"delta/create_ticket", "zeta/create_ticket"}) {
			t.Fatalf("RRF tie: %v", got)
		}
	}
}

// TestTieBreakServerPrefix: a server whose name is a prefix of another's
// ("jira", "jira-cloud") must still come first in (server, name) order. Ties
// break on DocID order, which is (server, name) order only if the separator
// sorts below every name character ('-' and '.' sort below '/').
func TestTieBreakServerPrefix(t *testing.T) {
	servers := []string{"jira_dc", "jira2", "jira.v2", "jira", "jira-cloud"}
	want := slices.Clone(servers)
	slices.Sort(want) // jira, jira-cloud, jira.v2, jira2, jira_dc
	r := newRetrieverWith(t, newStore(t, identicalOn("create_ticket", servers...)...), retriever.WithCollapse(false))

	res := discover(t, r, retriever.Request{Caller: admin, Query: "create a ticket", TopK: 10,
		Fusion: retriever.FusionRelative, Alpha: 0, AlphaSet: true})
	var got []string
	for _, s := range res.Tools {
		got = append(got, s.Card.Server)
	}
	if !slices.Equal(got, want) {
		t.Errorf("Discover tie-break: servers in order %v, want (server, name) order %v", got, want)
	}

	page, _, err := r.Search(context.Background(), admin, "", 10, "")
	if err != nil {
		t.Fatal(err)
	}
	got = got[:0]
	for _, s := range page {
		got = append(got, s.Server)
	}
	if !slices.Equal(got, want) {
		t.Errorf("Search listing: servers in order %v, want (server, name) order %v", got, want)
	}
}

// --- pins ------------------------------------------------------------------

func pinCatalogue() []cards.Card {
	return []cards.Card{
		card("keys", "rotate_api_key", "Rotate an API key and revoke the old one.", "security:write"),
		card("keys", "list_api_keys", "List the API keys of a project.", "security:read"),
		card("keys", "revoke_api_key", "Revoke an API key immediately.", "security:write"),
		card("keys", "api_key_usage", "Show how often each API key was used.", "security:read"),
		card("weather", "forecast", "Weather forecast for a city."),
		card("vault", "read_secret", "Read a secret value from the vault.", "vault:admin"),
		with(card("vault", "legacy_secret", "Old secret reader."), func(c *cards.Card) { c.Status = cards.StatusRevoked }),
		with(card("vault", "read_secret", "Globex secrets."), func(c *cards.Card) { c.Tenant = "globex" }),
		with(card("keys", "globex_only", "Globex key tool."), func(c *cards.Card) { c.Tenant = "globex" }),
	}
}

func TestPins(t *testing.T) {
	r := newRetriever(t, newStore(t, pinCatalogue()...), nil)
	sec := caller("security:*")
	const q = "rotate api key"

	ranked := discover(t, r, retriever.Request{Caller: sec, Query: q, TopK: 2})
	if got := names(ranked); len(got) != 2 || got[0] != "keys/rotate_api_key" {
		t.Fatalf("unpinned ranking %v: want keys/rotate_api_key first", got)
	}
	for _, s := range ranked.Tools {
		if s.Pinned {
			t.Errorf("%s pinned without always_load", s.Card.Name)
		}
	}

	res := discover(t, r, retriever.Request{Caller: sec, Query: q, TopK: 2, AlwaysLoad: []cards.Key{
		key("weather", "forecast"),    // allowed, unrelated: pinned
		key("vault", "read_secret"),   // missing scope: dropped
		key("weather", "forecast"),    // duplicate: once
		key("keys", "rotate_api_key"), // allowed and ranks #1: one entry, pinned
		key("vault", "legacy_secret"), // revoked: dropped
	}})
	want := []string{"weather/forecast", "keys/rotate_api_key", names(ranked)[1]}
	if got := names(res); !slices.Equal(got, want) {
		t.Fatalf("with pins: %v, want %v", got, want)
	}
	fc, rot, third := res.Tools[0], res.Tools[1], res.Tools[2]
	if !fc.Pinned || !rot.Pinned || third.Pinned {
		t.Errorf("Pinned flags = %v %v %v, want true true false", fc.Pinned, rot.Pinned, third.Pinned)
	}
	if fc.Reason != "pinned (always_load)" || fc.Scores.Score != 0 || fc.Scores.LexicalRank != 0 || fc.Scores.SemanticRank != 0 {
		t.Errorf("unranked pin: reason %q, scores %+v", fc.Reason, fc.Scores)
	}
	if !strings.HasPrefix(rot.Reason, "pinned (always_load); ") || !strings.Contains(rot.Reason, "lexical #1") {
		t.Errorf("ranked pin reason %q", rot.Reason)
	}
	if !reflect.DeepEqual(rot.Scores, ranked.Tools[0].Scores) {
		t.Errorf("ranked pin scores %+v, unpinned %+v", rot.Scores, ranked.Tools[0].Scores)
	}
	var sum int64
	for _, s := range res.Tools {
		sum += int64(s.Tokens)
		if s.Tokens <= 0 {
			t.Errorf("%s: tokens %d", s.Card.Name, s.Tokens)
		}
	}
	if res.ShortlistTokens != sum {
		t.Errorf("ShortlistTokens %d, sum of tools %d", res.ShortlistTokens, sum)
	}

	// Pins come in addition to top_k.
	res = discover(t, r, retriever.Request{Caller: sec, Query: q, TopK: 2, AlwaysLoad: []cards.Key{key("weather", "forecast")}})
	if got := names(res); !slices.Equal(got, append([]string{"weather/forecast"}, names(ranked)...)) {
		t.Errorf("one unranked pin + top_k 2: %v", got)
	}

	// Pins are authorized like everything else: a pin naming another
	// tenant is read in the caller's tenant, and a caller without the
	// scope gets nothing for it.
	res = discover(t, r, retriever.Request{Caller: caller("*"), Query: "weather", TopK: 1, AlwaysLoad: []cards.Key{
		{Tenant: "globex", Server: "keys", Name: "globex_only"},
		{Tenant: "globex", Server: "vault", Name: "read_secret"},
	}})
	for _, s := range res.Tools {
		if s.Card.Tenant != acme {
			t.Errorf("pin leaked a %s card: %s/%s", s.Card.Tenant, s.Card.Server, s.Card.Name)
		}
	}
	if got := names(res); !slices.Equal(got, []string{"vault/read_secret", "weather/forecast"}) {
		t.Errorf("cross-tenant pins: %v, want acme's vault/read_secret pinned, then weather/forecast", got)
	}
	if res.Tools[0].Card.Summary != "Read a secret value from the vault." {
		t.Errorf("pinned the wrong tenant's card: %+v", res.Tools[0].Card)
	}
	res = discover(t, r, retriever.Request{Caller: caller(), Query: "weather", TopK: 1, AlwaysLoad: []cards.Key{key("keys", "list_api_keys")}})
	if got := names(res); !slices.Equal(got, []string{"weather/forecast"}) {
		t.Errorf("unauthorized pin: %v", got)
	}
}

// --- Sync and embeddings -----------------------------------------------------

func TestSyncFollowsStore(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st := openStore(t, dir)
	defer func() { _ = st.Close() }()
	invoice := card("billing", "create_invoice", "Create an invoice for a customer.", "billing:write")
	refund := card("billing", "refund_payment", "Refund a card payment.", "billing:write")
	tickets := card("support", "list_tickets", "List open support tickets.", "support:read")
	put(t, st, invoice, refund, tickets)

	emb := counting("")
	r := newRetriever(t, st, emb)
	if r.Len() != 3 || emb.count() != 3 {
		t.Fatalf("after New: Len %d, %d texts embedded; want 3 and 3", r.Len(), emb.count())
	}
	if seq, _ := st.Seq(ctx); r.Seq() != seq {
		t.Errorf("Seq %d, store %d", r.Seq(), seq)
	}
	describe := func(c retriever.Caller, name string) (cards.Card, error) {
		t.Helper()
		res, err := r.Describe(ctx, c, name, "")
		return res.Card, err
	}
	top := func(q string) string {
		t.Helper()
		res := discover(t, r, retriever.Request{Caller: admin, Query: q, TopK: 1})
		if len(res.Tools) == 0 {
			return ""
		}
		return res.Tools[0].Card.Name
	}

	// Nothing changes in the view before Sync.
	rotate := card("security", "rotate_keys", "Rotate the signing keys of a service.", "security:admin")
	put(t, st, rotate)
	if _, err := describe(admin, "rotate_keys"); !errors.Is(err, cards.ErrNotFound) {
		t.Fatalf("before Sync: Describe = %v, want not found", err)
	}
	if got := syncEmbeds(t, r, emb); len(got) != 1 || got[0] != retriever.EmbeddingText(&rotate) {
		t.Errorf("Sync after a put embedded %q, want the new card only", got)
	}
	if r.Len() != 4 || top("rotate signing keys") != "rotate_keys" {
		t.Fatalf("after put: Len %d, top %q", r.Len(), top("rotate signing keys"))
	}
	if c, err := describe(admin, "rotate_keys"); err != nil || c.Version != 1 {
		t.Fatalf("Describe after put: %+v, %v", c, err)
	}

	// A scope change keeps the text: the vector is reused, the gate moves.
	rotate.RequiredScopes = []string{"security:root"}
	put(t, st, rotate)
	if got := syncEmbeds(t, r, emb); len(got) != 0 {
		t.Errorf("scope-only update re-embedded %q", got)
	}
	if _, err := describe(caller("security:admin"), "rotate_keys"); !errors.Is(err, cards.ErrNotFound) {
		t.Errorf("old scope still admitted: %v", err)
	}
	if c, err := describe(caller("security:root"), "rotate_keys"); err != nil || c.Version != 2 {
		t.Errorf("new scope: %+v, %v", c, err)
	}

	// A text change re-embeds that card only, and search follows the text.
	rotate.Summary = "Renew the TLS certificates of a load balancer."
	put(t, st, rotate)
	if got := syncEmbeds(t, r, emb); len(got) != 1 || got[0] != retriever.EmbeddingText(&rotate) {
		t.Errorf("text update embedded %q, want the changed card only", got)
	}
	if got := top("renew tls certificates"); got != "rotate_keys" {
		t.Errorf("after text update: top %q", got)
	}
	if c, _ := describe(admin, "rotate_keys"); c.Summary != rotate.Summary || c.Version != 3 {
		t.Errorf("Describe after text update: %+v", c)
	}

	// Revoke: gone from every view, no embedding work.
	rotate.Status = cards.StatusRevoked
	put(t, st, rotate)
	if got := syncEmbeds(t, r, emb); len(got) != 0 {
		t.Errorf("revoke embedded %q", got)
	}
	if r.Len() != 3 {
		t.Errorf("after revoke: Len %d", r.Len())
	}
	if _, err := describe(admin, "rotate_keys"); !errors.Is(err, cards.ErrNotFound) {
		t.Errorf("revoked card described: %v", err)
	}
	if got := top("renew tls certificates"); got == "rotate_keys" {
		t.Error("revoked card discovered")
	}
	if az, _ := r.Authorize(ctx, admin, "rotate_keys", "", nil); az.Decision != retriever.DenyUnknownTool {
		t.Errorf("revoked card authorized: %+v", az)
	}
	// Re-activated with the same text: the stored vector is reused.
	rotate.Status = cards.StatusActive
	put(t, st, rotate)
	if got := syncEmbeds(t, r, emb); len(got) != 0 {
		t.Errorf("re-activation re-embedded %q", got)
	}
	if r.Len() != 4 || top("renew tls certificates") != "rotate_keys" {
		t.Errorf("after re-activation: Len %d, top %q", r.Len(), top("renew tls certificates"))
	}

	// Pending is not active either.
	refund.Status = cards.StatusPending
	put(t, st, refund)
	syncView(t, r)
	if _, err := describe(admin, "refund_payment"); !errors.Is(err, cards.ErrNotFound) || r.Len() != 3 {
		t.Errorf("pending card: Describe %v, Len %d", err, r.Len())
	}

	// Delete: gone; re-creating it embeds it again (vectors went with it).
	if err := st.Delete(ctx, tickets.Key(), 0); err != nil {
		t.Fatal(err)
	}
	if got := syncEmbeds(t, r, emb); len(got) != 0 {
		t.Errorf("delete embedded %q", got)
	}
	if _, err := describe(admin, "list_tickets"); !errors.Is(err, cards.ErrNotFound) || r.Len() != 2 {
		t.Errorf("deleted card: Describe %v, Len %d", err, r.Len())
	}
	res := discover(t, r, retriever.Request{Caller: admin, Query: "list open support tickets", TopK: 50})
	if slices.Contains(names(res), "support/list_tickets") || res.CandidateCount != 2 {
		t.Errorf("deleted card still discovered: %v (candidates %d)", names(res), res.CandidateCount)
	}
	put(t, st, tickets)
	if got := syncEmbeds(t, r, emb); len(got) != 1 {
		t.Errorf("re-created card: embedded %q, want it once", got)
	}
	if top("list open support tickets") != "list_tickets" || r.Len() != 3 {
		t.Errorf("re-created card not found")
	}

	// Sync with nothing new does nothing.
	seq := r.Seq()
	if got := syncEmbeds(t, r, emb); len(got) != 0 || r.Seq() != seq {
		t.Errorf("idle Sync: embedded %q, seq %d → %d", got, seq, r.Seq())
	}
	if s, _ := st.Seq(ctx); r.Seq() != s {
		t.Errorf("Seq %d, store %d", r.Seq(), s)
	}

	// Another retriever with the same model reuses every stored vector.
	emb2 := counting("")
	newRetriever(t, st, emb2)
	if emb2.count() != 0 {
		t.Errorf("second retriever, same model: embedded %d texts, want 0", emb2.count())
	}
	// Another model id re-embeds every active card, and only those.
	alt := counting("cardex-test-alt-model")
	ra := newRetriever(t, st, alt)
	if alt.count() != 3 || ra.Len() != 3 {
		t.Errorf("other model: embedded %d texts, Len %d; want 3 and 3", alt.count(), ra.Len())
	}
	// ... and the first model's vectors are still there for it.
	emb3 := counting("")
	newRetriever(t, st, emb3)
	if emb3.count() != 0 {
		t.Errorf("back to the first model: embedded %d texts, want 0", emb3.count())
	}
	// A text change seen by both models re-embeds in both.
	invoice.Summary = "Create and send an invoice to a customer by email."
	put(t, st, invoice)
	if got := syncEmbeds(t, ra, alt); len(got) != 1 {
		t.Errorf("other model after text change: embedded %q", got)
	}
	if got := syncEmbeds(t, r, emb); len(got) != 1 {
		t.Errorf("first model after text change: embedded %q", got)
	}

	// A retriever on the reopened store loads the same view.
	queries := []string{"create invoice", "renew certificates", "support tickets", "refund", "keys"}
	callers := []retriever.Caller{admin, caller("billing:*"), caller("support:read", "security:root")}
	type answer struct {
		res  retriever.Result
		list []retriever.Summary
	}
	snapshot := func(r *retriever.Retriever) []answer {
		var out []answer
		for _, c := range callers {
			list, _, err := r.Search(ctx, c, "", 100, "")
			if err != nil {
				t.Fatal(err)
			}
			for _, q := range queries {
				out = append(out, answer{discover(t, r, retriever.Request{Caller: c, Query: q, TopK: 5}), list})
			}
		}
		return out
	}
	before, lenBefore, seqBefore := snapshot(r), r.Len(), r.Seq()
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st = openStore(t, dir)
	emb4 := counting("")
	r4 := newRetriever(t, st, emb4)
	if emb4.count() != 0 {
		t.Errorf("reopened store: embedded %d texts, want 0", emb4.count())
	}
	if r4.Len() != lenBefore || r4.Seq() != seqBefore {
		t.Errorf("reopened: Len %d Seq %d, before %d %d", r4.Len(), r4.Seq(), lenBefore, seqBefore)
	}
	after := snapshot(r4)
	for i := range before {
		if !slices.Equal(names(after[i].res), names(before[i].res)) ||
			!reflect.DeepEqual(after[i].list, before[i].list) ||
			after[i].res.CandidateCount != before[i].res.CandidateCount ||
			after[i].res.CatalogTokens != before[i].res.CatalogTokens {
			t.Errorf("answer %d differs after reopen:\n%v\nbefore:\n%v", i, names(after[i].res), names(before[i].res))
		}
	}
}

// TestSyncPagesThroughManyChanges: more changes than one Changes page.
func TestSyncPagesThroughManyChanges(t *testing.T) {
	st := newStore(t)
	r := newRetriever(t, st, nil)
	cs := synthCatalogue(1500, 5, acme) // more than one page of changes (1000)
	putBatches(t, st, cs)
	syncView(t, r)
	if r.Len() != len(cs) {
		t.Fatalf("Len %d, want %d", r.Len(), len(cs))
	}
	// Revoke every third card in one batch.
	var upd []cards.Card
	for i := 0; i < len(cs); i += 3 {
		c := cs[i]
		c.Status = cards.StatusRevoked
		upd = append(upd, c)
	}
	putBatches(t, st, upd)
	syncView(t, r)
	if want := len(cs) - len(upd); r.Len() != want {
		t.Fatalf("after revoking %d: Len %d, want %d", len(upd), r.Len(), want)
	}
	res := discover(t, r, retriever.Request{Caller: admin, Query: "list invoices", TopK: 1})
	if res.CandidateCount != r.Len() {
		t.Errorf("CandidateCount %d, Len %d", res.CandidateCount, r.Len())
	}
}

// TestStoreUnavailable: store errors surface from New and Sync; the view
// already loaded keeps answering.
func TestStoreUnavailable(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, t.TempDir())
	put(t, st, card("util", "echo", "Echo the arguments back."))
	r := newRetriever(t, st, nil)
	put(t, st, card("util", "ping", "Ping a host."))
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if err := r.Sync(ctx); !errors.Is(err, cards.ErrUnavailable) {
		t.Errorf("Sync on a closed store: %v, want ErrUnavailable", err)
	}
	if _, err := retriever.New(ctx, st, embed.NewHashed(embed.DefaultDim), nil); !errors.Is(err, cards.ErrUnavailable) {
		t.Errorf("New on a closed store: %v, want ErrUnavailable", err)
	}
	if res := discover(t, r, retriever.Request{Caller: admin, Query: "echo arguments"}); r.Len() != 1 || len(res.Tools) != 1 {
		t.Errorf("loaded view after the store went away: Len %d, %v", r.Len(), names(res))
	}
}

// TestConcurrentReadsDuringSync runs the read paths while cards change and
// Sync applies them (meant for -race).
func TestConcurrentReadsDuringSync(t *testing.T) {
	ctx := context.Background()
	cs := synthCatalogue(200, 9, acme)
	st := newStore(t, cs[:100]...)
	r := newRetriever(t, st, nil)
	queries := synthQueries(10, 3)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	errs := make(chan error, 8)
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := admin
			if w%2 == 1 {
				c = caller(benchRestrictedScopes...)
			}
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				q := queries[i%len(queries)]
				if _, err := r.Discover(ctx, retriever.Request{Caller: c, Query: q, TopK: 5}); err != nil {
					errs <- err
					return
				}
				if _, _, err := r.Search(ctx, c, q, 5, ""); err != nil {
					errs <- err
					return
				}
				if _, err := r.Describe(ctx, c, cs[i%len(cs)].Name, cs[i%len(cs)].Server); err != nil && !errors.Is(err, cards.ErrNotFound) {
					errs <- err
					return
				}
			}
		}()
	}
	for i := 100; i < 200; i += 10 {
		put(t, st, cs[i:i+10]...)
		if err := st.Delete(ctx, cs[i-100].Key(), 0); err != nil {
			t.Fatal(err)
		}
		syncView(t, r)
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if r.Len() != 190 {
		t.Errorf("Len %d, want 190", r.Len())
	}
}

// --- Describe and Authorize ----------------------------------------------------

func lookupCatalogue() []cards.Card {
	schema := []byte(`{"type":"object","properties":{"repo":{"type":"string"},"query":{"type":"string","minLength":1},"limit":{"type":"integer","minimum":1,"maximum":100}},"required":["repo","query"],"additionalProperties":false}`)
	gh := card("github", "search", "Search code in a repository.", "github:read")
	gh.InputSchema = schema
	return []cards.Card{
		gh,
		card("jira", "search", "Search issues with JQL.", "jira:read"),
		card("vault", "search", "Search secrets by path.", "vault:admin"),
		card("vault", "drop_secret", "Delete a secret forever.", "vault:admin"),
		with(card("old", "search", "Retired search."), func(c *cards.Card) { c.Status = cards.StatusRevoked }),
		with(card("github", "search", "Globex search."), func(c *cards.Card) { c.Tenant = "globex" }),
		with(card("globex", "globex_tool", "Globex only."), func(c *cards.Card) { c.Tenant = "globex" }),
		card("util", "echo", "Echo the arguments back."),
	}
}

func TestDescribe(t *testing.T) {
	ctx := context.Background()
	st := newStore(t, lookupCatalogue()...)
	r := newRetriever(t, st, nil)
	dev := caller("github:read", "jira:read")

	res, err := r.Describe(ctx, dev, "search", "")
	if err != nil || !slices.Equal(res.Ambiguous, []string{"github", "jira"}) || res.Card.Name != "" {
		t.Errorf("ambiguous: %+v, %v; want servers [github jira] (vault is forbidden, old revoked)", res, err)
	}
	res, err = r.Describe(ctx, dev, "search", "jira")
	if err != nil || res.Card.Server != "jira" || res.Ambiguous != nil {
		t.Errorf("with server: %+v, %v", res, err)
	}
	res, err = r.Describe(ctx, dev, "search", "github")
	if err != nil || string(res.Card.InputSchema) == "" || res.Card.Tenant != acme || res.Card.Version != 1 {
		t.Errorf("github search: %+v, %v", res, err)
	}
	// Hidden ones do not make a name ambiguous.
	res, err = r.Describe(ctx, caller("github:read", "vault:read"), "search", "")
	if err != nil || res.Card.Server != "github" || res.Ambiguous != nil {
		t.Errorf("only github visible: %+v, %v", res, err)
	}
	res, err = r.Describe(ctx, admin, "search", "")
	if err != nil || !slices.Equal(res.Ambiguous, []string{"github", "jira", "vault"}) {
		t.Errorf("admin ambiguous: %+v, %v", res, err)
	}

	// Not found: forbidden, revoked, other tenant's and missing are one answer.
	notFound := func(c retriever.Caller, name, server string) string {
		t.Helper()
		res, err := r.Describe(ctx, c, name, server)
		if !errors.Is(err, cards.ErrNotFound) || !reflect.DeepEqual(res, retriever.Resolved{}) {
			t.Fatalf("Describe(%s, %s): %+v, %v; want not found", server, name, res, err)
		}
		return strings.ReplaceAll(err.Error(), name, "NAME")
	}
	missing := notFound(dev, "no_such_tool", "")
	for _, tc := range []struct {
		c            retriever.Caller
		name, server string
	}{
		{dev, "drop_secret", ""},      // scope
		{dev, "drop_secret", "vault"}, // scope, server given
		{dev, "search", "vault"},      // scope, name exists elsewhere
		{dev, "search", "old"},        // revoked
		{admin, "search", "old"},      // revoked, whatever the scopes
		{admin, "globex_tool", ""},    // other tenant
		{admin, "search", "nowhere"},  // missing server
		{caller(), "drop_secret", ""}, // no scopes
		{retriever.Caller{Tenant: "initech", Scopes: []string{"*"}}, "search", ""}, // unknown tenant
	} {
		if got := notFound(tc.c, tc.name, tc.server); got != missing {
			t.Errorf("Describe(%s, %s) error %q differs from a missing tool's %q", tc.server, tc.name, got, missing)
		}
	}
	// The same name before and after the card is deleted: identical answers.
	_, errForbidden := r.Describe(ctx, dev, "drop_secret", "")
	if err := st.Delete(ctx, key("vault", "drop_secret"), 0); err != nil {
		t.Fatal(err)
	}
	syncView(t, r)
	_, errMissing := r.Describe(ctx, dev, "drop_secret", "")
	if errForbidden == nil || errMissing == nil || errForbidden.Error() != errMissing.Error() {
		t.Errorf("forbidden %v vs deleted %v", errForbidden, errMissing)
	}

	// Returned cards are copies.
	res, _ = r.Describe(ctx, dev, "search", "github")
	res.Card.InputSchema[0] = 'X'
	res.Card.RequiredScopes[0] = "hacked"
	again, _ := r.Describe(ctx, dev, "search", "github")
	if again.Card.InputSchema[0] != '{' || again.Card.RequiredScopes[0] != "github:read" {
		t.Errorf("Describe returned the view's own card: %s %v", again.Card.InputSchema, again.Card.RequiredScopes)
	}
}

func TestAuthorize(t *testing.T) {
	ctx := context.Background()
	r := newRetriever(t, newStore(t, lookupCatalogue()...), nil)
	dev := caller("github:read", "jira:read")
	authz := func(c retriever.Caller, name, server, args string) retriever.Authorization {
		t.Helper()
		a, err := r.Authorize(ctx, c, name, server, []byte(args))
		if err != nil {
			t.Fatalf("Authorize(%s, %s): %v", server, name, err)
		}
		return a
	}

	// A caller that has gone (or whose deadline passed) gets no validation.
	gone, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := r.Authorize(gone, dev, "search", "github", []byte(`{"repo":"cardex","query":"x"}`)); !errors.Is(err, context.Canceled) {
		t.Errorf("Authorize after the caller went: %v, want context.Canceled", err)
	}

	a := authz(dev, "search", "github", `{"repo":"cardex","query":"retriever","limit":10}`)
	if a.Decision != retriever.Allow || a.Key != key("github", "search") || a.Version != 1 || len(a.Violations) != 0 {
		t.Errorf("allow: %+v", a)
	}
	// No schema: any object, and no arguments at all, pass.
	for _, args := range []string{"", "{}", `{"anything":[1,2]}`, "  "} {
		if a := authz(caller(), "echo", "", args); a.Decision != retriever.Allow {
			t.Errorf("echo %q: %+v", args, a)
		}
	}

	// Invalid arguments: every violation, readable.
	a = authz(dev, "search", "github", `{"repo":7,"limit":1000,"extra":true}`)
	if a.Decision != retriever.DenyInvalidArguments || a.Key != key("github", "search") {
		t.Fatalf("invalid args: %+v", a)
	}
	joined := strings.Join(a.Violations, "\n")
	for _, want := range []string{"query", "repo", "limit", "extra"} {
		if !strings.Contains(joined, want) {
			t.Errorf("violations %q do not mention %q", a.Violations, want)
		}
	}
	for _, v := range a.Violations {
		if strings.Contains(v, "mem:///") || strings.TrimSpace(v) == "" {
			t.Errorf("unreadable violation %q", v)
		}
	}
	for _, args := range []string{"", "{}", `{"repo":"x"}`, `[1]`, `"text"`, `{"repo":`, `null`} {
		if a := authz(dev, "search", "github", args); a.Decision != retriever.DenyInvalidArguments || len(a.Violations) == 0 {
			t.Errorf("args %q: %+v, want deny_invalid_arguments with violations", args, a)
		}
	}
	if a := authz(caller(), "echo", "", `[1,2]`); a.Decision != retriever.DenyInvalidArguments {
		t.Errorf("array arguments to a schemaless tool: %+v", a)
	}

	// Ambiguous: the servers the caller may use.
	a = authz(dev, "search", "", `{}`)
	if a.Decision != retriever.DenyAmbiguous || !slices.Equal(a.Ambiguous, []string{"github", "jira"}) ||
		!strings.Contains(a.Message, "github, jira") || a.Key != (cards.Key{}) {
		t.Errorf("ambiguous: %+v", a)
	}

	// Unknown: forbidden, revoked, other tenant's and missing look the same.
	unknown := authz(dev, "no_such_tool", "", `{}`)
	if unknown.Decision != retriever.DenyUnknownTool || unknown.Key != (cards.Key{}) || unknown.Version != 0 {
		t.Errorf("missing: %+v", unknown)
	}
	norm := func(a retriever.Authorization, name string) retriever.Authorization {
		a.Message = strings.ReplaceAll(a.Message, name, "NAME")
		return a
	}
	want := norm(unknown, "no_such_tool")
	for _, tc := range []struct {
		c            retriever.Caller
		name, server string
	}{
		{dev, "drop_secret", ""},
		{dev, "drop_secret", "vault"},
		{dev, "search", "vault"},
		{admin, "search", "old"},
		{admin, "globex_tool", ""},
		{caller(), "search", "github"},
	} {
		// Valid or invalid arguments make no difference to a hidden tool.
		for _, args := range []string{`{}`, `[`} {
			if got := norm(authz(tc.c, tc.name, tc.server, args), tc.name); !reflect.DeepEqual(got, want) {
				t.Errorf("Authorize(%s, %s, %s) = %+v, want the missing tool's %+v", tc.server, tc.name, args, got, want)
			}
		}
	}

	// Request errors.
	_, err := r.Authorize(ctx, dev, "search", "github", make([]byte, retriever.MaxArgsBytes+1))
	wantInvalid(t, err, "arguments_json")
	_, err = r.Authorize(ctx, dev, "", "", nil)
	wantInvalid(t, err, "name")
	_, err = r.Authorize(ctx, dev, "bad name", "", nil)
	wantInvalid(t, err, "name")
	_, err = r.Authorize(ctx, dev, "search", "bad/server", nil)
	wantInvalid(t, err, "server")
	_, err = r.Authorize(ctx, retriever.Caller{}, "search", "", nil)
	wantInvalid(t, err, "caller.tenant")
}

// --- SearchTools -------------------------------------------------------------

func TestSearchListing(t *testing.T) {
	ctx := context.Background()
	var cs []cards.Card
	for _, s := range []string{"crm", "billing", "support"} {
		for _, n := range []string{"update_record", "get_record", "list_records", "delete_record"} {
			cs = append(cs, card(s, n, "Work with "+s+" records: "+strings.ReplaceAll(n, "_", " ")+".", s+":read"))
		}
	}
	cs = append(cs, card("audit", "tail_log", "Tail the audit log.", "audit:read"))
	r := newRetriever(t, newStore(t, cs...), nil)
	c := caller("crm:read", "billing:*", "support:read")

	var want []string
	for _, x := range cs {
		if x.Server != "audit" {
			want = append(want, x.Server+"/"+x.Name)
		}
	}
	slices.Sort(want) // (server, name) order: no server is a prefix of another here

	all, next, err := r.Search(ctx, c, "", 0, "")
	if err != nil || next != "" || !slices.Equal(summaryNames(all), want) {
		t.Fatalf("listing: %v (next %q, %v), want %v", summaryNames(all), next, err, want)
	}
	for _, s := range all {
		if s.Summary == "" {
			t.Errorf("%s/%s: no summary", s.Server, s.Name)
		}
	}
	for _, size := range []int{1, 5, 12, 13} {
		var got []string
		cursor, pages := "", 0
		for {
			page, next, err := r.Search(ctx, c, "", size, cursor)
			if err != nil {
				t.Fatalf("page size %d: %v", size, err)
			}
			if len(page) > size {
				t.Fatalf("page of %d with size %d", len(page), size)
			}
			got = append(got, summaryNames(page)...)
			pages++
			if next == "" {
				break
			}
			cursor = next
		}
		if !slices.Equal(got, want) || pages != (len(want)+size-1)/size {
			t.Errorf("page size %d: %d pages, %v", size, pages, got)
		}
	}
}

func TestSearchRanked(t *testing.T) {
	ctx := context.Background()
	r := newRetriever(t, newStore(t, synthCatalogue(40, 2, acme)...), nil)
	const qa, qb = "list open invoices for a customer", "create a ticket"

	// Pages concatenate to Discover's order (catalogue under the leg depth).
	disc := discover(t, r, retriever.Request{Caller: admin, Query: qa, TopK: retriever.MaxTopK})
	var got []string
	cursor := ""
	for {
		page, next, err := r.Search(ctx, admin, qa, 7, cursor)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, summaryNames(page)...)
		if next == "" {
			break
		}
		cursor = next
	}
	if !slices.Equal(got, names(disc)) {
		t.Errorf("ranked pages:\n%v\nDiscover:\n%v", got, names(disc))
	}

	// A cursor belongs to its query.
	_, next, err := r.Search(ctx, admin, qa, 5, "")
	if err != nil || next == "" {
		t.Fatalf("first page: next %q, %v", next, err)
	}
	if _, _, err := r.Search(ctx, admin, qa, 5, next); err != nil {
		t.Errorf("cursor on its own query: %v", err)
	}
	_, _, err = r.Search(ctx, admin, qb, 5, next)
	wantInvalid(t, err, "cursor")
	_, _, err = r.Search(ctx, admin, "", 5, next)
	wantInvalid(t, err, "cursor")
	_, listNext, err := r.Search(ctx, admin, "", 5, "")
	if err != nil || listNext == "" {
		t.Fatal(err)
	}
	_, _, err = r.Search(ctx, admin, qa, 5, listNext)
	wantInvalid(t, err, "cursor")
	for _, bad := range []string{"garbage!", "e30", "eyJvIjotMSwicSI6IiJ9"} {
		_, _, err = r.Search(ctx, admin, qa, 5, bad)
		wantInvalid(t, err, "cursor")
	}
}

// rankedPages pages through a ranked Search until limit results or the end.
func rankedPages(t *testing.T, r *retriever.Retriever, c retriever.Caller, q string, size, limit int) []string {
	t.Helper()
	var got []string
	cursor := ""
	for len(got) < limit {
		page, next, err := r.Search(context.Background(), c, q, size, cursor)
		if err != nil {
			t.Fatalf("Search(%q): %v", q, err)
		}
		got = append(got, summaryNames(page)...)
		if next == "" {
			break
		}
		cursor = next
	}
	return got
}

// TestSearchRankedDeepPagination: ranked pages over a catalogue larger than
// a leg's depth must neither repeat nor skip tools, and agree with Discover.
// Every page re-runs the pipeline with top_k = offset+page_size+1; while the
// legs' depth follows top_k (discover.go: depth := max(legDepth, 4*topK)),
// each page ranks a different fusion. A depth that does not depend on top_k
// (depth := 4 * MaxTopK) makes every page a slice of one ranking.
func TestSearchRankedDeepPagination(t *testing.T) {
	r := newRetriever(t, newStore(t, synthCatalogue(600, 4, acme)...), nil)
	var dups, differ []string
	for _, q := range synthQueries(20, 99) {
		got := rankedPages(t, r, admin, q, 10, 150)
		seen := map[string]bool{}
		for _, n := range got {
			if seen[n] {
				dups = append(dups, fmt.Sprintf("%q repeats %s", q, n))
				break
			}
			seen[n] = true
		}
		disc := names(discover(t, r, retriever.Request{Caller: admin, Query: q, TopK: retriever.MaxTopK}))
		if len(got) < len(disc) || !slices.Equal(got[:len(disc)], disc) {
			differ = append(differ, fmt.Sprintf("%q", q))
		}
	}
	if len(dups) > 0 {
		t.Errorf("ranked Search pages repeat tools (and so skip others) for %d of 20 queries:\n%s", len(dups), strings.Join(dups, "\n"))
	}
	if len(differ) > 0 {
		t.Errorf("ranked Search order differs from Discover top_k %d for %d of 20 queries: %s", retriever.MaxTopK, len(differ), strings.Join(differ, ", "))
	}
}

// TestDiscoverTopKIsPrefix: the same query with a smaller top_k returns the
// first tools of a larger top_k, in the same order. RRF scores depend on how
// deep each leg is read, so this holds only if the depth does not follow
// top_k (see TestSearchRankedDeepPagination).
func TestDiscoverTopKIsPrefix(t *testing.T) {
	r := newRetriever(t, newStore(t, synthCatalogue(1000, 4, acme)...), nil)
	var bad []string
	queries := synthQueries(50, 99)
	for _, q := range queries {
		full := names(discover(t, r, retriever.Request{Caller: admin, Query: q, TopK: retriever.MaxTopK}))
		for _, k := range []int{1, 5, 10, 13, 20} {
			got := names(discover(t, r, retriever.Request{Caller: admin, Query: q, TopK: k}))
			if !slices.Equal(got, full[:min(k, len(full))]) {
				bad = append(bad, fmt.Sprintf("%q top_k %d: %v, top_k %d starts %v", q, k, got, retriever.MaxTopK, full[:min(k, len(full))]))
				break
			}
		}
	}
	if len(bad) > 0 {
		t.Errorf("top_k k is not a prefix of top_k %d for %d of %d queries:\n%s", retriever.MaxTopK, len(bad), len(queries), strings.Join(bad, "\n"))
	}
}

// --- validation ----------------------------------------------------------------

func TestValidation(t *testing.T) {
	ctx := context.Background()
	r := newRetriever(t, newStore(t, card("util", "echo", "Echo.")), nil)
	long := strings.Repeat("é", retriever.MaxQueryLen+1)
	six := make([]cards.Key, retriever.MaxAlwaysLoad+1)
	for i := range six {
		six[i] = key("util", fmt.Sprintf("t%d", i))
	}
	for _, tc := range []struct {
		name  string
		req   retriever.Request
		field string
	}{
		{"no tenant", retriever.Request{Query: "x"}, "caller.tenant"},
		{"bad tenant", retriever.Request{Caller: retriever.Caller{Tenant: "a/b"}, Query: "x"}, "caller.tenant"},
		{"too many scopes", retriever.Request{Caller: retriever.Caller{Tenant: acme, Scopes: make([]string, 257)}, Query: "x"}, "caller.scopes"},
		{"empty query", retriever.Request{Caller: admin}, "query"},
		{"blank query", retriever.Request{Caller: admin, Query: " \t\n"}, "query"},
		{"long query", retriever.Request{Caller: admin, Query: long}, "query"},
		{"negative top_k", retriever.Request{Caller: admin, Query: "x", TopK: -1}, "top_k"},
		{"top_k over max", retriever.Request{Caller: admin, Query: "x", TopK: retriever.MaxTopK + 1}, "top_k"},
		{"unknown fusion", retriever.Request{Caller: admin, Query: "x", Fusion: "borda"}, "fusion"},
		{"fusion case", retriever.Request{Caller: admin, Query: "x", Fusion: "RRF"}, "fusion"},
		{"alpha over 1", retriever.Request{Caller: admin, Query: "x", Fusion: "relative", Alpha: 1.5, AlphaSet: true}, "alpha"},
		{"negative alpha", retriever.Request{Caller: admin, Query: "x", Fusion: "relative", Alpha: -0.1, AlphaSet: true}, "alpha"},
		{"NaN alpha", retriever.Request{Caller: admin, Query: "x", Fusion: "relative", Alpha: math.NaN(), AlphaSet: true}, "alpha"},
		{"infinite alpha", retriever.Request{Caller: admin, Query: "x", Fusion: "relative", Alpha: math.Inf(1), AlphaSet: true}, "alpha"},
		{"too many pins", retriever.Request{Caller: admin, Query: "x", AlwaysLoad: six}, "always_load"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := r.Discover(ctx, tc.req)
			wantInvalid(t, err, tc.field)
		})
	}
	// Limits themselves are fine.
	ok := []retriever.Request{
		{Caller: admin, Query: strings.Repeat("é", retriever.MaxQueryLen)},
		{Caller: admin, Query: "x", TopK: retriever.MaxTopK},
		{Caller: admin, Query: "x", Fusion: "rrf", Alpha: 0, AlphaSet: true},
		{Caller: admin, Query: "x", Fusion: "relative", Alpha: 1, AlphaSet: true},
		{Caller: admin, Query: "x", AlwaysLoad: six[:retriever.MaxAlwaysLoad]},
	}
	for _, req := range ok {
		if _, err := r.Discover(ctx, req); err != nil {
			t.Errorf("Discover(top_k %d, fusion %q, %d pins): %v", req.TopK, req.Fusion, len(req.AlwaysLoad), err)
		}
	}

	// SearchTools.
	_, _, err := r.Search(ctx, admin, "x", -1, "")
	wantInvalid(t, err, "page_size")
	_, _, err = r.Search(ctx, admin, "x", retriever.MaxPageSize+1, "")
	wantInvalid(t, err, "page_size")
	_, _, err = r.Search(ctx, admin, long, 5, "")
	wantInvalid(t, err, "query")
	_, _, err = r.Search(ctx, admin, "x", 5, "%%%")
	wantInvalid(t, err, "cursor")
	_, _, err = r.Search(ctx, retriever.Caller{Scopes: []string{"*"}}, "x", 5, "")
	wantInvalid(t, err, "caller.tenant")
	if _, _, err := r.Search(ctx, admin, "", retriever.MaxPageSize, ""); err != nil {
		t.Errorf("max page size: %v", err)
	}

	// DescribeTool.
	_, err = r.Describe(ctx, retriever.Caller{}, "echo", "")
	wantInvalid(t, err, "caller.tenant")
	_, err = r.Describe(ctx, admin, "", "")
	wantInvalid(t, err, "name")
	_, err = r.Describe(ctx, admin, "echo", "bad server")
	wantInvalid(t, err, "server")
}

// --- fusion through the pipeline ------------------------------------------------

// legsOf rebuilds the two legs from a shortlist that holds every fused card.
func legsOf(res retriever.Result) (lex, sem []retriever.Hit) {
	for _, s := range res.Tools {
		if s.Scores.LexicalRank > 0 {
			lex = append(lex, retriever.Hit{ID: s.Scores.ID, Score: s.Scores.Lexical, Fields: s.Scores.Fields})
		}
		if s.Scores.SemanticRank > 0 {
			sem = append(sem, retriever.Hit{ID: s.Scores.ID, Score: s.Scores.Semantic})
		}
	}
	rank := func(hs []retriever.Hit, r func(retriever.Hit) int) {
		slices.SortFunc(hs, func(a, b retriever.Hit) int { return r(a) - r(b) })
	}
	ranks := map[string][2]int{}
	for _, s := range res.Tools {
		ranks[s.Scores.ID] = [2]int{s.Scores.LexicalRank, s.Scores.SemanticRank}
	}
	rank(lex, func(h retriever.Hit) int { return ranks[h.ID][0] })
	rank(sem, func(h retriever.Hit) int { return ranks[h.ID][1] })
	return lex, sem
}

func TestFusionModes(t *testing.T) {
	// The fusion functions alone: the server lift and the collapsing of
	// near-duplicates, applied after them, are off here (TestLiftServers,
	// TestCollapseNearDuplicates cover them).
	r, err := retriever.New(context.Background(), newStore(t, synthCatalogue(30, 8, acme)...), embed.NewHashed(embed.DefaultDim), nil,
		retriever.WithServerPrior(0), retriever.WithServerBoost(0), retriever.WithCollapse(false))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	const q = "approve pending refund payments"
	ids := func(fs []retriever.Fused) []string {
		out := make([]string, len(fs))
		for i, f := range fs {
			out[i] = f.ID
		}
		return out
	}
	shortIDs := func(res retriever.Result) []string {
		out := make([]string, len(res.Tools))
		for i, s := range res.Tools {
			out[i] = s.Scores.ID
			if want := retriever.DocID(s.Card.Key()); s.Scores.ID != want {
				t.Errorf("Scores.ID %q for card %q", s.Scores.ID, want)
			}
		}
		return out
	}

	// The default is relative fusion with the default alpha.
	def := discover(t, r, retriever.Request{Caller: admin, Query: q, TopK: retriever.MaxTopK})
	rel := discover(t, r, retriever.Request{Caller: admin, Query: q, TopK: retriever.MaxTopK, Fusion: retriever.FusionRelative})
	if retriever.DefaultFusion != retriever.FusionRelative || !reflect.DeepEqual(def, rel) {
		t.Errorf("default fusion differs from explicit relative")
	}
	// RRF over all candidates equals FuseRRF of its legs.
	rrf := discover(t, r, retriever.Request{Caller: admin, Query: q, TopK: retriever.MaxTopK, Fusion: retriever.FusionRRF})
	lex, sem := legsOf(rrf)
	if len(lex) == 0 || len(sem) == 0 {
		t.Fatalf("legs: %d lexical, %d semantic hits", len(lex), len(sem))
	}
	if want := ids(retriever.FuseRRF(lex, sem, retriever.DefaultRRFK)); !slices.Equal(shortIDs(rrf), want) {
		t.Errorf("rrf order %v, want %v", shortIDs(rrf), want)
	}
	for _, s := range rrf.Tools {
		var want float64
		if s.Scores.LexicalRank > 0 {
			want += 1 / float64(60+s.Scores.LexicalRank)
		}
		if s.Scores.SemanticRank > 0 {
			want += 1 / float64(60+s.Scores.SemanticRank)
		}
		if math.Abs(s.Scores.Score-want) > 1e-12 {
			t.Errorf("%s: rrf score %g, want %g", s.Scores.ID, s.Scores.Score, want)
		}
		if s.Scores.SemanticRank > 0 && s.Scores.Semantic <= 0 {
			t.Errorf("%s: semantic hit with cosine %g", s.Scores.ID, s.Scores.Semantic)
		}
		if s.Reason == "" || s.Reason == "no match" {
			t.Errorf("%s: reason %q", s.Scores.ID, s.Reason)
		}
	}

	// Relative fusion, with alpha given and by default.
	for _, alpha := range []float64{0, 0.3, retriever.DefaultAlpha, 1} {
		res := discover(t, r, retriever.Request{Caller: admin, Query: q, TopK: retriever.MaxTopK,
			Fusion: retriever.FusionRelative, Alpha: alpha, AlphaSet: true})
		want := retriever.FuseRelative(lex, sem, alpha)
		if !slices.Equal(shortIDs(res), ids(want)) {
			t.Errorf("relative alpha %g: order %v, want %v", alpha, shortIDs(res), ids(want))
			continue
		}
		for i, s := range res.Tools {
			if math.Abs(s.Scores.Score-want[i].Score) > 1e-12 {
				t.Errorf("relative alpha %g: %s score %g, want %g", alpha, s.Scores.ID, s.Scores.Score, want[i].Score)
			}
		}
		if res.Tools[0].Scores.Score > 1+1e-12 {
			t.Errorf("relative alpha %g: top score %g > 1", alpha, res.Tools[0].Scores.Score)
		}
		switch alpha {
		case 0:
			if res.Tools[0].Scores.LexicalRank != 1 {
				t.Errorf("alpha 0 (pure lexical): top is lexical #%d", res.Tools[0].Scores.LexicalRank)
			}
		case 1:
			if res.Tools[0].Scores.SemanticRank != 1 {
				t.Errorf("alpha 1 (pure semantic): top is semantic #%d", res.Tools[0].Scores.SemanticRank)
			}
		}
	}
	unset := discover(t, r, retriever.Request{Caller: admin, Query: q, TopK: retriever.MaxTopK, Fusion: retriever.FusionRelative})
	half := discover(t, r, retriever.Request{Caller: admin, Query: q, TopK: retriever.MaxTopK, Fusion: retriever.FusionRelative,
		Alpha: retriever.DefaultAlpha, AlphaSet: true})
	if !reflect.DeepEqual(unset, half) {
		t.Errorf("relative without alpha differs from alpha %g", retriever.DefaultAlpha)
	}
	// An unset alpha of 0 is not "pure lexical".
	zero := discover(t, r, retriever.Request{Caller: admin, Query: q, TopK: retriever.MaxTopK, Fusion: retriever.FusionRelative,
		Alpha: 0, AlphaSet: true})
	if reflect.DeepEqual(zero, half) {
		t.Errorf("alpha 0 and alpha 0.5 give the same shortlist; AlphaSet is not honoured")
	}
}

// --- accounting, copies, empty answers -------------------------------------------------

func TestAccountingAndCopies(t *testing.T) {
	var cs []cards.Card
	for i := range 12 {
		c := card(fmt.Sprintf("widgets%d", i%3), fmt.Sprintf("widget_tool_%d", i), fmt.Sprintf("Manage widget inventory and widget pricing, part %d.", i))
		c.InputSchema = []byte(fmt.Sprintf(`{"type":"object","properties":{"widget_id":{"type":"string"},"p%d":{"type":"integer"}}}`, i))
		c.Aliases = []string{"widgets"}
		if i%2 == 1 {
			c.RequiredScopes = []string{"widgets:write"}
		}
		cs = append(cs, c)
	}
	r := newRetriever(t, newStore(t, cs...), nil)

	// Every candidate is returned: the shortlist costs what the catalogue does.
	for _, c := range []retriever.Caller{admin, caller()} {
		res := discover(t, r, retriever.Request{Caller: c, Query: "widget inventory", TopK: retriever.MaxTopK})
		wantN := 12
		if len(c.Scopes) == 0 {
			wantN = 6
		}
		if res.CandidateCount != wantN || len(res.Tools) != wantN {
			t.Errorf("scopes %v: %d candidates, %d tools; want %d", c.Scopes, res.CandidateCount, len(res.Tools), wantN)
		}
		if res.ShortlistTokens != res.CatalogTokens || res.CatalogTokens <= 0 {
			t.Errorf("scopes %v: shortlist %d tokens, catalogue %d", c.Scopes, res.ShortlistTokens, res.CatalogTokens)
		}
		small := discover(t, r, retriever.Request{Caller: c, Query: "widget inventory", TopK: 2})
		if small.CatalogTokens != res.CatalogTokens || small.ShortlistTokens >= small.CatalogTokens || len(small.Tools) != 2 {
			t.Errorf("top_k 2: shortlist %d, catalogue %d (%d tools)", small.ShortlistTokens, small.CatalogTokens, len(small.Tools))
		}
	}
	// Default top_k.
	if res := discover(t, r, retriever.Request{Caller: admin, Query: "widget"}); len(res.Tools) != retriever.DefaultTopK {
		t.Errorf("default top_k: %d tools", len(res.Tools))
	}

	// Mutating a result does not reach the view.
	res := discover(t, r, retriever.Request{Caller: admin, Query: "widget inventory", TopK: 3})
	first := res.Tools[0].Card.Clone()
	res.Tools[0].Card.InputSchema[0] = '['
	res.Tools[0].Card.Aliases[0] = "hacked"
	again := discover(t, r, retriever.Request{Caller: admin, Query: "widget inventory", TopK: 3})
	if !reflect.DeepEqual(again.Tools[0].Card, first) {
		t.Errorf("Discover returned the view's own card")
	}

	// No candidates, or nothing that matches: an empty answer, not an error.
	for _, req := range []retriever.Request{
		{Caller: retriever.Caller{Tenant: "initech", Scopes: []string{"*"}}, Query: "widget"},
		{Caller: admin, Query: "???"},
		{Caller: admin, Query: "the of and"},
	} {
		res, err := r.Discover(context.Background(), req)
		if err != nil {
			t.Errorf("%q: %v", req.Query, err)
		}
		if req.Caller.Tenant == "initech" && (res.CandidateCount != 0 || len(res.Tools) != 0 || res.CatalogTokens != 0) {
			t.Errorf("unknown tenant: %+v", res)
		}
		for _, s := range res.Tools {
			if s.Scores.LexicalRank == 0 && s.Scores.SemanticRank == 0 {
				t.Errorf("%q: %s returned without matching", req.Query, s.Card.Name)
			}
		}
	}
}
