package server

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/seed0cff8200/cardex/cards"
)

// utf8Codec is gRPC's protobuf codec with one difference: a request it
// cannot decode is answered InvalidArgument, not Internal — one whose
// string field holds invalid UTF-8 naming the field, any other naming the
// request and its message type. gRPC turns every codec error into
// Internal, so the codec accepts such a message as empty and remembers why
// it is not; the first interceptor (or a stream's RecvMsg) finds it and
// refuses the call before any handler runs.
type utf8Codec struct {
	base encoding.CodecV2
	bad  sync.Map // request message (pointer) → error (*cards.FieldError)
	// held counts the entries of bad, so that a call finds it empty
	// without a lookup (the usual case: every request decoded).
	held atomic.Int64
}

func newUTF8Codec() *utf8Codec {
	return &utf8Codec{base: encoding.GetCodecV2(grpcproto.Name)}
}

func (c *utf8Codec) Name() string { return grpcproto.Name }

func (c *utf8Codec) Marshal(v any) (mem.BufferSlice, error) { return c.base.Marshal(v) }

func (c *utf8Codec) Unmarshal(data mem.BufferSlice, v any) error {
	err := c.base.Unmarshal(data, v)
	if err == nil {
		return nil
	}
	m, ok := v.(proto.Message)
	if !ok {
		return err
	}
	md := m.ProtoReflect().Descriptor()
	bad := cards.Invalid("request", "is not a valid protobuf encoding of %s: %v", md.FullName(), err)
	if field := invalidUTF8Field(data.Materialize(), md); field != "" {
		bad = cards.Invalid(field, "is not valid UTF-8")
	}
	proto.Reset(m)
	c.bad.Store(v, bad)
	c.held.Add(1)
	return nil
}

// refused returns the InvalidArgument error for a message the codec could
// not decode, and forgets it.
func (c *utf8Codec) refused(m any) error {
	// The request's own Unmarshal happened before, its count is seen.
	if c.held.Load() == 0 {
		return nil
	}
	bad, ok := c.bad.LoadAndDelete(m)
	if !ok {
		return nil
	}
	c.held.Add(-1)
	return toStatus(nil, "", bad.(error))
}

func (c *utf8Codec) unary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, next grpc.UnaryHandler) (any, error) {
	if err := c.refused(req); err != nil {
		return nil, err
	}
	return next(ctx, req)
}

func (c *utf8Codec) stream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, next grpc.StreamHandler) error {
	return next(srv, &utf8Stream{ServerStream: ss, c: c})
}

type utf8Stream struct {
	grpc.ServerStream
	c *utf8Codec
}

func (s *utf8Stream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	return s.c.refused(m)
}

// invalidUTF8Field walks a protobuf message in wire form and returns the
// path of its first string field that is not valid UTF-8
// ("caller.session_id", "cards[2].summary"), or "".
func invalidUTF8Field(b []byte, md protoreflect.MessageDescriptor) string {
	seen := map[protowire.Number]int{}
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return ""
		}
		b = b[n:]
		fd := md.Fields().ByNumber(num)
		if typ != protowire.BytesType || fd == nil {
			if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
				return ""
			}
			b = b[n:]
			continue
		}
		v, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return ""
		}
		b = b[n:]
		name := string(fd.Name())
		if fd.IsList() {
			name += "[" + strconv.Itoa(seen[num]) + "]"
			seen[num]++
		}
		switch fd.Kind() {
		case protoreflect.StringKind:
			if !utf8.Valid(v) {
				return name
			}
		case protoreflect.MessageKind:
			if sub := invalidUTF8Field(v, fd.Message()); sub != "" {
				return name + "." + sub
			}
		}
	}
	return ""
}
