// Package execution groups what runs a tool call after it is authorized: the
// gateway every agent surface shares (gateway), the upstreams file and MCP
// connections (upstream), the REST executor (rest) and the SQL gateway
// (sqlquery).
//
// May import: access, telemetry, codec, core.
//
// (core: retriever, eval, cards, embed, proto, migrations; the rule is
// checked by internal/layout_test.go.)
package execution
