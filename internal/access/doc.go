// Package access groups who may do what, and how often: service tokens and
// JWTs (auth), agent tokens (tokens), rate limits (ratelimit) and the audit
// trail of writes and decisions (audittrail).
//
// May import: codec, core.
//
// (core: retriever, eval, cards, embed, proto, migrations; the rule is
// checked by internal/layout_test.go.)
package access
