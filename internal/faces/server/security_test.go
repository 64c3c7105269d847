package server_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/seed0cff8200/cardex/cards"
	pb "github.com/seed0cff8200/cardex/proto/cardex/v1"
)

// twoWorlds is the same support caller facing two catalogues: full, where
// the forbidden cards exist (other acme servers, admin tools, another
// tenant, revoked and pending cards), and bare, where only the cards the
// caller may see exist at all. "Unknown means unknown": every answer must
// be the same in both.
type twoWorlds struct {
	full, bare *env
	visible    []cards.Card
	forbidden  []string // server/name of acme cards the caller must not see
}

func newTwoWorlds(t *testing.T) *twoWorlds {
	t.Helper()
	acme := acmeCards(t)
	all := slices.Concat(acme, globexCards(t), inactiveCards())
	visible := supportVisible(acme)
	// The README's count: 18 of the 53 acme cards.
	if len(acme) != 53 || len(visible) != 18 {
		t.Fatalf("example catalogue changed: %d acme cards, %d visible to support; want 53 and 18", len(acme), len(visible))
	}
	w := &twoWorlds{
		full:    newEnv(t, envOptions{cards: all}),
		bare:    newEnv(t, envOptions{cards: visible}),
		visible: visible,
	}
	vis := names(visible)
	for _, n := range names(slices.Concat(acme, inactiveCards())) {
		if !slices.Contains(vis, n) {
			w.forbidden = append(w.forbidden, n)
		}
	}
	return w
}

// billingAdminTools are the cards that need billing:admin.
var billingAdminTools = []string{"issue_refund", "void_invoice", "change_plan_pricing", "delete_customer_payment_method", "export_all_invoices"}

// securityQueries aim straight at forbidden tools (their names, aliases and
// summaries) as well as at ordinary support work.
var securityQueries = []string{
	"customer wants their money back for order 1234",
	"refund the customer now",
	"issue_refund",
	"void invoice",
	"change plan pricing",
	"delete customer payment method",
	"export all invoices",
	"where is my package",
	"restart the payments service",
	"open a bug about the login page",
	"how much revenue did we make last month",
	"merge tickets",
	"download all tickets ticket export",
	"canned response macro",
	"search",
	"invoice",
}

// refServers are the ways to name a forbidden card: bare, unless the bare
// name belongs to a visible card on another server (github/search vs
// support/search), and with its server.
func (w *twoWorlds) refServers(server, name string) []string {
	if slices.ContainsFunc(w.visible, func(c cards.Card) bool { return c.Name == name }) {
		return []string{server}
	}
	return []string{"", server}
}

// checkNoForbidden fails if a discovered tool is outside the caller's view:
// another tenant's card, or an acme card the support caller may not see.
func (w *twoWorlds) checkNoForbidden(t *testing.T, where string, got []string, tenants []string) {
	t.Helper()
	for _, n := range got {
		if slices.Contains(w.forbidden, n) {
			t.Errorf("%s: forbidden tool %s returned to the support caller", where, n)
		}
	}
	for _, tn := range tenants {
		if tn != "acme" {
			t.Errorf("%s: card of tenant %q returned to an acme caller", where, tn)
		}
	}
}

func TestSupportCallerDiscoverToolsSameAsWithoutForbiddenCards(t *testing.T) {
	w := newTwoWorlds(t)
	type variant struct {
		name   string
		topK   int32
		fusion string
		alpha  *float64
	}
	half := 0.0
	variants := []variant{
		{"default", 0, "", nil},
		{"top50_rrf", 50, "rrf", nil},
		{"top50_relative_alpha0", 50, "relative", &half},
	}
	for _, q := range securityQueries {
		for _, v := range variants {
			t.Run(v.name+"/"+q, func(t *testing.T) {
				req := &pb.DiscoverToolsRequest{Caller: supportCaller(), Query: q, TopK: v.topK, Fusion: v.fusion, Alpha: v.alpha}
				full, bare := w.full.discover(t, req), w.bare.discover(t, req)
				var tenants []string
				for _, x := range full.GetTools() {
					tenants = append(tenants, x.GetCard().GetTenant())
				}
				w.checkNoForbidden(t, "DiscoverTools", toolNames(full.GetTools()), tenants)

				if full.GetCandidateCount() != 18 || bare.GetCandidateCount() != 18 {
					t.Errorf("candidate_count = %d (full) / %d (bare), want 18", full.GetCandidateCount(), bare.GetCandidateCount())
				}
				sameProto(t, "tokens (catalog_tokens, shortlist_tokens, method)", full.GetTokens(), bare.GetTokens())
				if full.GetTokens().GetCatalogTokens() <= 0 {
					t.Errorf("catalog_tokens = %d, want > 0", full.GetTokens().GetCatalogTokens())
				}
				mustEqualStrings(t, "ranked tools, full vs bare catalogue", toolNames(full.GetTools()), toolNames(bare.GetTools()))
				// Scores, reasons, matched fields and hydrated cards: the
				// whole answer. A score that moves when a forbidden card is
				// added tells the caller that the card exists.
				if f, b := stable(full), stable(bare); !protoEqual(f, b) {
					t.Errorf("response differs between a catalogue with and without the forbidden cards (a side channel on their existence): %s",
						firstDiff(full.GetTools(), bare.GetTools()))
				}
			})
		}
	}
}

func TestSupportCallerSearchToolsSameAsWithoutForbiddenCards(t *testing.T) {
	w := newTwoWorlds(t)
	wantAll := names(w.visible)
	slices.SortFunc(wantAll, func(a, b string) int { return strings.Compare(a, b) })
	for _, pageSize := range []int32{1, 7, 18, 100} {
		t.Run(fmt.Sprintf("no_query/page_size_%d", pageSize), func(t *testing.T) {
			full := w.full.searchAll(t, supportCaller(), "", pageSize)
			bare := w.bare.searchAll(t, supportCaller(), "", pageSize)
			w.checkNoForbidden(t, "SearchTools", summaryNames(full), nil)
			mustEqualStrings(t, "every authorized tool in (server, name) order", summaryNames(full), wantAll)
			if !slices.EqualFunc(full, bare, protoEqual) {
				t.Errorf("rows differ between the full and the bare catalogue")
			}
			checkSummariesAreAcme(t, full, w.visible)
		})
	}
	for _, q := range securityQueries {
		for _, pageSize := range []int32{2, 100} {
			t.Run(fmt.Sprintf("page_size_%d/%s", pageSize, q), func(t *testing.T) {
				full := w.full.searchAll(t, supportCaller(), q, pageSize)
				bare := w.bare.searchAll(t, supportCaller(), q, pageSize)
				w.checkNoForbidden(t, "SearchTools", summaryNames(full), nil)
				checkSummariesAreAcme(t, full, w.visible)
				if len(full) > 18 {
					t.Errorf("%d rows for a caller with 18 authorized tools", len(full))
				}
				mustEqualStrings(t, "ranked rows, full vs bare catalogue", summaryNames(full), summaryNames(bare))
			})
		}
	}
}

// checkSummariesAreAcme checks that each row's summary is the acme card's
// (globex has cards with the same server and name).
func checkSummariesAreAcme(t *testing.T, rows []*pb.ToolSummary, visible []cards.Card) {
	t.Helper()
	for _, r := range rows {
		i := slices.IndexFunc(visible, func(c cards.Card) bool { return c.Server == r.GetServer() && c.Name == r.GetName() })
		if i < 0 {
			t.Errorf("row %s/%s is not a visible acme card", r.GetServer(), r.GetName())
			continue
		}
		if want := cards.Sanitize(visible[i].Summary); r.GetSummary() != want {
			t.Errorf("row %s/%s summary %q, want acme's %q", r.GetServer(), r.GetName(), r.GetSummary(), want)
		}
	}
}

func TestSupportCallerDescribeToolForbiddenIsNotFound(t *testing.T) {
	w := newTwoWorlds(t)
	describe := func(e *env, name, server string) (*pb.DescribeToolResponse, error) {
		return e.disc.DescribeTool(rpcCtx(t), &pb.DescribeToolRequest{Caller: supportCaller(), Name: name, Server: server})
	}
	_, errNope := describe(w.full, "no_such_tool", "")
	nope := wantCode(t, errNope, codes.NotFound).Message()

	for _, full := range w.forbidden {
		server, name, _ := strings.Cut(full, "/")
		for _, srv := range w.refServers(server, name) {
			t.Run(full+"/server="+srv, func(t *testing.T) {
				res, err := describe(w.full, name, srv)
				if err == nil {
					t.Fatalf("DescribeTool(%s) returned %v to the support caller", full, res)
				}
				got := wantCode(t, err, codes.NotFound).Message()
				_, errBare := describe(w.bare, name, srv)
				if bare := wantCode(t, errBare, codes.NotFound).Message(); got != bare {
					t.Errorf("NotFound message %q differs from the one without the card %q", got, bare)
				}
				if want := strings.ReplaceAll(nope, "no_such_tool", name); got != want {
					t.Errorf("NotFound message %q differs from a nonexistent name's %q", got, want)
				}
			})
		}
	}
	for _, c := range w.visible {
		t.Run("visible/"+c.Server+"/"+c.Name, func(t *testing.T) {
			full, err := describe(w.full, c.Name, "")
			if err != nil {
				t.Fatalf("DescribeTool(%s): %v", c.Name, err)
			}
			bare, err := describe(w.bare, c.Name, "")
			if err != nil {
				t.Fatalf("DescribeTool(%s), bare: %v", c.Name, err)
			}
			if full.GetCard().GetTenant() != "acme" || full.GetCard().GetServer() != c.Server {
				t.Errorf("described %s/%s/%s, want acme/%s/%s", full.GetCard().GetTenant(), full.GetCard().GetServer(), full.GetCard().GetName(), c.Server, c.Name)
			}
			if len(full.GetAmbiguousServers()) > 0 {
				t.Errorf("ambiguous %v for the support caller", full.GetAmbiguousServers())
			}
			sameProto(t, "described card, full vs bare", stable(full), stable(bare))
		})
	}
}

func TestSupportCallerAuthorizeCallForbiddenIsUnknown(t *testing.T) {
	w := newTwoWorlds(t)
	authorize := func(e *env, name, server, args string) *pb.AuthorizeCallResponse {
		t.Helper()
		res, err := e.disc.AuthorizeCall(rpcCtx(t), &pb.AuthorizeCallRequest{Caller: supportCaller(), Name: name, Server: server, ArgumentsJson: args})
		if err != nil {
			t.Fatalf("AuthorizeCall(%s/%s): %v", server, name, err)
		}
		return res
	}
	nope := authorize(w.full, "no_such_tool", "", "{}")
	// Arguments that are valid for issue_refund, so nothing but the
	// authorization can deny it.
	refundArgs := `{"invoice_id":"in_1","reason":"other","idempotency_key":"k1"}`
	for _, full := range w.forbidden {
		server, name, _ := strings.Cut(full, "/")
		for _, srv := range w.refServers(server, name) {
			for _, args := range []string{"", "{}", refundArgs, "[1]"} {
				t.Run(fmt.Sprintf("%s/server=%s/args=%s", full, srv, args), func(t *testing.T) {
					got := authorize(w.full, name, srv, args)
					if got.GetAllowed() || got.GetDecision() != pb.AuthorizeCallResponse_DECISION_DENY_UNKNOWN_TOOL {
						t.Fatalf("AuthorizeCall(%s) = %v, want deny_unknown_tool", full, got)
					}
					if got.GetTool() != nil || got.GetCardVersion() != 0 || len(got.GetViolations()) > 0 || len(got.GetAmbiguousServers()) > 0 {
						t.Errorf("a denied unknown tool leaks details: %v", got)
					}
					sameProto(t, "answer, full vs bare catalogue", got, authorize(w.bare, name, srv, args))
					if want := strings.ReplaceAll(nope.GetMessage(), "no_such_tool", name); got.GetMessage() != want {
						t.Errorf("message %q differs from a nonexistent name's %q", got.GetMessage(), want)
					}
				})
			}
		}
	}
	for _, c := range w.visible {
		t.Run("visible/"+c.Server+"/"+c.Name, func(t *testing.T) {
			got := authorize(w.full, c.Name, c.Server, "{}")
			sameProto(t, "answer, full vs bare catalogue", got, authorize(w.bare, c.Name, c.Server, "{}"))
			if d := got.GetDecision(); d != pb.AuthorizeCallResponse_DECISION_ALLOW && d != pb.AuthorizeCallResponse_DECISION_DENY_INVALID_ARGUMENTS {
				t.Errorf("decision %s for an authorized tool, want allow or invalid arguments", d)
			}
		})
	}
}

func TestTenantIsolation(t *testing.T) {
	acme, globex := acmeCards(t), globexCards(t)
	e := newEnv(t, envOptions{cards: slices.Concat(acme, globex, inactiveCards())})
	tenantOf := func(cs []cards.Card, server, name string) []string {
		var out []string
		for _, c := range cs {
			if c.Server == server && c.Name == name {
				out = append(out, c.Tenant)
			}
		}
		return out
	}
	cases := []struct {
		caller       *pb.Caller
		own, other   []cards.Card
		wantCands    int32
		otherOnlyTag string // a word found only in the other tenant's cards
	}{
		{adminCaller(), acme, globex, 53, "wholesale pallets freight haulier purchase orders"},
		{globexAdmin(), globex, acme, 5, "helpdesk tickets kubernetes pull request invoice"},
		{&pb.Caller{Tenant: "globex", Scopes: []string{"*", "billing:*", "orders:*"}}, globex, acme, 5, "support ticket"},
	}
	for _, tc := range cases {
		t.Run(tc.caller.GetTenant()+"/"+strings.Join(tc.caller.GetScopes(), ","), func(t *testing.T) {
			for _, q := range []string{tc.otherOnlyTag, "search orders", "issue refund", "track shipment", "get order"} {
				res := e.discover(t, &pb.DiscoverToolsRequest{Caller: tc.caller, Query: q, TopK: 50})
				if res.GetCandidateCount() != tc.wantCands {
					t.Errorf("%q: candidate_count %d, want %d", q, res.GetCandidateCount(), tc.wantCands)
				}
				for _, x := range res.GetTools() {
					if x.GetCard().GetTenant() != tc.caller.GetTenant() {
						t.Errorf("%q: returned %s/%s/%s to a %s caller", q, x.GetCard().GetTenant(), x.GetCard().GetServer(), x.GetCard().GetName(), tc.caller.GetTenant())
					}
				}
			}
			rows := e.searchAll(t, tc.caller, "", 100)
			if len(rows) != int(tc.wantCands) {
				t.Errorf("SearchTools lists %d tools, want %d", len(rows), tc.wantCands)
			}
			// Every name of the other tenant: described only as one's own
			// card, or not at all.
			for _, c := range tc.other {
				res, err := e.disc.DescribeTool(rpcCtx(t), &pb.DescribeToolRequest{Caller: tc.caller, Name: c.Name, Server: c.Server})
				own := slices.Contains(tenantOf(tc.own, c.Server, c.Name), tc.caller.GetTenant())
				switch {
				case own && err != nil:
					t.Errorf("DescribeTool(%s/%s): %v", c.Server, c.Name, err)
				case own && res.GetCard().GetTenant() != tc.caller.GetTenant():
					t.Errorf("DescribeTool(%s/%s) returned tenant %q's card", c.Server, c.Name, res.GetCard().GetTenant())
				case !own:
					wantCode(t, err, codes.NotFound)
				}
				a, err := e.disc.AuthorizeCall(rpcCtx(t), &pb.AuthorizeCallRequest{Caller: tc.caller, Name: c.Name, Server: c.Server, ArgumentsJson: "{}"})
				if err != nil {
					t.Fatalf("AuthorizeCall: %v", err)
				}
				if !own && a.GetDecision() != pb.AuthorizeCallResponse_DECISION_DENY_UNKNOWN_TOOL {
					t.Errorf("AuthorizeCall(%s/%s) of the other tenant: %v", c.Server, c.Name, a)
				}
			}
		})
	}
	// A globex card is described with globex's content to globex, and the
	// acme card of the same key with acme's content to acme.
	for _, tc := range []struct {
		caller *pb.Caller
		word   string
	}{{adminCaller(), "order number"}, {globexAdmin(), "wholesale"}} {
		res, err := e.disc.DescribeTool(rpcCtx(t), &pb.DescribeToolRequest{Caller: tc.caller, Name: "get_order", Server: "orders"})
		if err != nil {
			t.Fatalf("DescribeTool(orders/get_order) as %s: %v", tc.caller.GetTenant(), err)
		}
		if !strings.Contains(res.GetCard().GetSummary(), tc.word) || res.GetCard().GetTenant() != tc.caller.GetTenant() {
			t.Errorf("%s got the card %s with summary %q", tc.caller.GetTenant(), res.GetCard().GetTenant(), res.GetCard().GetSummary())
		}
	}
}

func TestInactiveCardsInvisibleToEveryRPC(t *testing.T) {
	e := newEnv(t, envOptions{cards: slices.Concat(acmeCards(t), inactiveCards())})
	for _, c := range inactiveCards() {
		for _, caller := range []*pb.Caller{adminCaller(), supportCaller()} {
			t.Run(fmt.Sprintf("%s/%s/%s", c.Status, c.Name, caller.GetScopes()[0]), func(t *testing.T) {
				for _, q := range append([]string{c.Name, c.Summary}, c.Aliases...) {
					res := e.discover(t, &pb.DiscoverToolsRequest{Caller: caller, Query: q, TopK: 50,
						AlwaysLoad: []*pb.ToolRef{{Server: c.Server, Name: c.Name}}})
					if slices.Contains(toolNames(res.GetTools()), c.Server+"/"+c.Name) {
						t.Errorf("DiscoverTools(%q) returned the %s card %s", q, c.Status, c.Name)
					}
					if caller == adminCaller() && res.GetCandidateCount() != 53 {
						t.Errorf("candidate_count %d, want 53 (active cards only)", res.GetCandidateCount())
					}
					rows := e.searchAll(t, caller, q, 100)
					if slices.Contains(summaryNames(rows), c.Server+"/"+c.Name) {
						t.Errorf("SearchTools(%q) listed the %s card", q, c.Status)
					}
				}
				if slices.Contains(summaryNames(e.searchAll(t, caller, "", 100)), c.Server+"/"+c.Name) {
					t.Errorf("SearchTools() listed the %s card", c.Status)
				}
				_, err := e.disc.DescribeTool(rpcCtx(t), &pb.DescribeToolRequest{Caller: caller, Name: c.Name})
				wantCode(t, err, codes.NotFound, fmt.Sprintf("%q", c.Name))
				a, err := e.disc.AuthorizeCall(rpcCtx(t), &pb.AuthorizeCallRequest{Caller: caller, Name: c.Name, Server: c.Server})
				if err != nil {
					t.Fatal(err)
				}
				if a.GetDecision() != pb.AuthorizeCallResponse_DECISION_DENY_UNKNOWN_TOOL || a.GetAllowed() {
					t.Errorf("AuthorizeCall of a %s card: %v", c.Status, a)
				}
			})
		}
	}
	// The catalogue API still shows them, with their status.
	got, err := e.cat.GetCard(rpcCtx(t), &pb.GetCardRequest{Tenant: "acme", Server: "support", Name: "export_ticket_archive"})
	if err != nil || got.GetCard().GetStatus() != "revoked" {
		t.Errorf("GetCard of a revoked card: %v, %v", got, err)
	}
}

func TestScopeWildcards(t *testing.T) {
	e := newEnv(t, envOptions{cards: acmeCards(t)})
	cases := []struct {
		scopes []string
		tool   string // billing/<tool>
		want   bool
	}{
		{[]string{"billing:*"}, "issue_refund", true},      // billing:admin
		{[]string{"billing:*"}, "get_invoice", true},       // billing:read
		{[]string{"*"}, "issue_refund", true},              // everything
		{[]string{"billing:admin"}, "issue_refund", true},  // exact
		{[]string{"billing:read"}, "issue_refund", false},  // read is not admin
		{[]string{"billing:admin"}, "get_invoice", false},  // no implied hierarchy
		{[]string{"billing"}, "get_invoice", false},        // no colon-star: itself only
		{[]string{"billing"}, "issue_refund", false},       //
		{[]string{"bill:*"}, "get_invoice", false},         // prefix of the resource, not of the scope
		{[]string{"billing:r*"}, "get_invoice", false},     // no other pattern language
		{[]string{"*:read"}, "get_invoice", false},         //
		{[]string{"billing*"}, "get_invoice", false},       //
		{[]string{"billing:"}, "get_invoice", false},       //
		{[]string{"Billing:*"}, "get_invoice", false},      // case-sensitive
		{[]string{"billing:read:*"}, "get_invoice", false}, //
		{[]string{"orders:*", "billing:*"}, "issue_refund", true},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%v/%s", tc.scopes, tc.tool), func(t *testing.T) {
			caller := &pb.Caller{Tenant: "acme", Subject: "s", Scopes: tc.scopes}
			_, err := e.disc.DescribeTool(rpcCtx(t), &pb.DescribeToolRequest{Caller: caller, Name: tc.tool, Server: "billing"})
			if tc.want && err != nil {
				t.Errorf("DescribeTool: %v, want the card", err)
			}
			if !tc.want && status.Code(err) != codes.NotFound {
				t.Errorf("DescribeTool: %v, want NotFound", err)
			}
			a, err := e.disc.AuthorizeCall(rpcCtx(t), &pb.AuthorizeCallRequest{Caller: caller, Name: tc.tool, Server: "billing", ArgumentsJson: "{}"})
			if err != nil {
				t.Fatal(err)
			}
			if known := a.GetDecision() != pb.AuthorizeCallResponse_DECISION_DENY_UNKNOWN_TOOL; known != tc.want {
				t.Errorf("AuthorizeCall decision %s, want known=%v", a.GetDecision(), tc.want)
			}
			listed := slices.Contains(summaryNames(e.searchAll(t, caller, "", 100)), "billing/"+tc.tool)
			if listed != tc.want {
				t.Errorf("SearchTools lists it: %v, want %v", listed, tc.want)
			}
			res := e.discover(t, &pb.DiscoverToolsRequest{Caller: caller, Query: strings.ReplaceAll(tc.tool, "_", " "), TopK: 50})
			if found := slices.Contains(toolNames(res.GetTools()), "billing/"+tc.tool); found != tc.want {
				t.Errorf("DiscoverTools returns it: %v, want %v", found, tc.want)
			}
		})
	}
}

func TestBillingAdminToolsNeverReachSupportCaller(t *testing.T) {
	// A focused restatement of the above for the five billing:admin tools:
	// pins, ranked results and the token accounting.
	w := newTwoWorlds(t)
	var pins []*pb.ToolRef
	for _, n := range billingAdminTools {
		pins = append(pins, &pb.ToolRef{Server: "billing", Name: n})
	}
	for _, q := range []string{"refund", "void the invoice", "billing admin"} {
		req := &pb.DiscoverToolsRequest{Caller: supportCaller(), Query: q, TopK: 50, AlwaysLoad: pins}
		full, bare := w.full.discover(t, req), w.bare.discover(t, req)
		for _, x := range full.GetTools() {
			if slices.Contains(billingAdminTools, x.GetCard().GetName()) || x.GetPinned() {
				t.Errorf("%q: returned %s (pinned=%v)", q, x.GetCard().GetName(), x.GetPinned())
			}
		}
		if full.GetCandidateCount() != bare.GetCandidateCount() || full.GetTokens().GetCatalogTokens() != bare.GetTokens().GetCatalogTokens() ||
			full.GetTokens().GetShortlistTokens() != bare.GetTokens().GetShortlistTokens() {
			t.Errorf("%q: counts differ: full %d/%v, bare %d/%v", q, full.GetCandidateCount(), full.GetTokens(), bare.GetCandidateCount(), bare.GetTokens())
		}
		admin := w.full.discover(t, &pb.DiscoverToolsRequest{Caller: adminCaller(), Query: q, TopK: 50})
		if admin.GetCandidateCount() != 53 || admin.GetTokens().GetCatalogTokens() <= full.GetTokens().GetCatalogTokens() {
			t.Errorf("%q: admin candidate_count %d catalog_tokens %d vs support %d: the admin numbers should be larger",
				q, admin.GetCandidateCount(), admin.GetTokens().GetCatalogTokens(), full.GetTokens().GetCatalogTokens())
		}
	}
}

// TestOtherTenantDoesNotMoveScores: another tenant's catalogue must not
// change one tenant's answers at all, scores included, or a tenant can learn
// about another's cards (the words they use) by watching its own scores.
func TestOtherTenantDoesNotMoveScores(t *testing.T) {
	acme, globex := acmeCards(t), globexCards(t)
	alone := map[string]*env{
		"acme":   newEnv(t, envOptions{cards: acme}),
		"globex": newEnv(t, envOptions{cards: globex}),
	}
	both := newEnv(t, envOptions{cards: slices.Concat(acme, globex)})
	for _, caller := range []*pb.Caller{adminCaller(), globexAdmin()} {
		for _, q := range []string{"search orders", "track shipment", "issue refund", "where is my package", "get order"} {
			t.Run(caller.GetTenant()+"/"+q, func(t *testing.T) {
				req := &pb.DiscoverToolsRequest{Caller: caller, Query: q, TopK: 10}
				got, want := both.discover(t, req), alone[caller.GetTenant()].discover(t, req)
				if got.GetCandidateCount() != want.GetCandidateCount() || !protoEqual(got.GetTokens(), want.GetTokens()) {
					t.Errorf("counts differ: %d %v vs %d %v", got.GetCandidateCount(), got.GetTokens(), want.GetCandidateCount(), want.GetTokens())
				}
				mustEqualStrings(t, "ranked tools, with vs without the other tenant", toolNames(got.GetTools()), toolNames(want.GetTools()))
				if !protoEqual(stable(got), stable(want)) {
					t.Errorf("the other tenant's cards change this tenant's scores: %s", firstDiff(got.GetTools(), want.GetTools()))
				}
			})
		}
	}
}
