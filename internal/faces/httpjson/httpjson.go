// Package httpjson serves every RPC of cardex's gRPC server as JSON over
// HTTP, on the HTTP listener beside /mcp, /metrics and the console, and the
// OpenAPI document of that API at /openapi.json.
//
// The transcoder is Vanguard (connectrpc.com/vanguard) over the very
// grpc.Server that answers gRPC: a request is turned into a gRPC call and
// served in-process by grpc-go with the server's interceptors — the same
// authentication, caller binding, rate and concurrency limits, server-side
// deadline, metrics and error map as over gRPC. Nothing is written by hand
// per RPC. The wire format is the Connect protocol's: POST
// /PACKAGE.SERVICE/METHOD with Content-Type application/json and the request
// as proto3 JSON; errors are {"code", "message", "details"} with the HTTP
// status of the gRPC code. Reflection stays gRPC-only (it is a bidirectional
// stream).
package httpjson

import (
	_ "embed"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"connectrpc.com/connect"
	"connectrpc.com/vanguard"
	"connectrpc.com/vanguard/vanguardgrpc"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// OpenAPIPath is where the OpenAPI document is served.
const OpenAPIPath = "/openapi.json"

// OpenAPI is the OpenAPI (2.0) document of the HTTP/JSON API, generated from
// the protos by protoc-gen-openapiv2 (scripts/gen-proto).
//
//go:embed cardex.swagger.json
var OpenAPI []byte

// gRPC-only services: reflection is a bidirectional stream, which the
// Connect protocol carries only over HTTP/2 and no JSON client needs.
var grpcOnly = []string{"grpc.reflection.v1.ServerReflection", "grpc.reflection.v1alpha.ServerReflection"}

// Mux is where the handlers go (an *http.ServeMux).
type Mux interface {
	Handle(pattern string, h http.Handler)
}

// Register serves every service of gs but reflection at /SERVICE/ on mux,
// and the OpenAPI document at OpenAPIPath. maxMessageBytes bounds a request
// or response message, as the gRPC server's own limit does. It returns the
// services it serves, sorted.
func Register(mux Mux, gs *grpc.Server, maxMessageBytes uint32) ([]string, error) {
	t, err := vanguardgrpc.NewTranscoder(gs, vanguard.WithCodec(jsonCodec),
		vanguard.WithDefaultServiceOptions(vanguard.WithMaxMessageBufferBytes(maxMessageBytes)))
	if err != nil {
		return nil, fmt.Errorf("HTTP/JSON transcoder: %w", err)
	}
	var served []string
	for name := range gs.GetServiceInfo() {
		if slices.Contains(grpcOnly, name) {
			continue
		}
		served = append(served, name)
		mux.Handle("/"+name+"/", connectUnary(t))
	}
	slices.Sort(served)
	mux.Handle(OpenAPIPath, http.HandlerFunc(serveOpenAPI))
	return served, nil
}

// connectUnary marks a POST without a Connect-Protocol-Version header as a
// Connect unary call. Connect servers accept such calls (the header is
// optional in the protocol, so `curl -H 'Content-Type: application/json'`
// works); Vanguard would take them for REST calls, for which cardex has no
// routes.
func connectUnary(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.Header.Get("Connect-Protocol-Version") == "" &&
			!strings.HasPrefix(r.Header.Get("Content-Type"), "application/grpc") &&
			!strings.HasPrefix(r.Header.Get("Content-Type"), "application/connect+") {
			r.Header.Set("Connect-Protocol-Version", "1")
		}
		h.ServeHTTP(w, r)
	})
}

// jsonCodec is proto3 JSON as the Connect protocol's Go implementation
// writes it: fields at their zero value are left out (so no field is ever
// null, as the OpenAPI document says). A request field the message does not
// have is refused, naming it (protojson's own check): a misspelt field
// ("topk") would otherwise be dropped silently and the request answered
// with the default, and a client newer than the server learns which field
// this server does not know instead of getting an answer that ignored it.
func jsonCodec(res vanguard.TypeResolver) vanguard.Codec {
	return requestJSON{&vanguard.JSONCodec{
		MarshalOptions:   protojson.MarshalOptions{Resolver: res},
		UnmarshalOptions: protojson.UnmarshalOptions{Resolver: res},
	}}
}

// requestJSON answers a request body that is not the request message in
// JSON with InvalidArgument, as the gRPC server answers a bad field (the
// transcoder would answer unknown, 500).
type requestJSON struct{ *vanguard.JSONCodec }

func (c requestJSON) Unmarshal(data []byte, msg proto.Message) error {
	if err := c.JSONCodec.Unmarshal(data, msg); err != nil {
		return connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("request body is not a %s in JSON: %w", msg.ProtoReflect().Descriptor().FullName(), err))
	}
	return nil
}

func serveOpenAPI(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-cache")
	_, _ = w.Write(OpenAPI)
}
