// Package postgres groups what PostgreSQL mode adds beside the store in
// cards/postgres: the pgvector searcher (pgvec), the change follower that
// keeps a replica current (replica) and the discovery and feedback logs in the
// database (pglog).
//
// May import: access, telemetry, codec, core.
//
// (core: retriever, eval, cards, embed, proto, migrations; the rule is
// checked by internal/layout_test.go.)
package postgres
