package retriever_test

import (
	"testing"

	"github.com/seed0cff8200/cardex/cards"
	"github.com/seed0cff8200/cardex/retriever"
)

func TestScopeCovers(t *testing.T) {
	tests := []struct {
		held, required string
		want           bool
	}{
		// "*" covers everything.
		{"*", "billing:read", true},
		{"*", "billing", true},
		{"*", "a:b:c", true},
		// "p:*" covers every scope that starts with "p:".
		{"billing:*", "billing:read", true},
		{"billing:*", "billing:admin", true},
		{"billing:*", "billing:invoices:write", true},
		{"billing:*", "billing", false},       // the bare prefix is not under it
		{"billing:*", "billingx:read", false}, // a longer word is not under it
		{"billing:*", "xbilling:read", false},
		{"billing:*", "Billing:read", false}, // scopes are case-sensitive
		{"bill:*", "billing:read", false},    // no partial-word prefixes
		{"billing:read:*", "billing:read:own", true},
		{"billing:read:*", "billing:write:own", false},
		{"billing:read:*", "billing:read", false},
		// No other pattern language: "*" inside or "**" is literal.
		{"billing*", "billing:read", false},
		{"billing:**", "billing:read", false},
		{"*:read", "billing:read", false},
		{"billing:r*", "billing:read", false},
		{"billing:*", "billing:*", true}, // literal equality still holds
		// Exact match.
		{"billing:read", "billing:read", true},
		{"billing:read", "billing:readx", false},
		{"billing:read", "billing:rea", false},
		{"billing:read", "billing:admin", false},
		{"billing", "billing", true},
		{"billing", "billing:read", false},
		{"", "billing:read", false},
	}
	for _, tc := range tests {
		if got := retriever.ScopeCovers(tc.held, tc.required); got != tc.want {
			t.Errorf("ScopeCovers(%q, %q) = %v, want %v", tc.held, tc.required, got, tc.want)
		}
	}
}

func TestHoldsAll(t *testing.T) {
	tests := []struct {
		name           string
		held, required []string
		want           bool
	}{
		{"nothing required, nothing held", nil, nil, true},
		{"nothing required", []string{"billing:read"}, nil, true},
		{"empty required slice", nil, []string{}, true},
		{"required but nothing held", nil, []string{"billing:read"}, false},
		{"exact", []string{"billing:read"}, []string{"billing:read"}, true},
		{"one of two held", []string{"billing:read"}, []string{"billing:read", "billing:write"}, false},
		{"both held exactly", []string{"billing:write", "billing:read"}, []string{"billing:read", "billing:write"}, true},
		{"wildcard covers both", []string{"billing:*"}, []string{"billing:read", "billing:admin"}, true},
		{"wildcard covers one, other missing", []string{"billing:*"}, []string{"billing:read", "crm:read"}, false},
		{"two wildcards", []string{"crm:*", "billing:*"}, []string{"billing:read", "crm:write"}, true},
		{"star", []string{"*"}, []string{"billing:read", "crm:write", "admin"}, true},
		{"star among others", []string{"crm:read", "*"}, []string{"billing:admin"}, true},
		{"wrong prefix", []string{"bill:*"}, []string{"billing:read"}, false},
		{"bare prefix not covered", []string{"billing:*"}, []string{"billing"}, false},
		{"longer word not covered", []string{"billing:*"}, []string{"billingx:read"}, false},
		{"duplicates required", []string{"a"}, []string{"a", "a"}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := retriever.HoldsAll(tc.held, tc.required); got != tc.want {
				t.Errorf("HoldsAll(%q, %q) = %v, want %v", tc.held, tc.required, got, tc.want)
			}
		})
	}
}

func TestAllowed(t *testing.T) {
	card := func(mod func(*cards.Card)) *cards.Card {
		c := &cards.Card{
			Tenant: "acme", Server: "billing", Name: "refund", Summary: "Refund a payment.",
			Status: cards.StatusActive, RequiredScopes: []string{"billing:write"},
		}
		if mod != nil {
			mod(c)
		}
		return c
	}
	caller := func(tenant string, scopes ...string) retriever.Caller {
		return retriever.Caller{Tenant: tenant, Subject: "u1", Scopes: scopes}
	}
	tests := []struct {
		name   string
		caller retriever.Caller
		card   *cards.Card
		want   bool
	}{
		{"exact scope", caller("acme", "billing:write"), card(nil), true},
		{"wildcard scope", caller("acme", "billing:*"), card(nil), true},
		{"star", caller("acme", "*"), card(nil), true},
		{"missing scope", caller("acme", "billing:read"), card(nil), false},
		{"no scopes", caller("acme"), card(nil), false},
		{"wrong prefix wildcard", caller("acme", "bill:*"), card(nil), false},
		{"no scopes required, none held", caller("acme"), card(func(c *cards.Card) { c.RequiredScopes = nil }), true},
		{"two required, one held", caller("acme", "billing:write"),
			card(func(c *cards.Card) { c.RequiredScopes = []string{"billing:write", "payments:write"} }), false},
		{"two required, both held", caller("acme", "payments:write", "billing:*"),
			card(func(c *cards.Card) { c.RequiredScopes = []string{"billing:write", "payments:write"} }), true},
		{"tenant mismatch", caller("globex", "*"), card(nil), false},
		{"tenant case differs", caller("ACME", "*"), card(nil), false},
		{"empty caller tenant", caller("", "*"), card(nil), false},
		{"empty caller tenant and empty card tenant", caller("", "*"), card(func(c *cards.Card) { c.Tenant = "" }), false},
		{"pending", caller("acme", "*"), card(func(c *cards.Card) { c.Status = cards.StatusPending }), false},
		{"revoked", caller("acme", "*"), card(func(c *cards.Card) { c.Status = cards.StatusRevoked }), false},
		{"status unset", caller("acme", "*"), card(func(c *cards.Card) { c.Status = "" }), false},
		{"nil card", caller("acme", "*"), nil, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := retriever.Allowed(tc.caller, tc.card); got != tc.want {
				t.Errorf("Allowed = %v, want %v", got, tc.want)
			}
		})
	}
}
