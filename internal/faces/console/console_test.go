package console_test

// The console driven in a real browser against the real serve wiring: what
// each page shows is checked against the gRPC API's answer (or the store,
// log or report it shows) for the same credential and caller.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/seed0cff8200/cardex/eval"
	"github.com/seed0cff8200/cardex/internal/telemetry/feedback"
	pb "github.com/seed0cff8200/cardex/proto/cardex/v1"
)

// getCard reads a card over gRPC with the catalog token.
func (h *harness) getCard(t *testing.T, tenant, server, name string) *pb.Card {
	t.Helper()
	res, err := h.cat.GetCard(rpc(t, catalogToken), &pb.GetCardRequest{Tenant: tenant, Server: server, Name: name})
	if err != nil {
		t.Fatal(err)
	}
	return res.Card
}

// listCards lists a tenant's cards over gRPC, every page, as SERVER/NAME.
func (h *harness) listCards(t *testing.T, tenant, server string, statuses ...string) []*pb.Card {
	t.Helper()
	var out []*pb.Card
	req := &pb.ListCardsRequest{Tenant: tenant, Server: server, Status: statuses, PageSize: 100}
	for {
		res, err := h.cat.ListCards(rpc(t, catalogToken), req)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, res.Cards...)
		if res.NextCursor == "" {
			return out
		}
		req.Cursor = res.NextCursor
	}
}

func ref(c *pb.Card) string { return c.Server + "/" + c.Name }

// sameJSON says whether two JSON texts hold the same value.
func sameJSON(t *testing.T, a, b string) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal([]byte(a), &x); err != nil {
		t.Fatalf("%v: %q", err, a)
	}
	if err := json.Unmarshal([]byte(b), &y); err != nil {
		t.Fatalf("%v: %q", err, b)
	}
	return reflect.DeepEqual(x, y)
}

func TestConsoleCatalogue(t *testing.T) {
	h := newHarness(t, false)
	u := h.user(t, newBrowser(t), catalogToken)
	if got := u.path(); got != "/console/catalog" {
		t.Fatalf("a catalog token lands on %s, want /console/catalog", got)
	}
	if got := u.text("#who-role"); got != "catalog" {
		t.Errorf("role shown: %q, want catalog", got)
	}

	// The tenant choice lists the tenants of the example catalogue.
	var tenants []string
	for _, c := range h.entries.Cards {
		if !slices.Contains(tenants, c.Tenant) {
			tenants = append(tenants, c.Tenant)
		}
	}
	slices.Sort(tenants)
	if got := u.texts("#f-tenant option"); !slices.Equal(got, tenants) {
		t.Errorf("tenants shown %v, want %v", got, tenants)
	}

	type row struct {
		Card    string `json:"card"`
		Status  string `json:"status"`
		Version string `json:"version"`
	}
	rows := func() []row {
		return js[[]row](u, `[...document.querySelectorAll("#cards tbody tr[data-card]")].map(r => ({
			card: r.dataset.card, status: r.querySelector(".status").textContent.trim(), version: r.children[6].textContent.trim()}))`)
	}
	for _, tc := range []struct {
		name, query    string
		tenant, server string
		statuses       []string
	}{
		{name: "first tenant", query: "", tenant: tenants[0]},
		{name: "one server", query: "tenant=acme&server=billing", tenant: "acme", server: "billing"},
		{name: "other tenant", query: "tenant=globex", tenant: "globex"},
		{name: "server and status", query: "tenant=acme&server=orders&status=active", tenant: "acme", server: "orders", statuses: []string{"active"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := u.with(t)
			if st := u.open("/console/catalog?" + tc.query); st != 200 {
				t.Fatalf("HTTP %d: %s", st, u.text("#error"))
			}
			want := h.listCards(t, tc.tenant, tc.server, tc.statuses...)
			if len(want) == 0 {
				t.Fatal("the example catalogue has no such cards; the test needs some")
			}
			got := rows()
			if len(got) != len(want) {
				t.Fatalf("%d cards shown, ListCards has %d", len(got), len(want))
			}
			for i, c := range want {
				w := row{Card: ref(c), Status: c.Status, Version: strconv.FormatInt(c.Version, 10)}
				if got[i] != w {
					t.Errorf("row %d: %+v, ListCards says %+v", i, got[i], w)
				}
			}
			if count := u.text("#card-count"); !strings.HasPrefix(count, fmt.Sprintf("%d of ", len(want))) {
				t.Errorf("count line %q, want %d of …", count, len(want))
			}
			if tc.name == "one server" {
				u.shot("catalog")
			}
		})
	}

	t.Run("search", func(t *testing.T) {
		u := u.with(t)
		if st := u.open("/console/catalog?tenant=acme&q=refund"); st != 200 {
			t.Fatalf("HTTP %d", st)
		}
		got := rows()
		all := h.listCards(t, "acme", "")
		if len(got) == 0 || len(got) >= len(all) {
			t.Fatalf("searching refund shows %d of %d cards", len(got), len(all))
		}
		byRef := map[string]*pb.Card{}
		for _, c := range all {
			byRef[ref(c)] = c
		}
		for _, r := range got {
			c := byRef[r.Card]
			if c == nil {
				t.Fatalf("%s shown, not a card of acme", r.Card)
			}
			hay := strings.ToLower(strings.Join(append(append(append([]string{c.Server, c.Name, c.Summary, c.Description}, c.Aliases...), c.Tags...), c.RequiredScopes...), " "))
			if !strings.Contains(hay, "refund") {
				t.Errorf("%s shown for refund, but says nothing of it", r.Card)
			}
		}
		if !slices.ContainsFunc(got, func(r row) bool { return r.Card == "billing/issue_refund" }) {
			t.Errorf("billing/issue_refund not found by refund: %v", got)
		}
	})

	t.Run("card page", func(t *testing.T) {
		u := u.with(t)
		c := h.getCard(t, "acme", "billing", "issue_refund")
		if st := u.open("/console/cards/acme/billing/issue_refund"); st != 200 {
			t.Fatalf("HTTP %d", st)
		}
		for sel, want := range map[string]string{"h1": "billing/issue_refund", "#summary": c.Summary, "#status": c.Status,
			"#version": strconv.FormatInt(c.Version, 10)} {
			if got := u.text(sel); got != want {
				t.Errorf("%s: %q, GetCard says %q", sel, got, want)
			}
		}
		if got := u.texts("#aliases .chip"); !slices.Equal(got, c.Aliases) {
			t.Errorf("aliases %v, GetCard says %v", got, c.Aliases)
		}
		if got := u.text("#input-schema"); !sameJSON(t, got, c.InputSchema) {
			t.Errorf("input schema shown\n%s\nGetCard says\n%s", got, c.InputSchema)
		}
		if st := u.open("/console/cards/acme/billing/no_such_tool"); st != 404 {
			t.Errorf("a card that does not exist: HTTP %d, want 404", st)
		}
	})

	t.Run("writes", func(t *testing.T) {
		u := u.with(t)
		refund := &pb.DiscoverToolsRequest{Caller: &pb.Caller{Tenant: "acme", Scopes: []string{"*"}}, Query: "refund the customer now", TopK: 5}
		found := func() bool {
			res, err := h.disc.DiscoverTools(rpc(t, adminToken), refund)
			if err != nil {
				t.Fatal(err)
			}
			return slices.ContainsFunc(res.Tools, func(d *pb.DiscoveredTool) bool { return ref(d.Card) == "billing/issue_refund" })
		}
		if !found() {
			t.Fatal("the setup needs billing/issue_refund in the shortlist of refund the customer now")
		}
		before := h.getCard(t, "acme", "billing", "issue_refund")
		u.open("/console/cards/acme/billing/issue_refund")
		u.fill(map[string]string{"new-alias": "pay the shopper back"})
		if st := u.click("#alias-form button"); st != 200 {
			t.Fatalf("adding an alias: HTTP %d: %s", st, u.text("#error"))
		}
		after := h.getCard(t, "acme", "billing", "issue_refund")
		if !slices.Contains(after.Aliases, "pay the shopper back") || after.Version != before.Version+1 {
			t.Fatalf("after adding an alias GetCard says version %d, aliases %v", after.Version, after.Aliases)
		}
		if got, want := u.text("#notice"), fmt.Sprintf("alias updated, version %d", after.Version); got != want {
			t.Errorf("notice %q, want %q", got, want)
		}
		trail, err := os.ReadFile(h.trail)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(trail), `"principal":"platform-ci"`) || !strings.Contains(string(trail), `"detail":"console: alias"`) {
			t.Errorf("the audit trail does not record the console's write by platform-ci:\n%s", trail)
		}

		// A page loaded before someone else's change may not overwrite it.
		c := after
		c.Aliases = append(c.Aliases, "changed elsewhere")
		if _, err := h.cat.PutCards(rpc(t, catalogToken), &pb.PutCardsRequest{Cards: []*pb.Card{c}}); err != nil {
			t.Fatal(err)
		}
		u.fill(map[string]string{"new-status": "revoked"})
		if st := u.click("#status-form button"); st != 409 {
			t.Errorf("a stale write: HTTP %d, want 409", st)
		}
		if got := u.text("#error"); !strings.Contains(got, "someone changed the card") {
			t.Errorf("a stale write says %q", got)
		}
		if now := h.getCard(t, "acme", "billing", "issue_refund"); now.Status != "active" {
			t.Fatalf("a stale write changed the status to %s", now.Status)
		}

		// Revoked from the console, the card is gone from discovery.
		u.open("/console/cards/acme/billing/issue_refund")
		u.fill(map[string]string{"new-status": "revoked"})
		if st := u.click("#status-form button"); st != 200 {
			t.Fatalf("revoking: HTTP %d: %s", st, u.text("#error"))
		}
		if now := h.getCard(t, "acme", "billing", "issue_refund"); now.Status != "revoked" {
			t.Fatalf("after revoking GetCard says %s", now.Status)
		}
		if found() {
			t.Error("a card revoked in the console is still discovered")
		}
	})
}

// playRow is a shortlist row as the playground shows it.
type playRow struct {
	Tool       string `json:"tool"`
	Lexical    string `json:"lexical"`
	Semantic   string `json:"semantic"`
	Fused      string `json:"fused"`
	Confidence string `json:"confidence"`
	Tokens     string `json:"tokens"`
	Fields     string `json:"fields"`
	Why        string `json:"why"`
	Pinned     bool   `json:"pinned"`
	Alts       string `json:"alts"`
}

const readShortlist = `[...document.querySelectorAll("#shortlist tbody tr")].map(r => {
	const t = c => r.querySelector(c).textContent.trim();
	return {tool: r.dataset.tool, lexical: t(".lexical"), semantic: t(".semantic"), fused: t(".fused"), confidence: t(".confidence"),
		tokens: t(".tokens"), fields: t(".fields"), why: t(".why"), pinned: !!r.querySelector(".pin"),
		alts: (r.querySelector(".alts") || {textContent: ""}).textContent.trim()};
})`

// shown is how the playground shows a tool of a DiscoverTools answer.
func shown(d *pb.DiscoveredTool) playRow {
	rank := func(score float64, rank int32) string {
		s := fmt.Sprintf("%.4f", score)
		if rank > 0 {
			s += fmt.Sprintf(" (#%d)", rank)
		}
		return s
	}
	var alts string
	for i, a := range d.Alternatives {
		if i == 0 {
			alts = "alternatives: "
		} else {
			alts += ", "
		}
		alts += a.Server + "/" + a.Name
	}
	return playRow{Tool: ref(d.Card), Lexical: rank(d.Scores.GetLexical(), d.Scores.GetLexicalRank()),
		Semantic: rank(d.Scores.GetSemantic(), d.Scores.GetSemanticRank()), Fused: fmt.Sprintf("%.4f", d.Scores.GetFused()),
		Confidence: fmt.Sprintf("%.2f", d.Confidence), Tokens: strconv.Itoa(int(d.Tokens)), Fields: strings.Join(d.MatchedFields, ", "),
		Why: d.Reason, Pinned: d.Pinned, Alts: alts}
}

func TestConsolePlayground(t *testing.T) {
	h := newHarness(t, false)
	browser := newBrowser(t)
	users := map[string]*user{}
	as := func(token string) *user {
		if users[token] == nil {
			users[token] = h.user(t, browser, token)
		}
		return users[token]
	}
	support := &pb.Caller{Tenant: "acme", Subject: "support-bot", Scopes: supportScopes}
	refund := "refund the customer's payment now"
	for _, tc := range []struct {
		name  string
		token string
		// form: the fields the user fills in, by id; the others keep what
		// the page starts with.
		form map[string]string
		// link: the playground link to open instead (the query string),
		// for what the form's own checks would not submit.
		link string
		// req: the same request over gRPC.
		req             *pb.DiscoverToolsRequest
		present, absent []string
		// code: the gRPC code of a refused request (the page answers
		// with the HTTP status it maps to).
		code codes.Code
		shot string
	}{{
		name: "every scope", token: adminToken,
		form:    map[string]string{"p-query": refund, "p-tenant": "acme", "p-scopes": "*"},
		req:     &pb.DiscoverToolsRequest{Caller: &pb.Caller{Tenant: "acme", Scopes: []string{"*"}}, Query: refund, TopK: 5},
		present: []string{"billing/issue_refund"}, shot: "playground",
	}, {
		name: "bound support bot", token: supportToken,
		form:   map[string]string{"p-query": refund},
		req:    &pb.DiscoverToolsRequest{Caller: support, Query: refund, TopK: 5},
		absent: []string{"billing/issue_refund"},
	}, {
		name: "support scopes, intents", token: discoverToken,
		form: map[string]string{"p-intents": "find the customer's last order\nrefund the customer's payment", "p-tenant": "acme",
			"p-scopes": strings.Join(supportScopes, ","), "p-topk": "6"},
		req: &pb.DiscoverToolsRequest{Caller: &pb.Caller{Tenant: "acme", Scopes: supportScopes}, TopK: 6,
			Intents: []string{"find the customer's last order", "refund the customer's payment"}},
		absent: []string{"billing/issue_refund"},
	}, {
		name: "other tenant", token: discoverToken,
		form: map[string]string{"p-query": "refund a trade account's invoice", "p-tenant": "globex", "p-scopes": "*", "p-topk": "3"},
		req:  &pb.DiscoverToolsRequest{Caller: &pb.Caller{Tenant: "globex", Scopes: []string{"*"}}, Query: "refund a trade account's invoice", TopK: 3},
	}, {
		name: "pins outside the scopes", token: supportToken,
		form:    map[string]string{"p-query": "where is my parcel", "p-pins": "billing/issue_refund, orders/track_shipment"},
		req:     &pb.DiscoverToolsRequest{Caller: support, Query: "where is my parcel", TopK: 5, AlwaysLoad: []*pb.ToolRef{{Server: "billing", Name: "issue_refund"}, {Server: "orders", Name: "track_shipment"}}},
		present: []string{"orders/track_shipment"}, absent: []string{"billing/issue_refund"},
	}, {
		name: "widening the bound scopes", token: supportToken,
		form:   map[string]string{"p-query": refund, "p-scopes": "billing:admin"},
		req:    &pb.DiscoverToolsRequest{Caller: &pb.Caller{Tenant: "acme", Subject: "support-bot", Scopes: []string{"billing:admin"}}, Query: refund, TopK: 5},
		absent: []string{"billing/issue_refund"}, code: codes.PermissionDenied,
	}, {
		name: "another tenant than the bound one", token: supportToken,
		form:   map[string]string{"p-query": "refund a trade account's invoice", "p-tenant": "globex"},
		req:    &pb.DiscoverToolsRequest{Caller: &pb.Caller{Tenant: "globex", Subject: "support-bot", Scopes: supportScopes}, Query: "refund a trade account's invoice", TopK: 5},
		absent: []string{"billing/issue_refund", "Globex"}, code: codes.PermissionDenied,
	}, {
		name: "top_k over the limit", token: discoverToken,
		link: url.Values{"query": {refund}, "tenant": {"acme"}, "scopes": {"*"}, "top_k": {"51"}}.Encode(),
		req:  &pb.DiscoverToolsRequest{Caller: &pb.Caller{Tenant: "acme", Scopes: []string{"*"}}, Query: refund, TopK: 51},
		code: codes.InvalidArgument,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			u := as(tc.token).with(t)
			if st := u.open("/console/playground"); st != 200 {
				t.Fatalf("HTTP %d", st)
			}
			if tc.token == supportToken {
				// The form starts with the credential's caller.
				if got := [3]string{u.value("p-tenant"), u.value("p-subject"), u.value("p-scopes")}; got != [3]string{"acme", "support-bot", strings.Join(supportScopes, ",")} {
					t.Errorf("the form starts with the caller %v, not the credential's", got)
				}
			}
			var st int64
			if tc.link != "" {
				st = u.open("/console/playground?" + tc.link)
			} else {
				u.fill(tc.form)
				st = u.click("#play-form button[type=submit]")
			}
			res, err := h.disc.DiscoverTools(rpc(t, tc.token), tc.req)
			page := u.html()
			// What the page answers (the form holds what the user typed).
			answer := js[string](u, `[...document.querySelectorAll("#result, #error")].map(e => e.outerHTML).join("")`)
			for _, name := range tc.absent {
				if strings.Contains(answer, name) {
					t.Errorf("the answer names %s, outside the caller's scopes", name)
				}
				if slices.ContainsFunc(res.GetTools(), func(d *pb.DiscoveredTool) bool { return ref(d.Card) == name }) {
					t.Errorf("gRPC returns %s, outside the caller's scopes", name)
				}
			}
			if tc.code != codes.OK {
				if status.Code(err) != tc.code {
					t.Fatalf("gRPC: %v, want %v", err, tc.code)
				}
				want := map[codes.Code]int64{codes.PermissionDenied: 403, codes.InvalidArgument: 400}[tc.code]
				if st != want {
					t.Errorf("HTTP %d, want %d (as gRPC's %v)", st, want, tc.code)
				}
				if u.text("#error") == "" || u.text("#result") != "" {
					t.Errorf("a refused request shows error %q and result %q", u.text("#error"), u.text("#result"))
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if st != 200 {
				t.Fatalf("HTTP %d: %s", st, u.text("#error"))
			}
			got := js[[]playRow](u, readShortlist)
			var want []playRow
			for _, d := range res.Tools {
				want = append(want, shown(d))
			}
			if len(want) == 0 {
				t.Fatal("DiscoverTools answers nothing; the case needs a shortlist to compare")
			}
			if !slices.Equal(got, want) {
				t.Errorf("the playground's shortlist\n%+v\nDiscoverTools\n%+v", got, want)
			}
			for _, name := range tc.present {
				if !slices.ContainsFunc(got, func(r playRow) bool { return r.Tool == name }) {
					t.Errorf("%s is not in the shortlist", name)
				}
			}
			for sel, want := range map[string]int64{"#shown": int64(len(res.Tools)), "#candidates": int64(res.CandidateCount),
				"#shortlist-tokens": res.Tokens.GetShortlistTokens(), "#catalog-tokens": res.Tokens.GetCatalogTokens()} {
				if got := u.text(sel); got != strconv.FormatInt(want, 10) {
					t.Errorf("%s: %s, DiscoverTools says %d", sel, got, want)
				}
			}
			if tc.req.Caller.Tenant == "globex" {
				for _, d := range res.Tools {
					if d.Card.Tenant != "globex" {
						t.Errorf("a globex caller got %s/%s", d.Card.Tenant, ref(d.Card))
					}
				}
			}
			// The same request to copy: the query in it, never the token.
			cmd, cli := u.text("#cmd-grpcurl"), u.text("#cmd-cli")
			if !strings.Contains(cmd, "cardex.v1.DiscoveryService/DiscoverTools") || !strings.Contains(cmd, h.grpcAddr) || !strings.HasPrefix(cli, "cardex discover") {
				t.Errorf("commands:\n%s\n%s", cmd, cli)
			}
			if strings.Contains(page, tc.token) {
				t.Error("the page shows the credential")
			}
			// The grpcurl command's request is the one compared above.
			from, to := strings.Index(cmd, " -d '"), strings.LastIndex(cmd, "' "+h.grpcAddr)
			if from < 0 || to < from {
				t.Fatalf("no -d '...' in %s", cmd)
			}
			var cmdReq pb.DiscoverToolsRequest
			if err := protojson.Unmarshal([]byte(strings.ReplaceAll(cmd[from+5:to], `'\''`, `'`)), &cmdReq); err != nil {
				t.Fatalf("the grpcurl request: %v", err)
			}
			if !proto.Equal(&cmdReq, tc.req) {
				t.Errorf("the grpcurl command sends\n%v\nthe test asked DiscoverTools\n%v", &cmdReq, tc.req)
			}
			if tc.shot != "" {
				u.shot(tc.shot)
			}
		})
	}

	// The scopes narrow what a caller is shown, and the playground follows:
	// the support caller is shown fewer tools than every scope.
	admin, err := h.disc.DiscoverTools(rpc(t, adminToken), &pb.DiscoverToolsRequest{Caller: &pb.Caller{Tenant: "acme", Scopes: []string{"*"}}, Query: refund})
	if err != nil {
		t.Fatal(err)
	}
	bot, err := h.disc.DiscoverTools(rpc(t, supportToken), &pb.DiscoverToolsRequest{Caller: support, Query: refund})
	if err != nil {
		t.Fatal(err)
	}
	if bot.CandidateCount >= admin.CandidateCount || bot.Tokens.CatalogTokens >= admin.Tokens.CatalogTokens {
		t.Errorf("support scopes: %d candidates, %d tokens; every scope: %d, %d", bot.CandidateCount, bot.Tokens.CatalogTokens, admin.CandidateCount, admin.Tokens.CatalogTokens)
	}
}

// missCounts reads the feedback log the gRPC server wrote: every miss, and
// the low-confidence ones.
func missCounts(t *testing.T, path string) (total, low int) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var e feedback.Event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatal(err)
		}
		if e.Miss {
			total++
			if e.Type == feedback.TypeLowConfidence {
				low++
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return total, low
}

func TestConsoleMisses(t *testing.T) {
	h := newHarness(t, false)
	h.recordMisses(t, discoverToken)
	total, low := missCounts(t, h.fbPath)
	if total < 4 || low < 1 {
		t.Fatalf("the feedback log holds %d misses, %d of low confidence; recordMisses makes at least 4 and 1", total, low)
	}
	u := h.user(t, newBrowser(t), catalogToken)
	if st := u.open("/console/misses"); st != 200 {
		t.Fatalf("HTTP %d", st)
	}
	if got := u.text("#miss-total strong"); got != strconv.Itoa(total) {
		t.Errorf("%s misses shown, the log holds %d", got, total)
	}
	if got := u.text("#miss-total"); !strings.Contains(got, fmt.Sprintf("%d low confidence", low)) || !strings.Contains(got, "1 implicit miss") ||
		!strings.Contains(got, "1 none fit") || !strings.Contains(got, "1 used a tool not shortlisted") {
		t.Errorf("counts by kind: %q", got)
	}
	// Grouped by tool: the implicit miss and the outcome point to issue_refund.
	cells := u.texts(`#miss-tools tr[data-tool="billing/issue_refund"] td.num`)
	if !slices.Equal(cells, []string{"2", "1", "1"}) {
		t.Errorf("billing/issue_refund: %v, want 2 misses: 1 implicit, 1 used elsewhere", cells)
	}
	unnamed := strings.Join(u.texts("#miss-unnamed tbody td"), "\n")
	for _, q := range []string{"book a meeting room for tomorrow", "zarquon florp wibblewobble"} {
		if !strings.Contains(unnamed, q) {
			t.Errorf("%q is not among the misses pointing to no tool:\n%s", q, unnamed)
		}
	}
	if u.text("#miss-days") == "" {
		t.Error("no chart data")
	}
	u.shot("misses")

	body := string(u.download("#export", "queries.jsonl"))
	rows := map[string]feedback.ReviewQuery{}
	for _, line := range strings.Split(strings.TrimSpace(body), "\n") {
		var q feedback.ReviewQuery
		if err := json.Unmarshal([]byte(line), &q); err != nil {
			t.Fatalf("export row %q: %v", line, err)
		}
		if q.ID == "" || q.Tenant != "acme" || q.Time == "" {
			t.Errorf("export row without id, tenant or time: %q", line)
		}
		rows[q.Query+"\x00"+q.Source] = q
	}
	for _, w := range []struct {
		query, source string
		expected      []string
	}{
		{"customer wants their money back for order 1234", feedback.TypeImplicitMiss, []string{"billing/issue_refund"}},
		{"the customer was charged twice, reverse it", feedback.TypeOutcome, []string{"billing/issue_refund"}},
		{"book a meeting room for tomorrow", "none_fit", nil},
		{"zarquon florp wibblewobble", feedback.TypeLowConfidence, nil},
	} {
		q, ok := rows[w.query+"\x00"+w.source]
		if !ok {
			t.Errorf("the export lacks %q (%s):\n%s", w.query, w.source, body)
			continue
		}
		if !slices.Equal(q.Expected, w.expected) && !(len(q.Expected) == 0 && len(w.expected) == 0) {
			t.Errorf("%q: expected %v, want %v", w.query, q.Expected, w.expected)
		}
	}
	// The tenant filter: globex has no misses.
	u.fill(map[string]string{"m-tenant": "globex", "m-days": "0"})
	if st := u.click(`form.filters button[type=submit]`); st != 200 {
		t.Fatalf("filtering the misses: HTTP %d", st)
	}
	if got := u.text("#miss-total strong"); got != "0" {
		t.Errorf("globex: %s misses shown, want 0", got)
	}
	if other := u.download("#export", "queries-globex.jsonl"); len(other) != 0 {
		t.Errorf("globex's export: %q", other)
	}

	// The card page lists the misses pointing to the card.
	if st := u.open("/console/cards/acme/billing/issue_refund"); st != 200 {
		t.Fatalf("card page: HTTP %d", st)
	}
	if got := u.text("#misses-h"); got != "Recent misses (2)" {
		t.Errorf("card page: %q, want Recent misses (2)", got)
	}
	queries := strings.Join(u.texts("#card-misses tbody td"), "\n")
	for _, q := range []string{"customer wants their money back for order 1234", "the customer was charged twice, reverse it"} {
		if !strings.Contains(queries, q) {
			t.Errorf("card page: %q is not among its misses", q)
		}
	}
	u.shot("card")
}

func TestConsoleEval(t *testing.T) {
	h := newHarness(t, false)
	tiny := h.writeReports(t)
	u := h.user(t, newBrowser(t), catalogToken)
	type metric struct {
		Subset, Mode, Condition string
		R1, R3, R5, R10         string
	}
	metrics := func() []metric {
		return js[[]metric](u, `[...document.querySelectorAll("#metrics tbody tr")].map(r => ({Subset: r.dataset.subset, Mode: r.dataset.mode,
			Condition: r.dataset.condition, R1: r.querySelector(".r1").textContent, R3: r.querySelector(".r3").textContent,
			R5: r.querySelector(".r5").textContent, R10: r.querySelector(".r10").textContent}))`)
	}
	want := func(rep *eval.Report) []metric {
		var out []metric
		for _, s := range rep.Subsets {
			for _, m := range s.Modes {
				f := func(x float64) string { return fmt.Sprintf("%.3f", x) }
				out = append(out, metric{s.Name, m.Mode, m.Condition, f(m.Recall1), f(m.Recall3), f(m.Recall5), f(m.Recall10)})
			}
		}
		return out
	}
	var live eval.Report
	b, err := os.ReadFile("testdata/eval-livemcpbench.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &live); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		file string
		rep  *eval.Report
	}{{"eval-tiny.json", tiny}, {"eval-livemcpbench.json", &live}} {
		t.Run(tc.file, func(t *testing.T) {
			u := u.with(t)
			if st := u.open("/console/eval?report=" + tc.file); st != 200 {
				t.Fatalf("HTTP %d: %s", st, u.text("#error"))
			}
			if got := u.text("#rep-h"); got != tc.rep.Dataset {
				t.Errorf("heading %q, want %q", got, tc.rep.Dataset)
			}
			if got := u.text("#report-facts"); !strings.HasPrefix(got, fmt.Sprintf("%d tools, %d queries", tc.rep.Tools, tc.rep.Queries)) {
				t.Errorf("facts %q", got)
			}
			if got, w := metrics(), want(tc.rep); !slices.Equal(got, w) || len(w) == 0 {
				t.Errorf("metrics shown\n%v\nthe report's\n%v", got, w)
			}
			conds := max(len(tc.rep.Conditions), 1)
			if n := js[int](u, `document.querySelectorAll("#report .charts svg").length`); n != conds+len(tc.rep.Abstention) {
				t.Errorf("%d charts, want %d recall@K and %d abstention charts", n, conds, len(tc.rep.Abstention))
			}
			if tc.rep.Tokens != nil {
				if got := u.texts("#tokens tbody th"); len(got) != len(tc.rep.Tokens.Shortlists) {
					t.Errorf("token rows %v, the report has %d shortlists", got, len(tc.rep.Tokens.Shortlists))
				}
			}
			if tc.file == "eval-livemcpbench.json" {
				u.shot("eval")
			}
		})
	}
	t.Run("unknown report", func(t *testing.T) {
		u := u.with(t)
		if st := u.open("/console/eval?report=../../etc/passwd"); st != 404 {
			t.Errorf("HTTP %d, want 404", st)
		}
	})
	t.Run("upload", func(t *testing.T) {
		u := u.with(t)
		u.open("/console/eval")
		u.do(chromedp.SetUploadFiles(chromedp.ID("e-file"), []string{h.evalDir + "/eval-tiny.json"}))
		if st := u.click("#upload-form button"); st != 200 {
			t.Fatalf("HTTP %d: %s", st, u.text("#error"))
		}
		if got := u.text("#rep-h"); got != tiny.Dataset+" (uploaded eval-tiny.json)" {
			t.Errorf("heading %q", got)
		}
		if got := metrics(); !slices.Equal(got, want(tiny)) {
			t.Errorf("metrics of the upload\n%v\nthe report's\n%v", got, want(tiny))
		}
		notReport := t.TempDir() + "/notes.json"
		if err := os.WriteFile(notReport, []byte(`{"hello": "world"}`), 0o644); err != nil {
			t.Fatal(err)
		}
		u.open("/console/eval")
		u.do(chromedp.SetUploadFiles(chromedp.ID("e-file"), []string{notReport}))
		if st := u.click("#upload-form button"); st != 400 {
			t.Errorf("a file that is not a report: HTTP %d, want 400", st)
		}
		if got := u.text("#error"); !strings.Contains(got, "is not a cardex eval report") {
			t.Errorf("error %q", got)
		}
	})
}
