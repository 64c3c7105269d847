package retriever

import (
	"fmt"
	"unicode"
	"unicode/utf8"

	"github.com/seed0cff8200/cardex/cards"
)

// Caller field limits (code points). The subject is hashed before it is
// logged and the session id is logged as it is, so both are bounded; a
// scope is at most as long as a card's.
const (
	MaxSubjectLen   = 256
	MaxSessionIDLen = 128
)

// ValidateCaller checks the caller part of a request: the tenant, the
// subject, the session id and the scopes, each against its limit. Every
// request path of the retriever calls it.
func ValidateCaller(c Caller) error { return validateCaller(c) }

// checkCallerFields checks what validateCaller leaves out: lengths, UTF-8
// and control characters of the subject, session id and scopes.
func checkCallerFields(c Caller) error {
	if err := callerText("caller.subject", c.Subject, MaxSubjectLen); err != nil {
		return err
	}
	if err := callerText("caller.session_id", c.SessionID, MaxSessionIDLen); err != nil {
		return err
	}
	for i, s := range c.Scopes {
		if s != "" && callerText("", s, cards.MaxScopeLen) == nil {
			continue // the field is named only for a scope that is refused
		}
		field := fmt.Sprintf("caller.scopes[%d]", i)
		if s == "" {
			return cards.Invalid(field, "is empty")
		}
		return callerText(field, s, cards.MaxScopeLen)
	}
	return nil
}

func callerText(field, s string, limit int) error {
	if !utf8.ValidString(s) {
		return cards.Invalid(field, "is not valid UTF-8")
	}
	if n := utf8.RuneCountInString(s); n > limit {
		return cards.Invalid(field, "is %d characters; the limit is %d", n, limit)
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return cards.Invalid(field, "contains a control character (U+%04X)", r)
		}
	}
	return nil
}
