// Package codec groups shapes of data at the edges, with no behaviour of their
// own: protobuf to plain types (apiconv), the one JSON shape of a card
// (cardjson), PostgreSQL values as JSON (pgjson), the MCP and model-provider
// names of a tool (toolname) and a shortlist in a provider's tool shapes
// (toolformat).
//
// May import: core.
//
// (core: retriever, eval, cards, embed, proto, migrations; the rule is
// checked by internal/layout_test.go.)
package codec
