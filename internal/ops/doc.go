// Package ops groups tooling for operators and evaluation jobs that the CLI
// and the console drive: the catalogue linter (lint), evaluation against a
// running server (evalremote), the load generator behind `cardex bench`
// (loadgen), the client's wait for a server's rate limits (ratewait) and the
// binary's version (buildinfo).
//
// May import: execution, postgres, access, telemetry, codec, core.
//
// (core: retriever, eval, cards, embed, proto, migrations; the rule is
// checked by internal/layout_test.go.)
package ops
