// Package cardexv1 holds the generated gRPC API of cardex.
package cardexv1

//go:generate ../../../scripts/gen-proto
