// Package sources groups where cards come from: an MCP server's tools/list
// (mcpimport), an OpenAPI document (openapiimport), a PostgreSQL database's
// views (sqlimport), and the turn of an import into changes to one server
// namespace (catalogsync).
//
// May import: execution, postgres, access, telemetry, codec, core.
//
// (core: retriever, eval, cards, embed, proto, migrations; the rule is
// checked by internal/layout_test.go.)
package sources
