package cards

import (
	"errors"
	"fmt"
)

// Sentinel errors. Backends wrap them; callers test with errors.Is.
var (
	// ErrNotFound: no such card (or, at the API edge, none the caller may see).
	ErrNotFound = errors.New("not found")
	// ErrConflict: the expected version does not match the stored one.
	ErrConflict = errors.New("version conflict")
	// ErrInvalid: the input breaks a rule; see *FieldError for which.
	ErrInvalid = errors.New("invalid argument")
	// ErrUnavailable: the backing store cannot be reached.
	ErrUnavailable = errors.New("store unavailable")
)

// FieldError names the field that broke a rule and the rule itself.
type FieldError struct {
	// Item identifies the card in a batch ("cards[3] billing/refund"), if any.
	Item string
	// Field is the offending field, e.g. "summary" or "aliases[2]".
	Field string
	// Msg says what is wrong, including the limit.
	Msg string
}

func (e *FieldError) Error() string {
	if e.Item != "" {
		return fmt.Sprintf("%s: %s: %s", e.Item, e.Field, e.Msg)
	}
	return fmt.Sprintf("%s: %s", e.Field, e.Msg)
}

// Unwrap makes errors.Is(err, ErrInvalid) true.
func (e *FieldError) Unwrap() error { return ErrInvalid }

// Invalid builds a *FieldError.
func Invalid(field, format string, args ...any) *FieldError {
	return &FieldError{Field: field, Msg: fmt.Sprintf(format, args...)}
}
