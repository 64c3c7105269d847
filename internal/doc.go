// Package internal holds what is not cardex's API, grouped by concern. Each
// group is a folder with a doc.go that says what it holds and which groups
// its packages may import; internal/layout_test.go checks every import of
// the module against those lines. From the top down:
//
//	faces                   what callers talk to (gRPC, MCP, console)
//	ops, sources            operator tooling; where cards come from
//	execution, postgres     running tool calls; PostgreSQL mode
//	access, telemetry       who may do what; what cardex records
//	codec                   data shapes at the edges
//	testkit                 helpers that only tests import
//
// Above them sits cmd/cardex (wiring only), below them the core: retriever
// and eval, then cards and embed. Imports only ever point down.
package internal
