package server

import (
	"context"
	"log/slog"
	"time"

	"github.com/google/uuid"

	"github.com/seed0cff8200/cardex/cards"
	"github.com/seed0cff8200/cardex/internal/apiconv"
	"github.com/seed0cff8200/cardex/internal/discoverylog"
	pb "github.com/seed0cff8200/cardex/proto/cardex/v1"
	"github.com/seed0cff8200/cardex/retriever"
)

type discovery struct {
	pb.UnimplementedDiscoveryServiceServer
	ret  *retriever.Retriever
	dlog *discoverylog.Log
	log  *slog.Logger
}

func (s *discovery) DiscoverTools(ctx context.Context, req *pb.DiscoverToolsRequest) (*pb.DiscoverToolsResponse, error) {
	start := time.Now()
	caller := apiconv.CallerFromProto(req.GetCaller())
	r := retriever.Request{
		Caller: caller,
		Query:  req.GetQuery(),
		TopK:   int(req.GetTopK()),
		Fusion: req.GetFusion(),
	}
	if req.Alpha != nil {
		r.Alpha, r.AlphaSet = req.GetAlpha(), true
	}
	for _, ref := range req.GetAlwaysLoad() {
		r.AlwaysLoad = append(r.AlwaysLoad, cards.Key{Server: ref.GetServer(), Name: ref.GetName()})
	}
	res, err := s.ret.Discover(ctx, r)
	if err != nil {
		return nil, toStatus(s.log, "DiscoverTools", err)
	}
	out := &pb.DiscoverToolsResponse{
		DiscoveryId:    uuid.NewString(),
		CandidateCount: int32(res.CandidateCount),
		Degraded:       res.Degraded,
		Tokens: &pb.TokenEstimate{
			ShortlistTokens: res.ShortlistTokens,
			CatalogTokens:   res.CatalogTokens,
			Method:          retriever.TokenMethod,
		},
	}
	logged := make([]discoverylog.Returned, 0, len(res.Tools))
	for _, t := range res.Tools {
		out.Tools = append(out.Tools, &pb.DiscoveredTool{
			Card: apiconv.CardToProto(&t.Card, true),
			Scores: &pb.Scores{
				Lexical:      t.Scores.Lexical,
				Semantic:     t.Scores.Semantic,
				Fused:        t.Scores.Score,
				LexicalRank:  int32(t.Scores.LexicalRank),
				SemanticRank: int32(t.Scores.SemanticRank),
			},
			MatchedFields: t.Scores.Fields,
			Reason:        t.Reason,
			Pinned:        t.Pinned,
			Tokens:        int32(t.Tokens),
		})
		logged = append(logged, discoverylog.Returned{Server: t.Card.Server, Name: t.Card.Name, Score: t.Scores.Score, Pinned: t.Pinned})
	}
	if s.dlog != nil {
		entry := discoverylog.Entry{
			ID:             out.DiscoveryId,
			Time:           start.UTC(),
			Tenant:         caller.Tenant,
			SessionID:      caller.SessionID,
			TopK:           r.TopK,
			Returned:       logged,
			CandidateCount: res.CandidateCount,
			LatencyMS:      float64(time.Since(start).Microseconds()) / 1000,
		}
		if entry.TopK == 0 {
			entry.TopK = retriever.DefaultTopK
		}
		if err := s.dlog.Append(entry, caller.Subject, r.Query); err != nil {
			s.log.Warn("discovery log append failed", "err", err)
		}
	}
	return out, nil
}

func (s *discovery) SearchTools(ctx context.Context, req *pb.SearchToolsRequest) (*pb.SearchToolsResponse, error) {
	rows, next, err := s.ret.Search(ctx, apiconv.CallerFromProto(req.GetCaller()), req.GetQuery(), int(req.GetPageSize()), req.GetCursor())
	if err != nil {
		return nil, toStatus(s.log, "SearchTools", err)
	}
	out := &pb.SearchToolsResponse{NextCursor: next}
	for _, r := range rows {
		out.Tools = append(out.Tools, &pb.ToolSummary{Server: r.Server, Name: r.Name, Summary: r.Summary})
	}
	return out, nil
}

func (s *discovery) DescribeTool(ctx context.Context, req *pb.DescribeToolRequest) (*pb.DescribeToolResponse, error) {
	res, err := s.ret.Describe(ctx, apiconv.CallerFromProto(req.GetCaller()), req.GetName(), req.GetServer())
	if err != nil {
		return nil, toStatus(s.log, "DescribeTool", err)
	}
	if res.Ambiguous != nil {
		return &pb.DescribeToolResponse{AmbiguousServers: res.Ambiguous}, nil
	}
	return &pb.DescribeToolResponse{Card: apiconv.CardToProto(&res.Card, true)}, nil
}

var decisions = map[retriever.Decision]pb.AuthorizeCallResponse_Decision{
	retriever.Allow:                pb.AuthorizeCallResponse_DECISION_ALLOW,
	retriever.DenyUnknownTool:      pb.AuthorizeCallResponse_DECISION_DENY_UNKNOWN_TOOL,
	retriever.DenyAmbiguous:        pb.AuthorizeCallResponse_DECISION_DENY_AMBIGUOUS,
	retriever.DenyInvalidArguments: pb.AuthorizeCallResponse_DECISION_DENY_INVALID_ARGUMENTS,
}

func (s *discovery) AuthorizeCall(ctx context.Context, req *pb.AuthorizeCallRequest) (*pb.AuthorizeCallResponse, error) {
	a, err := s.ret.Authorize(ctx, apiconv.CallerFromProto(req.GetCaller()), req.GetName(), req.GetServer(), []byte(req.GetArgumentsJson()))
	if err != nil {
		return nil, toStatus(s.log, "AuthorizeCall", err)
	}
	out := &pb.AuthorizeCallResponse{
		Decision:         decisions[a.Decision],
		Allowed:          a.Decision == retriever.Allow,
		Message:          a.Message,
		AmbiguousServers: a.Ambiguous,
		Violations:       a.Violations,
	}
	if a.Decision != retriever.DenyUnknownTool && a.Decision != retriever.DenyAmbiguous {
		out.Tool = &pb.ToolRef{Server: a.Key.Server, Name: a.Key.Name}
		out.CardVersion = a.Version
	}
	return out, nil
}
