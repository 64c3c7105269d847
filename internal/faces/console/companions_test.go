package console_test

import (
	"context"
	"net/url"
	"strings"
	"testing"

	"github.com/seed0cff8200/cardex/cards"
)

// The playground shows companions as the API answers them: marked "used
// with", only ones the caller may use, none when asked not to.
func TestConsolePlaygroundCompanions(t *testing.T) {
	h := newHarness(t, false)
	// Sessions that looked an invoice up, then worked out a proration
	// (billing:read: the support bot may use it) and exported a dataset
	// (analytics:admin: it may not).
	session := []cards.Key{
		{Tenant: "acme", Server: "billing", Name: "get_invoice"},
		{Tenant: "acme", Server: "billing", Name: "calculate_proration"},
		{Tenant: "acme", Server: "analytics", Name: "export_dataset"},
	}
	var uses []cards.CoUse
	for range 20 {
		uses = append(uses, cards.CoUse{Tools: session})
	}
	if _, err := h.ret.RecordCoUse(context.Background(), uses); err != nil {
		t.Fatal(err)
	}
	browser := newBrowser(t)
	q := url.Values{"query": {"show invoice INV-2024-0042 with its line items"}, "top_k": {"5"}}
	for _, tc := range []struct {
		name, token, scopes string
		companion           string // the one expected, "" for none
		absent              []string
	}{
		{"admin", adminToken, "*", "analytics/export_dataset", nil},
		{"bound support bot", supportToken, "", "billing/calculate_proration", []string{"export_dataset"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := h.user(t, browser, tc.token)
			v := url.Values{}
			for k, x := range q {
				v[k] = x
			}
			v.Set("tenant", "acme")
			if tc.scopes != "" {
				v.Set("scopes", tc.scopes)
			}
			if st := u.open("/console/playground?" + v.Encode()); st != 200 {
				t.Fatalf("playground: HTTP %d", st)
			}
			chips := strings.Join(u.texts("#shortlist .chip.companion"), "; ")
			if !strings.Contains(chips, "used with billing/get_invoice") {
				t.Errorf("companion chips %q, want one used with billing/get_invoice", chips)
			}
			rows := strings.Join(u.texts("#shortlist tbody th"), "\n")
			if !strings.Contains(rows, tc.companion) {
				t.Errorf("shortlist %q lacks the companion %s", rows, tc.companion)
			}
			page := u.html()
			for _, a := range tc.absent {
				if strings.Contains(page, a) {
					t.Errorf("the page mentions %s", a)
				}
			}
			v.Set("no_companions", "1")
			u.open("/console/playground?" + v.Encode())
			if got := u.texts("#shortlist .chip.companion"); len(got) > 0 {
				t.Errorf("no companions asked, chips %q", got)
			}
			if !js[bool](u, `document.getElementById("p-nocomp").checked`) {
				t.Errorf("the no-companions box is not checked on the answer's page")
			}
		})
	}
}
