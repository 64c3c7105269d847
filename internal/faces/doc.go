// Package faces groups what callers talk to: the gRPC API (server), the same
// API as JSON over HTTP (httpjson), the MCP front (mcpfront), the
// agent-facing surfaces that share one gateway (agents), the web console
// (console), the HTTP listener's answer to a client of the other
// protocol, plain HTTP or TLS (tlsguard), and the Host policy every HTTP
// surface shares (hostguard). A face authenticates, converts its wire
// format to plain Go types and calls the layers below; it holds no policy of
// its own.
//
// May import: ops, sources, execution, postgres, access, telemetry, codec, core.
//
// (core: retriever, eval, cards, embed, proto, migrations; the rule is
// checked by internal/layout_test.go.)
package faces
