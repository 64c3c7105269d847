// Package cardexv1 holds the generated gRPC API of cardex.
package cardexv1

//go:generate sh -c "cd ../../.. && PATH=$(go env GOPATH)/bin:$PATH buf lint && PATH=$(go env GOPATH)/bin:$PATH buf generate"
