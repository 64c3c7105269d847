package agents

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/seed0cff8200/cardex/cards"
	"github.com/seed0cff8200/cardex/internal/access/tokens"
	"github.com/seed0cff8200/cardex/internal/codec/apiconv"
	"github.com/seed0cff8200/cardex/internal/codec/toolformat"
	"github.com/seed0cff8200/cardex/internal/execution/gateway"
	"github.com/seed0cff8200/cardex/internal/execution/upstream"
	"github.com/seed0cff8200/cardex/internal/faces/mcpfront"
	pb "github.com/seed0cff8200/cardex/proto/cardex/v1"
	"github.com/seed0cff8200/cardex/retriever"
)

// MaxResultBytes bounds a forwarded result returned over gRPC.
const MaxResultBytes = 32 << 20

// An uncertain outcome (a non-idempotent call that timed out or lost its
// connection after it was sent) is answered with codes.Unknown and an
// ErrorInfo of this reason and domain.
const (
	ReasonUncertain = "OUTCOME_UNCERTAIN"
	ErrorDomain     = "cardex"
)

type execution struct {
	pb.UnimplementedExecutionServiceServer
	gw     *gateway.Gateway
	tokens *tokens.Table
	log    *slog.Logger
}

// caller is the identity of the bearer token in the call's metadata.
func (s *execution) caller(ctx context.Context) (retriever.Caller, error) {
	id, err := s.identity(ctx)
	if err != nil {
		return retriever.Caller{}, err
	}
	return retriever.Caller{Tenant: id.Tenant, Subject: id.Subject, Scopes: id.Scopes}, nil
}

// identity is the token's whole identity, disclosure mode included: the
// one the server's interceptor found, or, served without it, the one of the
// call's metadata.
func (s *execution) identity(ctx context.Context) (tokens.Identity, error) {
	if id, ok := tokens.FromContext(ctx); ok {
		return id, nil
	}
	md, _ := metadata.FromIncomingContext(ctx)
	var header string
	if v := md.Get("authorization"); len(v) > 0 {
		header = v[0]
	}
	id, ok := s.tokens.Authenticate(header)
	switch {
	case !ok && header == "":
		return tokens.Identity{}, status.Error(codes.Unauthenticated, "ExecutionService needs an agent token: authorization: Bearer TOKEN")
	case !ok:
		return tokens.Identity{}, status.Error(codes.Unauthenticated, "unknown agent token")
	}
	return id, nil
}

func (s *execution) SearchTools(ctx context.Context, req *pb.ExecutionServiceSearchToolsRequest) (*pb.ExecutionServiceSearchToolsResponse, error) {
	c, err := s.caller(ctx)
	if err != nil {
		return nil, err
	}
	format, err := toolformat.ParseRequest(req.GetFormat(), req.GetCallId())
	if err != nil {
		return nil, s.status("SearchTools", err)
	}
	out := &pb.ExecutionServiceSearchToolsResponse{}
	if len(req.GetIntents()) > 0 || format != toolformat.None {
		// Ranked as DiscoverTools ranks, and shaped for the provider when
		// asked (as search_tools with a format answers over MCP).
		res, err := s.gw.Discover(ctx, c, req.GetQuery(), req.GetIntents(), int(req.GetLimit()), req.GetNoCompanions())
		if err != nil {
			return nil, s.status("SearchTools", err)
		}
		out.Abstained = res.Abstained
		defs, answer := toolformat.Shape(format, res.Cards(), req.GetCallId())
		for _, d := range defs {
			out.DefinitionsJson = append(out.DefinitionsJson, string(d))
		}
		out.ProviderJson = string(answer)
		for _, r := range gateway.Summaries(res) {
			out.Tools = append(out.Tools, &pb.ToolSummary{Server: r.Server, Name: r.Name, Summary: r.Summary})
			m := &pb.SearchMatch{Confidence: r.Confidence}
			if w := r.CompanionOf; w != nil {
				m.CompanionOf = &pb.ToolRef{Server: w.Server, Name: w.Name}
			}
			for _, i := range r.Intents {
				m.Intents = append(m.Intents, int32(i))
			}
			out.Matches = append(out.Matches, m)
		}
		return out, nil
	}
	rows, err := s.gw.Search(ctx, c, req.GetQuery(), int(req.GetLimit()))
	if err != nil {
		return nil, s.status("SearchTools", err)
	}
	for _, r := range rows {
		out.Tools = append(out.Tools, &pb.ToolSummary{Server: r.Server, Name: r.Name, Summary: r.Summary})
	}
	out.Abstained = req.GetQuery() != "" && len(rows) == 0
	return out, nil
}

func (s *execution) DescribeTool(ctx context.Context, req *pb.ExecutionServiceDescribeToolRequest) (*pb.ExecutionServiceDescribeToolResponse, error) {
	c, err := s.caller(ctx)
	if err != nil {
		return nil, err
	}
	card, err := s.gw.Describe(ctx, c, req.GetName(), req.GetServer())
	var d *gateway.Denial
	if errors.As(err, &d) && d.Ambiguous != nil {
		return &pb.ExecutionServiceDescribeToolResponse{AmbiguousServers: d.Ambiguous}, nil
	}
	if err != nil {
		return nil, s.status("DescribeTool", err)
	}
	return &pb.ExecutionServiceDescribeToolResponse{Card: apiconv.ToolCardToProto(&card, true)}, nil
}

func (s *execution) CallTool(ctx context.Context, req *pb.CallToolRequest) (*pb.CallToolResponse, error) {
	id, err := s.identity(ctx)
	if err != nil {
		return nil, err
	}
	c := retriever.Caller{Tenant: id.Tenant, Subject: id.Subject, Scopes: id.Scopes}
	res, err := s.gw.Call(ctx, c, gateway.Origin{Via: gateway.ViaGRPC, Disclosure: id.Disclosure}, req.GetName(), req.GetServer(), json.RawMessage(req.GetArgumentsJson()))
	if err != nil {
		return nil, s.status("CallTool", err)
	}
	b, err := json.Marshal(res.Result)
	if err != nil {
		return nil, s.status("CallTool", err)
	}
	if len(b) > MaxResultBytes {
		return nil, status.Errorf(codes.ResourceExhausted, "the result of %s/%s is %d bytes; the limit is %d", res.Tool.Server, res.Tool.Name, len(b), MaxResultBytes)
	}
	out := &pb.CallToolResponse{
		ExecutionId: res.ExecutionID,
		Tool:        &pb.ToolRef{Server: res.Tool.Server, Name: res.Tool.Name},
		ResultJson:  string(b),
		IsError:     res.Result.IsError,
	}
	if q := res.Query; q != nil {
		out.Query = &pb.QueryReceipt{RowCount: int64(q.RowCount), Complete: q.Complete, IncompleteReason: q.IncompleteReason, Error: q.Error}
	}
	return out, nil
}

func (s *execution) ListTools(ctx context.Context, req *pb.ExecutionServiceListToolsRequest) (*pb.ExecutionServiceListToolsResponse, error) {
	id, err := s.identity(ctx)
	if err != nil {
		return nil, err
	}
	list, _, err := mcpfront.List(ctx, s.gw, id)
	if err != nil {
		return nil, s.status("ListTools", err)
	}
	page, next, err := mcpfront.Page(list, id.Disclosure, req.GetCursor(), mcpfront.DefaultPageSize)
	if err != nil {
		return nil, s.status("ListTools", err)
	}
	out := &pb.ExecutionServiceListToolsResponse{Disclosure: id.Disclosure, NextCursor: next}
	for _, l := range page {
		t := &pb.ListedTool{Name: l.Tool.Name, Description: l.Tool.Description}
		if l.Card != nil {
			t.Tool = &pb.ToolRef{Server: l.Card.Server, Name: l.Card.Name}
			t.Annotations = apiconv.ToolCardToProto(l.Card, false).GetAnnotations()
		} else if a := l.Tool.Annotations; a != nil {
			t.Annotations = &pb.Annotations{Destructive: a.DestructiveHint, OpenWorld: a.OpenWorldHint}
			if a.ReadOnlyHint {
				t.Annotations.ReadOnly = &a.ReadOnlyHint
			}
			if a.IdempotentHint {
				t.Annotations.Idempotent = &a.IdempotentHint
			}
		}
		if t.InputSchema, err = schemaText(l.Tool.InputSchema); err == nil {
			t.OutputSchema, err = schemaText(l.Tool.OutputSchema)
		}
		if err != nil {
			return nil, s.status("ListTools", err)
		}
		out.Tools = append(out.Tools, t)
	}
	return out, nil
}

// schemaText is a listed schema as JSON text ("" for none).
func schemaText(v any) (string, error) {
	if v == nil {
		return "", nil
	}
	if raw, ok := v.(json.RawMessage); ok {
		return string(raw), nil
	}
	b, err := json.Marshal(v)
	return string(b), err
}

// status maps the gateway's errors to gRPC codes.
func (s *execution) status(method string, err error) error {
	var d *gateway.Denial
	var ce *upstream.CallError
	switch {
	case errors.As(err, &d):
		switch d.Outcome {
		case upstream.OutcomeDeniedUnknown:
			return status.Error(codes.NotFound, d.Error())
		case upstream.OutcomeDeniedAmbiguous, gateway.OutcomeDeniedClosedView:
			return status.Error(codes.FailedPrecondition, d.Error())
		default:
			return status.Error(codes.InvalidArgument, d.Error())
		}
	case errors.As(err, &ce):
		switch ce.Kind {
		case upstream.KindNotRegistered:
			return status.Error(codes.FailedPrecondition, ce.Error())
		case upstream.KindTimeout:
			return status.Error(codes.DeadlineExceeded, ce.Error())
		case upstream.KindUnreachable:
			return status.Error(codes.Unavailable, ce.Error())
		case upstream.KindTooLarge:
			return status.Error(codes.ResourceExhausted, ce.Error())
		case upstream.KindUncertain:
			// Unknown, and said so in a machine-readable way: the call may
			// or may not have taken effect.
			st, derr := status.New(codes.Unknown, ce.Error()).WithDetails(&errdetails.ErrorInfo{Reason: ReasonUncertain, Domain: ErrorDomain})
			if derr != nil {
				return status.Error(codes.Unknown, ce.Error())
			}
			return st.Err()
		default:
			return status.Error(codes.Unknown, ce.Error())
		}
	case errors.Is(err, cards.ErrInvalid):
		return status.Error(codes.InvalidArgument, err.Error())
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, err.Error())
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, err.Error())
	}
	s.log.Error("internal error", "method", method, "err", err)
	return status.Error(codes.Internal, "internal error")
}
