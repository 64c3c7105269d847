package ratelimit

import (
	"math"
	"strconv"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
)

// ErrorReason and ErrorDomain name a rate-limit refusal in its
// google.rpc.ErrorInfo, whose metadata says which limit refused: scope
// (caller, tenant or in_flight), class (call or discovery) and limit.
const (
	ErrorReason = "RATE_LIMITED"
	ErrorDomain = "cardex"
)

// RetryAfterMetadata is the gRPC header of a refusal that holds its
// RetryAfterSeconds; the HTTP/JSON API passes it on as the HTTP Retry-After
// header, as the MCP endpoint's 429 has it.
const RetryAfterMetadata = "retry-after"

// RetryAfterSeconds is the time until the bucket that refused holds a token
// again, in whole seconds rounded up, at least 1: a Retry-After value.
func (d *Denial) RetryAfterSeconds() int {
	return int(math.Max(1, math.Ceil(d.RetryAfter.Seconds())))
}

// Metadata is the gRPC header of a refusal (RetryAfterMetadata).
func (d *Denial) Metadata() metadata.MD {
	return metadata.Pairs(RetryAfterMetadata, strconv.Itoa(d.RetryAfterSeconds()))
}

// Status is the gRPC answer to a refused call: ResourceExhausted with the
// delay to wait (google.rpc.RetryInfo) and the limit that refused
// (google.rpc.ErrorInfo), so a client can wait it out or name the limit.
func (d *Denial) Status() *status.Status {
	st := status.New(codes.ResourceExhausted, d.Error())
	info := &errdetails.ErrorInfo{Reason: ErrorReason, Domain: ErrorDomain, Metadata: map[string]string{
		"scope": d.Scope, "class": d.Class.String(), "limit": strconv.FormatFloat(d.Limit, 'g', -1, 64)}}
	if withDetails, err := st.WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(d.RetryAfter)}, info); err == nil {
		st = withDetails
	}
	return st
}

// FromError reads a refusal back from a gRPC error: ok is false unless err
// is ResourceExhausted with a retry delay. Scope, Class and Limit are set
// when the server named the limit (a cardex server does).
func FromError(err error) (d Denial, ok bool) {
	st, isStatus := status.FromError(err)
	if !isStatus || st.Code() != codes.ResourceExhausted {
		return Denial{}, false
	}
	for _, det := range st.Details() {
		switch x := det.(type) {
		case *errdetails.RetryInfo:
			if x.GetRetryDelay() != nil {
				d.RetryAfter, ok = max(x.GetRetryDelay().AsDuration(), time.Millisecond), true
			}
		case *errdetails.ErrorInfo:
			if x.GetReason() == ErrorReason && x.GetDomain() == ErrorDomain {
				m := x.GetMetadata()
				d.Scope = m["scope"]
				if m["class"] == Discovery.String() {
					d.Class = Discovery
				}
				d.Limit, _ = strconv.ParseFloat(m["limit"], 64)
			}
		}
	}
	return d, ok
}
