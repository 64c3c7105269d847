package retriever

import (
	"fmt"
	"math/rand"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/seed0cff8200/cardex/cards"
)

func lexID(tenant, server, name string) string {
	return DocID(cards.Key{Tenant: tenant, Server: server, Name: name})
}

// lx turns a readable "tenant/server/name" into its DocID.
func lx(readable string) string {
	p := strings.SplitN(readable, "/", 3)
	return lexID(p[0], p[1], p[2])
}

// lexCard is a card with a summary; its ID is DocID.
func lexCard(tenant, server, name, summary string) LexicalDoc {
	return LexicalDoc{
		ID:      lexID(tenant, server, name),
		Tenant:  tenant,
		Server:  server,
		Name:    name,
		Summary: summary,
	}
}

func newTestLexical(t testing.TB, docs ...LexicalDoc) *LexicalIndex {
	t.Helper()
	x, err := NewLexicalIndex()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = x.Close() })
	if err := x.Upsert(docs); err != nil {
		t.Fatal(err)
	}
	return x
}

func lexIDs(hits []Hit) []string {
	out := make([]string, len(hits))
	for i, h := range hits {
		out[i] = h.ID
	}
	return out
}

func lexSearch(t *testing.T, x *LexicalIndex, q string, f Filter, limit int) []Hit {
	t.Helper()
	hits, err := x.Search(q, f, limit)
	if err != nil {
		t.Fatalf("Search(%q): %v", q, err)
	}
	return hits
}

func TestLexicalSplitIdentifiers(t *testing.T) {
	cases := []struct{ in, want string }{
		{"getPullRequest", "get pull request"},
		{"list_open_issues", "list open issues"},
		{"HTTPServer2Status", "http server 2 status"},
		{"create-issue", "create issue"},
		{"github.repos.list", "github repos list"},
		{"billing:read", "billing read"},
		{"XMLHttpRequest", "xml http request"},
		{"getURLs", "get urls"},
		{"listIDsByOwner", "list ids by owner"},
		{"oauth2Token", "oauth 2 token"},
		{"ID", "id"},
		{"a", "a"},
		{"__init__", "init"},
		{"  Track   my package  ", "track my package"},
		{"user's refunds, please", "user's refunds, please"},
		{"createIssue in repo", "create issue in repo"},
		{"Ünïcode_straße", "ünïcode straße"},
		{"", ""},
		{"_-.", ""},
	}
	for _, c := range cases {
		if got := SplitIdentifiers(c.in); got != c.want {
			t.Errorf("SplitIdentifiers(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestLexicalIdentifierMatching(t *testing.T) {
	x := newTestLexical(t,
		lexCard("t", "github", "create_issue", "Open a new ticket."),
		lexCard("t", "github", "getPullRequest", "Fetch one change set."),
		lexCard("t", "web", "HTTPServer2Status", "Health of the web tier."),
		LexicalDoc{ID: lx("t/db/query"), Tenant: "t", Server: "db", Name: "query", Summary: "Run a read-only statement.",
			Params: []string{"maxRows", "statement_timeout"}},
	)
	cases := []struct {
		query      string
		want       string
		wantFields []string
	}{
		{"createIssue", lx("t/github/create_issue"), []string{"name"}},
		{"create issues", lx("t/github/create_issue"), []string{"name"}},
		{"pull requests", lx("t/github/getPullRequest"), []string{"name"}},
		{"get_pull_request", lx("t/github/getPullRequest"), []string{"name"}},
		{"server status", lx("t/web/HTTPServer2Status"), []string{"name"}},
		{"max rows", lx("t/db/query"), []string{"params"}},
		{"timeout", lx("t/db/query"), []string{"params"}},
		{"read only github", "", nil}, // checked below: two cards match
	}
	for _, c := range cases {
		if c.want == "" {
			continue
		}
		hits := lexSearch(t, x, c.query, Filter{Tenant: "t"}, 5)
		if len(hits) != 1 || hits[0].ID != c.want {
			t.Errorf("%q: got %q, want [%q]", c.query, lexIDs(hits), c.want)
			continue
		}
		if !reflect.DeepEqual(hits[0].Fields, c.wantFields) {
			t.Errorf("%q: fields %v, want %v", c.query, hits[0].Fields, c.wantFields)
		}
	}
	// A query term missing from a card does not exclude it (OR semantics).
	hits := lexSearch(t, x, "read only github", Filter{Tenant: "t"}, 5)
	got := lexIDs(hits)
	sort.Strings(got)
	want := []string{lx("t/db/query"), lx("t/github/create_issue"), lx("t/github/getPullRequest")}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("OR query: got %q, want %q", got, want)
	}
	for _, h := range hits {
		wantF := []string{"server"}
		if h.ID == lx("t/db/query") {
			wantF = []string{"summary"}
		}
		if !reflect.DeepEqual(h.Fields, wantF) {
			t.Errorf("OR query %s: fields %v, want %v", h.ID, h.Fields, wantF)
		}
	}
}

func TestLexicalStemming(t *testing.T) {
	x := newTestLexical(t,
		lexCard("t", "pay", "issue_refund", "Refund a payment to the customer."),
		lexCard("t", "docs", "search", "Search the knowledge base."),
		lexCard("t", "ship", "track_package", "Where is my parcel."),
	)
	cases := []struct{ query, want string }{
		{"refunds", lx("t/pay/issue_refund")},
		{"refunding", lx("t/pay/issue_refund")},
		{"searching", lx("t/docs/search")},
		{"searches", lx("t/docs/search")},
		{"tracking packages", lx("t/ship/track_package")},
		{"customer's payments", lx("t/pay/issue_refund")},
	}
	for _, c := range cases {
		hits := lexSearch(t, x, c.query, Filter{Tenant: "t"}, 5)
		if len(hits) == 0 || hits[0].ID != c.want {
			t.Errorf("%q: got %q, want %q first", c.query, lexIDs(hits), c.want)
		}
	}
}

func TestLexicalFieldBoosts(t *testing.T) {
	// Same word, same field length: once in aliases, once in description.
	docs := []LexicalDoc{
		{ID: lx("t/a/alias_card"), Tenant: "t", Server: "a", Name: "alias_card", Aliases: []string{"shipping delay"}, Description: "other words here"},
		{ID: lx("t/b/desc_card"), Tenant: "t", Server: "b", Name: "desc_card", Aliases: []string{"other words"}, Description: "shipping delay here"},
	}
	cases := []struct {
		name    string
		weights LexicalWeights
		first   string
	}{
		{"defaults favour aliases", DefaultLexicalWeights(), lx("t/a/alias_card")},
		{"description boosted", func() LexicalWeights {
			w := DefaultLexicalWeights()
			w.Description = 5
			return w
		}(), lx("t/b/desc_card")},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			x, err := NewLexicalIndexWithWeights(c.weights)
			if err != nil {
				t.Fatal(err)
			}
			defer x.Close()
			if err := x.Upsert(docs); err != nil {
				t.Fatal(err)
			}
			hits := lexSearch(t, x, "shipping delay", Filter{Tenant: "t"}, 5)
			if len(hits) != 2 || hits[0].ID != c.first {
				t.Fatalf("got %v, want %s first", hits, c.first)
			}
			if hits[0].Score <= hits[1].Score {
				t.Fatalf("scores not strictly ordered: %v", hits)
			}
		})
	}

	w := DefaultLexicalWeights()
	w.Aliases = 0
	x, err := NewLexicalIndexWithWeights(w)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	if err := x.Upsert(docs[:1]); err != nil {
		t.Fatal(err)
	}
	if hits := lexSearch(t, x, "shipping delay", Filter{Tenant: "t"}, 5); len(hits) != 0 {
		t.Errorf("zero alias weight: got %v, want no hits", hits)
	}

	for _, bad := range []float64{-1, nanWeight()} {
		w := DefaultLexicalWeights()
		w.Tags = bad
		if _, err := NewLexicalIndexWithWeights(w); err == nil {
			t.Errorf("weight %v accepted", bad)
		}
	}
}

func nanWeight() float64 {
	zero := 0.0
	return zero / zero
}

func TestLexicalFilters(t *testing.T) {
	x := newTestLexical(t,
		lexCard("acme", "crm", "find_contact", "Find a contact by email."),
		lexCard("acme", "crm", "update_contact", "Update a contact."),
		lexCard("acme", "mail", "send_email", "Send an email to a contact."),
		lexCard("globex", "crm", "find_contact", "Find a contact by email."),
	)
	cases := []struct {
		name   string
		filter Filter
		want   []string
	}{
		{"tenant acme", Filter{Tenant: "acme"}, []string{lx("acme/crm/find_contact"), lx("acme/mail/send_email"), lx("acme/crm/update_contact")}},
		{"tenant globex", Filter{Tenant: "globex"}, []string{lx("globex/crm/find_contact")}},
		{"unknown tenant", Filter{Tenant: "initech"}, nil},
		{"tenant prefix is not a tenant", Filter{Tenant: "acm"}, nil},
		{"ids", Filter{Tenant: "acme", IDs: []string{lx("acme/mail/send_email"), lx("acme/crm/update_contact")}}, []string{lx("acme/mail/send_email"), lx("acme/crm/update_contact")}},
		{"ids of another tenant", Filter{Tenant: "acme", IDs: []string{lx("globex/crm/find_contact")}}, nil},
		{"unknown ids", Filter{Tenant: "acme", IDs: []string{lx("acme/x/y")}}, nil},
		{"empty non-nil ids", Filter{Tenant: "acme", IDs: []string{}}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := lexIDs(lexSearch(t, x, "find contact email", c.filter, 10))
			if len(got) == 0 {
				got = nil
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("got %q, want %q", got, c.want)
			}
		})
	}
	if _, err := x.Search("contact", Filter{}, 10); err == nil {
		t.Error("search without tenant: no error")
	}
	if _, err := x.Search("contact", Filter{Tenant: "acme"}, -1); err == nil {
		t.Error("negative limit: no error")
	}
	if hits := lexSearch(t, x, "contact", Filter{Tenant: "acme"}, 0); len(hits) != 0 {
		t.Errorf("limit 0: got %v", hits)
	}
}

// The candidate set is applied inside the search: authorized matches ranked
// below many better unauthorized ones are still returned.
func TestLexicalAuthorizedBelowUnauthorized(t *testing.T) {
	var docs []LexicalDoc
	for i := range 200 {
		// Strong matches: both query words in a short description, and in
		// name, aliases and summary too. (BM25 idf is per field: the weak
		// matches below use the same field, so they cannot win on a rare
		// field alone.)
		for _, tenant := range []string{"acme", "globex"} {
			docs = append(docs, LexicalDoc{
				ID: lx(fmt.Sprintf("%s/leak%03d/refund_invoice", tenant, i)), Tenant: tenant, Server: fmt.Sprintf("leak%03d", i),
				Name: "refund_invoice", Aliases: []string{"refund invoice"}, Summary: "Refund an invoice.",
				Description: "Refund an invoice.",
			})
		}
	}
	var authorized []string
	for _, name := range []string{"adjust", "credit_note", "void"} {
		id := lexID("acme", "billing", name)
		authorized = append(authorized, id)
		docs = append(docs, LexicalDoc{
			ID: id, Tenant: "acme", Server: "billing", Name: name,
			Description: "Can be used after a refund, along with many other unrelated words about accounts and ledgers.",
		})
	}
	x := newTestLexical(t, docs...)

	// Sanity: unfiltered by IDs, the leaks fill the top 3.
	top := lexSearch(t, x, "refund invoice", Filter{Tenant: "acme"}, 3)
	for _, h := range top {
		if !strings.Contains(h.ID, "leak") {
			t.Fatalf("setup: expected unauthorized cards to outrank authorized ones, got %q", lexIDs(top))
		}
	}

	hits := lexSearch(t, x, "refund invoice", Filter{Tenant: "acme", IDs: authorized}, 3)
	got := lexIDs(hits)
	sort.Strings(got)
	if !reflect.DeepEqual(got, authorized) {
		t.Fatalf("got %q, want %q", lexIDs(hits), authorized)
	}

	// Same with a tenant filter alone: another tenant's better matches do
	// not crowd out this tenant's.
	var only []LexicalDoc
	for _, d := range docs {
		if d.Tenant == "globex" || !strings.HasPrefix(d.Server, "leak") {
			only = append(only, d)
		}
	}
	y := newTestLexical(t, only...)
	got = lexIDs(lexSearch(t, y, "refund invoice", Filter{Tenant: "acme"}, 3))
	sort.Strings(got)
	if !reflect.DeepEqual(got, authorized) {
		t.Fatalf("tenant filter: got %q, want %q", got, authorized)
	}
}

func TestLexicalUpsertDelete(t *testing.T) {
	x := newTestLexical(t,
		lexCard("t", "s", "a", "Ship a parcel."),
		lexCard("t", "s", "b", "Cancel an order."),
	)
	n, err := x.Count()
	if err != nil || n != 2 {
		t.Fatalf("Count = %d, %v; want 2", n, err)
	}

	// Upsert replaces: the old text no longer matches, the new one does.
	if err := x.Upsert([]LexicalDoc{lexCard("t", "s", "a", "Print a label.")}); err != nil {
		t.Fatal(err)
	}
	if n, _ := x.Count(); n != 2 {
		t.Fatalf("Count after replace = %d, want 2", n)
	}
	if hits := lexSearch(t, x, "parcel", Filter{Tenant: "t"}, 5); len(hits) != 0 {
		t.Errorf("old text still matches: %v", hits)
	}
	if got := lexIDs(lexSearch(t, x, "label", Filter{Tenant: "t"}, 5)); !reflect.DeepEqual(got, []string{lx("t/s/a")}) {
		t.Errorf("new text: got %q", got)
	}

	if err := x.Delete([]string{lx("t/s/b"), lx("t/s/missing")}); err != nil {
		t.Fatal(err)
	}
	if n, _ := x.Count(); n != 1 {
		t.Fatalf("Count after delete = %d, want 1", n)
	}
	if hits := lexSearch(t, x, "cancel order", Filter{Tenant: "t"}, 5); len(hits) != 0 {
		t.Errorf("deleted doc found: %v", hits)
	}
	if hits := lexSearch(t, x, "cancel order", Filter{Tenant: "t", IDs: []string{lx("t/s/b")}}, 5); len(hits) != 0 {
		t.Errorf("deleted doc found by ID: %v", hits)
	}
	if err := x.Delete(nil); err != nil {
		t.Error(err)
	}
	if err := x.Upsert(nil); err != nil {
		t.Error(err)
	}

	for _, bad := range []LexicalDoc{{Tenant: "t", Name: "x"}, {ID: lx("t/s/x"), Name: "x"}} {
		if err := x.Upsert([]LexicalDoc{bad}); err == nil {
			t.Errorf("Upsert(%+v): no error", bad)
		}
	}
}

func TestLexicalDeterministicTies(t *testing.T) {
	var docs []LexicalDoc
	for i := range 40 {
		docs = append(docs, lexCard("t", fmt.Sprintf("srv%02d", i), "send_message", "Send a chat message."))
	}
	rand.New(rand.NewSource(1)).Shuffle(len(docs), func(i, j int) { docs[i], docs[j] = docs[j], docs[i] })
	x := newTestLexical(t)
	// Several batches, so the docs live in several segments.
	for i := 0; i < len(docs); i += 7 {
		if err := x.Upsert(docs[i:min(i+7, len(docs))]); err != nil {
			t.Fatal(err)
		}
	}
	var want []string
	for i := range 40 {
		want = append(want, lx(fmt.Sprintf("t/srv%02d/send_message", i)))
	}
	sort.Strings(want) // here ID order is (server, name) order
	for _, limit := range []int{5, 17, 40} {
		for range 20 {
			hits := lexSearch(t, x, "send message", Filter{Tenant: "t"}, limit)
			if got := lexIDs(hits); !reflect.DeepEqual(got, want[:limit]) {
				t.Fatalf("limit %d: got %q, want %q", limit, got, want[:limit])
			}
			for _, h := range hits[1:] {
				if h.Score != hits[0].Score {
					t.Fatalf("scores not tied: %v", hits)
				}
			}
		}
	}
}

// A shorter limit returns a prefix of a longer one: the pipeline fuses legs
// cut at different depths.
func TestLexicalLimitIsPrefix(t *testing.T) {
	docs := lexBenchDocs(1_000)
	x := newTestLexical(t, docs...)
	var ids []string
	for i, d := range docs {
		if d.Tenant == "acme" && i%3 == 0 {
			ids = append(ids, d.ID)
		}
	}
	for _, q := range []string{"refund invoice", "track parcel delay", "list open pull request", "merge", "get user role permission"} {
		for _, f := range []Filter{{Tenant: "acme"}, {Tenant: "acme", IDs: ids}} {
			long := lexIDs(lexSearch(t, x, q, f, 300))
			for _, k := range []int{1, 7, 50, 200} {
				short := lexIDs(lexSearch(t, x, q, f, k))
				if len(short) != min(k, len(long)) || !reflect.DeepEqual(short, long[:len(short)]) {
					t.Errorf("%q ids=%d: limit %d is not a prefix of limit 300", q, len(f.IDs), k)
				}
			}
		}
	}
}

// Ties break in (server, name) order, also when one server name is a prefix
// of another ("jira" < "jira-cloud"): DocID's separator sorts below every
// character of a name, so ID order is (server, name) order.
func TestLexicalTieBreakServerPrefix(t *testing.T) {
	servers := []string{"jira_dc", "jira2", "jira.v2", "jira", "jira-cloud", "Jira"}
	var docs []LexicalDoc
	for _, s := range servers {
		docs = append(docs, lexCard("t", s, "create_ticket", "Create a ticket."))
	}
	// Same server, names with a prefix relation (same tokens, so tied).
	docs = append(docs, lexCard("t", "jira", "create_ticket_", "Create a ticket."))
	x := newTestLexical(t, docs...)
	want := []string{ // sorted by (server, name)
		lx("t/Jira/create_ticket"),
		lx("t/jira/create_ticket"),
		lx("t/jira/create_ticket_"),
		lx("t/jira-cloud/create_ticket"),
		lx("t/jira.v2/create_ticket"),
		lx("t/jira2/create_ticket"),
		lx("t/jira_dc/create_ticket"),
	}
	for _, limit := range []int{1, 2, 3, 7} {
		got := lexIDs(lexSearch(t, x, "ticket", Filter{Tenant: "t"}, limit))
		if !reflect.DeepEqual(got, want[:limit]) {
			t.Errorf("limit %d: got %q, want %q", limit, got, want[:limit])
		}
	}
}

func TestLexicalEmptyAndStopWordQueries(t *testing.T) {
	x := newTestLexical(t, lexCard("t", "s", "the_tool", "It is what it is."))
	for _, q := range []string{"", "   ", "the", "what is it", "the_and-of", "...", "?!"} {
		hits, err := x.Search(q, Filter{Tenant: "t"}, 5)
		if err != nil || len(hits) != 0 {
			t.Errorf("Search(%q) = %v, %v; want no hits, no error", q, hits, err)
		}
	}
}

func TestLexicalConcurrent(t *testing.T) {
	x := newTestLexical(t, lexCard("t", "s", "base", "Base card about invoices."))
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for i := range 25 {
				d := lexCard("t", fmt.Sprintf("w%d", w), fmt.Sprintf("tool%d", i), "Invoices and payments.")
				if err := x.Upsert([]LexicalDoc{d}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
		go func() {
			defer wg.Done()
			for range 25 {
				if _, err := x.Search("invoice", Filter{Tenant: "t"}, 5); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if n, _ := x.Count(); n != 101 {
		t.Errorf("Count = %d, want 101", n)
	}
}

var lexBenchWords = strings.Fields(`invoice refund payment customer order ship parcel label
track delay issue pull request repo branch commit deploy server status health metric alert
page incident ticket contact email message channel user group role permission file folder
upload download search index query table view report chart export import sync calendar event
meeting schedule cancel update create delete list get set find open close merge review`)

func lexBenchDocs(n int) []LexicalDoc {
	r := rand.New(rand.NewSource(42))
	word := func() string { return lexBenchWords[r.Intn(len(lexBenchWords))] }
	sentence := func(k int) string {
		ws := make([]string, k)
		for i := range ws {
			ws[i] = word()
		}
		return strings.Join(ws, " ")
	}
	docs := make([]LexicalDoc, n)
	for i := range docs {
		tenant := "acme"
		if i%10 == 9 {
			tenant = "globex"
		}
		server := fmt.Sprintf("srv%03d", i%300)
		name := fmt.Sprintf("%s_%s_%d", word(), word(), i)
		docs[i] = LexicalDoc{
			ID: lexID(tenant, server, name), Tenant: tenant, Server: server, Name: name,
			Summary:     sentence(10),
			Description: sentence(30),
			Aliases:     []string{sentence(3), sentence(3)},
			Tags:        []string{word(), word()},
			Params:      []string{word() + "Id", word() + "_name", "limit"},
		}
	}
	return docs
}

func BenchmarkLexicalSearch(b *testing.B) {
	docs := lexBenchDocs(10_000)
	x := newTestLexical(b, docs...)
	var ids []string
	for _, d := range docs {
		if d.Tenant == "acme" && len(ids) < 5_000 {
			ids = append(ids, d.ID)
		}
	}
	const q = "refund the customer's invoice payment"
	for _, bc := range []struct {
		name string
		f    Filter
	}{
		{"tenant", Filter{Tenant: "acme"}},
		{"ids5000", Filter{Tenant: "acme", IDs: ids}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			TimedLoop(b, func() {
				hits, err := x.Search(q, bc.f, 20)
				if err != nil || len(hits) != 20 {
					b.Fatalf("hits %d, err %v", len(hits), err)
				}
			})
		})
	}
}
