// Package telemetry groups what cardex records about its own work: Prometheus
// series (metrics), the discovery log (discoverylog) and the false-negative
// signals of the learning loop (feedback).
//
// May import: codec, core.
//
// (core: retriever, eval, cards, embed, proto, migrations; the rule is
// checked by internal/layout_test.go.)
package telemetry
