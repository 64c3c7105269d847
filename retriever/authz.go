package retriever

import (
	"strings"

	"github.com/seed0cff8200/cardex/cards"
)

// Caller is who asks: tenant, subject and the scopes it holds.
type Caller struct {
	Tenant    string
	Subject   string
	Scopes    []string
	SessionID string
}

// ScopeCovers reports whether one held scope covers a required scope.
// "*" covers everything; "p:*" covers every scope that starts with "p:";
// anything else covers only itself. There is no other pattern language.
func ScopeCovers(held, required string) bool {
	switch {
	case held == "*":
		return true
	case strings.HasSuffix(held, ":*"):
		return strings.HasPrefix(required, held[:len(held)-1])
	default:
		return held == required
	}
}

// HoldsAll reports whether the held scopes cover every required scope.
func HoldsAll(held, required []string) bool {
	for _, r := range required {
		ok := false
		for _, h := range held {
			if ScopeCovers(h, r) {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

// Allowed is the authorization gate: the card belongs to the caller's
// tenant, is active, and the caller holds every required scope.
func Allowed(c Caller, card *cards.Card) bool {
	return card != nil && c.Tenant != "" && card.Tenant == c.Tenant &&
		card.Status == cards.StatusActive && HoldsAll(c.Scopes, card.RequiredScopes)
}
