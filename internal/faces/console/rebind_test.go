package console_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/seed0cff8200/cardex/cards"
	"github.com/seed0cff8200/cardex/cards/embedded"
	"github.com/seed0cff8200/cardex/embed"
	"github.com/seed0cff8200/cardex/internal/faces/console"
	"github.com/seed0cff8200/cardex/retriever"
)

// TestCSRFDoesNotTrustHost: a DNS-rebinding page (its name resolving to
// the console's loopback address) posts a form whose Origin and Host both
// name its own site, with the CSRF cookie and value it read from a page it
// loaded the same way. The CSRF check compared the Origin with the Host,
// so the write went through; now the Origin must be one of the console's
// own (a loopback name on its port, or a configured name), whatever Host
// says. The console is served here without the listener's Host check
// (hostguard), to test the CSRF check on its own.
func TestCSRFDoesNotTrustHost(t *testing.T) {
	ctx := context.Background()
	store, err := embedded.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	if _, err := store.Put(ctx, []cards.Card{{Tenant: "acme", Server: "billing", Name: "issue_refund", Summary: "Refund a payment."}}); err != nil {
		t.Fatal(err)
	}
	ret, err := retriever.New(ctx, store, embed.NewHashed(embed.DefaultDim), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ret.Close() })
	web, err := console.New(console.Config{Store: store, Retriever: ret}) // no credential: open, on loopback
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(web)
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

	post := func(host, origin, alias string) int {
		t.Helper()
		page, err := http.NewRequest(http.MethodGet, srv.URL+"/console/cards/acme/billing/issue_refund", nil)
		if err != nil {
			t.Fatal(err)
		}
		page.Host = host
		resp, err := client.Do(page)
		if err != nil {
			t.Fatal(err)
		}
		html, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		// A card that requires no scope says who may use it (issue 20, finding 1).
		if resp.StatusCode == http.StatusOK && !strings.Contains(string(html), "none: every caller of acme may use it") {
			t.Errorf("the card page does not say that the card is open to every caller of its tenant")
		}
		var csrf *http.Cookie
		for _, ck := range resp.Cookies() {
			if ck.Name == "cardex_console_csrf" {
				csrf = ck
			}
		}
		if resp.StatusCode != http.StatusOK || csrf == nil {
			t.Fatalf("card page with Host %s: HTTP %d, cookies %v", host, resp.StatusCode, resp.Cookies())
		}
		c, err := store.Get(ctx, cards.Key{Tenant: "acme", Server: "billing", Name: "issue_refund"})
		if err != nil {
			t.Fatal(err)
		}
		form := url.Values{"csrf": {csrf.Value}, "version": {strconv.FormatInt(c.Version, 10)}, "alias": {alias}}
		req, err := http.NewRequest(http.MethodPost, srv.URL+"/console/cards/acme/billing/issue_refund/aliases", strings.NewReader(form.Encode()))
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", origin)
		req.AddCookie(csrf)
		resp, err = client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	rebind := "rebind.example:" + u.Port()
	if st := post(rebind, "http://"+rebind, "forged by a rebinding page"); st != http.StatusForbidden {
		t.Errorf("a form from http://%s: HTTP %d, want 403", rebind, st)
	}
	if st := post(u.Host, "http://localhost:1", "from another local port"); st != http.StatusForbidden {
		t.Errorf("a form from another loopback port: HTTP %d, want 403", st)
	}
	if st := post(u.Host, "http://"+u.Host, "written here"); st != http.StatusSeeOther && st != http.StatusOK {
		t.Errorf("a form from the console's own origin: HTTP %d", st)
	}
	c, err := store.Get(ctx, cards.Key{Tenant: "acme", Server: "billing", Name: "issue_refund"})
	if err != nil || !slices.Equal(c.Aliases, []string{"written here"}) {
		t.Fatalf("aliases %v, %v: want only the console's own write", c.Aliases, err)
	}
}
