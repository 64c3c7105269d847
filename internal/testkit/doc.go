// Package testkit groups helpers that only tests import: test databases
// (pgtest), a throwaway certificate authority (testpki), a small Petstore
// API (petstore) and an OpenAI-compatible chat server (chatfake). Nothing
// outside a _test.go file may import them.
//
// May import: codec, core.
//
// (core: retriever, eval, cards, embed, proto, migrations; the rule is
// checked by internal/layout_test.go.)
package testkit
