package console_test

// Who may see and do what in the console: the same roles as the gRPC API
// (discover: the playground; catalog: everything else and the writes;
// admin: both), and nothing about a card to a credential that may not see
// it.

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

// forge puts a form into the current page that posts fields to action, as
// a page could that did not come from the console's own forms, and submits
// it; it returns the HTTP status of the answer.
func (u *user) forge(action string, fields map[string]string) int64 {
	u.t.Helper()
	var b strings.Builder
	for k, v := range fields {
		b.WriteString(`add(` + quoteJS(k) + `, ` + quoteJS(v) + `);`)
	}
	js[bool](u, `(() => {
		const f = document.createElement("form");
		f.method = "post"; f.action = `+quoteJS(action)+`;
		const add = (k, v) => { const i = document.createElement("input"); i.type = "hidden"; i.name = k; i.value = v; f.append(i); };
		`+b.String()+`
		const s = document.createElement("button"); s.id = "forged"; f.append(s);
		document.body.append(f);
		return true;
	})()`)
	return u.click("#forged")
}

func TestConsoleAuthorization(t *testing.T) {
	h := newHarness(t, false)
	h.recordMisses(t, discoverToken)
	browser := newBrowser(t)
	refund := h.getCard(t, "acme", "billing", "issue_refund")

	const (
		anonymous = iota // not signed in: the sign-in page
		denied           // signed in without the role: 403
		allowed
	)
	catalogOnly := map[string]int{"": anonymous, discoverToken: denied, supportToken: denied, catalogToken: allowed, adminToken: allowed}
	discoverOnly := map[string]int{"": anonymous, discoverToken: allowed, supportToken: allowed, catalogToken: denied, adminToken: allowed}
	pages := []struct {
		path string
		who  map[string]int
		// status for the allowed (0: 200)
		status int64
	}{
		{"/console/catalog", catalogOnly, 0},
		{"/console/catalog?tenant=acme&q=refund", catalogOnly, 0},
		{"/console/cards/acme/billing/issue_refund", catalogOnly, 0},
		{"/console/cards/acme/billing/no_such_tool", catalogOnly, 404},
		{"/console/misses", catalogOnly, 0},
		{"/console/usage", catalogOnly, 0},
		{"/console/eval", catalogOnly, 0},
		{"/console/playground", discoverOnly, 0},
		{"/console/playground?query=refund+the+customer+now&tenant=acme&scopes=billing:read", discoverOnly, 0},
	}
	nav := map[string][]string{discoverToken: {"Playground"}, supportToken: {"Playground"},
		catalogToken: {"Catalogue", "Misses", "Usage", "Evaluation"}, adminToken: {"Catalogue", "Playground", "Misses", "Usage", "Evaluation"}}
	names := map[string]string{"": "not signed in", discoverToken: "discover", supportToken: "bound discover", catalogToken: "catalog", adminToken: "admin"}

	for _, token := range []string{"", discoverToken, supportToken, catalogToken, adminToken} {
		t.Run(names[token], func(t *testing.T) {
			u := h.user(t, browser, token)
			if token != "" {
				if got := u.texts("header nav a"); strings.Join(got, ",") != strings.Join(nav[token], ",") {
					t.Errorf("navigation %v, want %v", got, nav[token])
				}
			}
			var deniedCard string
			for _, p := range pages {
				st := u.open(p.path)
				switch p.who[token] {
				case anonymous:
					if st != 200 || !strings.HasPrefix(u.path(), "/console/login?next=") {
						t.Errorf("%s: HTTP %d at %s, want the sign-in page", p.path, st, u.path())
					}
				case denied:
					if st != 403 {
						t.Errorf("%s: HTTP %d, want 403", p.path, st)
					}
				case allowed:
					if want := max(p.status, 200); st != want {
						t.Errorf("%s: HTTP %d, want %d: %s", p.path, st, want, u.text("#error"))
					}
				}
				if p.who[token] == allowed {
					continue
				}
				// Refused: nothing of a card, a miss or a report.
				main := u.text("main")
				for _, leak := range []string{"issue_refund", refund.Summary, "zarquon", "Recent misses", "recall@"} {
					if strings.Contains(main, leak) {
						t.Errorf("%s refused, but the page shows %q:\n%s", p.path, leak, main)
					}
				}
				// A card that exists and one that does not are refused alike.
				switch p.path {
				case "/console/cards/acme/billing/issue_refund":
					deniedCard = main
				case "/console/cards/acme/billing/no_such_tool":
					if main != deniedCard {
						t.Errorf("refused pages differ for a card that exists and one that does not:\n%s\n%s", deniedCard, main)
					}
				}
			}

			// Writes: only the catalog role, only from the console's own
			// forms (the CSRF value), and nothing written otherwise.
			if token != adminToken {
				if st := u.open("/console/"); st != 200 {
					t.Fatalf("HTTP %d", st)
				}
				csrf := js[string](u, `(document.querySelector("input[name=csrf]") || {value: ""}).value`)
				if token == catalogToken {
					csrf = strings.Repeat("0", 64) // a guess, not this browser's
				}
				version := strconv.FormatInt(refund.Version, 10)
				for _, w := range []struct {
					action string
					fields map[string]string
				}{
					{"/console/cards/acme/billing/issue_refund/status", map[string]string{"csrf": csrf, "version": version, "status": "revoked"}},
					{"/console/cards/acme/billing/issue_refund/aliases", map[string]string{"csrf": csrf, "version": version, "alias": "free money"}},
					{"/console/cards/acme/billing/issue_refund/examples", map[string]string{"csrf": csrf, "version": version, "examples": "free money"}},
					{"/console/cards/acme/billing/issue_refund/enrich", map[string]string{"csrf": csrf, "version": version}},
				} {
					st := u.forge(w.action, w.fields)
					switch {
					case token == "":
						if !strings.HasPrefix(u.path(), "/console/login") {
							t.Errorf("%s not signed in: HTTP %d at %s, want the sign-in page", w.action, st, u.path())
						}
					case st != 403:
						t.Errorf("%s: HTTP %d, want 403", w.action, st)
					}
					now := h.getCard(t, "acme", "billing", "issue_refund")
					if now.Status != "active" || now.Version != refund.Version || strings.Contains(strings.Join(now.Aliases, ","), "free money") || len(now.SearchExamples) > 0 {
						t.Fatalf("%s by %s wrote: status %s, version %d, aliases %v", w.action, names[token], now.Status, now.Version, now.Aliases)
					}
					u.open("/console/")
				}
			}
		})
	}

	t.Run("sign-in", func(t *testing.T) {
		u := h.user(t, browser, "")
		if st := u.open("/console/login"); st != 200 {
			t.Fatalf("HTTP %d", st)
		}
		u.shot("login")
		u.fill(map[string]string{"token": "not-a-token-of-this-server"})
		if st := u.click("#login-form button[type=submit]"); st != 401 {
			t.Errorf("a wrong token: HTTP %d, want 401", st)
		}
		if got := u.text("#error"); !strings.Contains(got, "not accepted") {
			t.Errorf("a wrong token: %q", got)
		}
		if st := u.open("/console/catalog"); st != 200 || !strings.HasPrefix(u.path(), "/console/login") {
			t.Errorf("after a refused sign-in the catalogue answers HTTP %d at %s", st, u.path())
		}
		trail, err := os.ReadFile(h.trail)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(trail), `"method":"console login"`) {
			t.Error("the refused sign-in is not in the audit trail")
		}
		// Signing in leads back to the page asked for, and signing out
		// ends it.
		u.open("/console/misses")
		u.fill(map[string]string{"token": catalogToken})
		if st := u.click("#login-form button[type=submit]"); st != 200 || u.path() != "/console/misses" {
			t.Errorf("signed in: HTTP %d at %s, want /console/misses", st, u.path())
		}
		if st := u.click("header form button"); st != 200 || u.path() != "/console/login" {
			t.Errorf("signed out: HTTP %d at %s", st, u.path())
		}
		if u.open("/console/misses"); !strings.HasPrefix(u.path(), "/console/login") {
			t.Errorf("after signing out the misses page is at %s", u.path())
		}
	})

	t.Run("no credential configured", func(t *testing.T) {
		open := newHarness(t, true)
		u := open.user(t, browser, "")
		if st := u.open("/console/"); st != 200 || u.path() != "/console/catalog" {
			t.Fatalf("an open console: HTTP %d at %s, want the catalogue", st, u.path())
		}
		if u.text("#who-open") == "" {
			t.Error("an open console does not say so")
		}
		if st := u.open("/console/playground?query=refund&tenant=acme&scopes=*"); st != 200 || len(u.texts("#shortlist tbody tr")) == 0 {
			t.Errorf("an open console's playground: HTTP %d, %d rows", st, len(u.texts("#shortlist tbody tr")))
		}
	})
}
