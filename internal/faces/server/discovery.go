package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/seed0cff8200/cardex/cards"
	"github.com/seed0cff8200/cardex/internal/access/audittrail"
	"github.com/seed0cff8200/cardex/internal/access/auth"
	"github.com/seed0cff8200/cardex/internal/codec/apiconv"
	"github.com/seed0cff8200/cardex/internal/codec/toolformat"
	"github.com/seed0cff8200/cardex/internal/codec/toolname"
	"github.com/seed0cff8200/cardex/internal/telemetry/discoverylog"
	"github.com/seed0cff8200/cardex/internal/telemetry/feedback"
	"github.com/seed0cff8200/cardex/internal/telemetry/metrics"
	pb "github.com/seed0cff8200/cardex/proto/cardex/v1"
	"github.com/seed0cff8200/cardex/retriever"
)

type discovery struct {
	pb.UnimplementedDiscoveryServiceServer
	ret   *retriever.Retriever
	dlog  *discoverylog.Log
	fb    *feedback.Recorder
	trail *audittrail.Trail
	log   *slog.Logger
	// metrics may be nil.
	metrics *metrics.Metrics
	// autoPins is Config.AutoPins.
	autoPins int
	// converted keeps the API form of the cards answers return.
	converted toolCards
}

func (s *discovery) DiscoverTools(ctx context.Context, req *pb.DiscoverToolsRequest) (*pb.DiscoverToolsResponse, error) {
	start := time.Now()
	caller := apiconv.CallerFromProto(req.GetCaller())
	format, err := toolformat.ParseRequest(req.GetFormat(), req.GetCallId())
	if err != nil {
		return nil, toStatus(s.log, "DiscoverTools", err)
	}
	r := apiconv.DiscoverRequestFromProto(req, caller)
	if s.autoPins > 0 && s.fb != nil && len(r.AlwaysLoad) == 0 {
		// The caller's candidates that it may use, so that how many it
		// gets says nothing of the others.
		for _, t := range s.fb.HotPins(caller.Tenant, caller.Subject, feedback.MaxPins) {
			if len(r.HotPins) == s.autoPins {
				break
			}
			if _, err := s.ret.Describe(ctx, caller, t.Name, t.Server); err == nil {
				r.HotPins = append(r.HotPins, cards.Key{Server: t.Server, Name: t.Name})
			}
		}
	}
	res, err := s.ret.Discover(ctx, r)
	if err != nil {
		return nil, toStatus(s.log, "DiscoverTools", err)
	}
	// The answer and its token estimate in one allocation.
	a := &struct {
		resp   pb.DiscoverToolsResponse
		tokens pb.TokenEstimate
	}{}
	a.tokens.ShortlistTokens, a.tokens.CatalogTokens, a.tokens.Method = res.ShortlistTokens, res.CatalogTokens, retriever.TokenMethod
	out := &a.resp
	*out = pb.DiscoverToolsResponse{
		DiscoveryId:         uuid.NewString(),
		CandidateCount:      int32(res.CandidateCount),
		Degraded:            res.Degraded,
		LowConfidence:       res.LowConfidence,
		ReformulatedQuery:   res.Reformulated,
		ReformulatedIntents: res.ReformulatedIntents,
		Abstained:           res.Abstained,
		AbstainedIntents:    int32s(res.AbstainedIntents),
		MinConfidence:       res.MinConfidence,
		Tokens:              &a.tokens,
	}
	n := len(res.Tools)
	// What the discovery log and the feedback recorder keep, made only
	// for the one there is.
	var logged []discoverylog.Returned
	if s.dlog != nil {
		logged = make([]discoverylog.Returned, 0, n)
	}
	var remembered []feedback.Tool
	if s.fb != nil {
		remembered = make([]feedback.Tool, 0, n)
	}
	var intentsOf map[feedback.Tool][]string
	var defs []json.RawMessage // toolformat.Shape's, each kept with its card
	if format != toolformat.None {
		defs = make([]json.RawMessage, n)
	}
	// One allocation each for the answer's tools and their scores.
	tools, scores := make([]pb.DiscoveredTool, n), make([]pb.Scores, n)
	out.Tools = make([]*pb.DiscoveredTool, n)
	for i, t := range res.Tools {
		conv := s.converted.get(&t.Card)
		sc := &scores[i]
		sc.Lexical, sc.Semantic, sc.Fused = t.Scores.Lexical, t.Scores.Semantic, t.Scores.Score
		sc.LexicalRank, sc.SemanticRank = int32(t.Scores.LexicalRank), int32(t.Scores.SemanticRank)
		dt := &tools[i]
		dt.ProviderName, dt.Card, dt.Scores = conv.provider, conv.pb, sc
		if defs != nil {
			defs[i] = s.converted.definition(conv, format)
			dt.DefinitionJson = string(defs[i])
		}
		dt.MatchedFields, dt.Reason, dt.Pinned, dt.Tokens = t.Scores.Fields, t.Reason, t.Pinned, int32(t.Tokens)
		dt.Confidence, dt.Intents, dt.ForQuery = t.Scores.Confidence, int32s(t.Intents), t.ForQuery
		dt.Alternatives, dt.CompanionOf = refs(t.Alternatives), ref(t.CompanionOf)
		out.Tools[i] = dt
		if logged != nil {
			logged = append(logged, discoverylog.Returned{Server: t.Card.Server, Name: t.Card.Name, Score: t.Scores.Score, Pinned: t.Pinned})
		}
		ft := feedback.Tool{Server: t.Card.Server, Name: t.Card.Name}
		if remembered != nil {
			remembered = append(remembered, ft)
		}
		for _, i := range t.Intents {
			if intentsOf == nil {
				intentsOf = map[feedback.Tool][]string{}
			}
			intentsOf[ft] = append(intentsOf[ft], r.Intents[i])
		}
	}
	if defs != nil {
		out.ProviderJson = string(toolformat.Answer(format, res.Cards(), defs, req.GetCallId()))
	}
	if req.GetEvaluation() {
		// An evaluation's discovery (the guard checked who may ask for
		// that): kept out of the logs and metrics, recorded in the trail.
		s.evaluated(ctx, caller, res)
		return out, nil
	}
	if s.fb != nil {
		s.fb.Remember(feedback.Discovery{ID: out.DiscoveryId, Tenant: caller.Tenant, Subject: caller.Subject,
			SessionID: caller.SessionID, Query: r.Query, Returned: remembered, Intents: intentsOf, LowConfidence: res.LowConfidence, Time: start})
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
			LowConfidence:  res.LowConfidence,
			Degraded:       res.Degraded,
			Abstained:      res.Abstained,
			Intents:        r.Intents,
		}
		if entry.TopK == 0 {
			entry.TopK = retriever.DefaultTopK
		}
		if err := s.dlog.Append(entry, caller.Subject, r.Query); err != nil {
			s.log.Warn("discovery log append failed", "err", err)
		}
	}
	s.metrics.Discovery(caller.Tenant, &res, time.Since(start))
	return out, nil
}

// evaluated records an evaluation's discovery in the audit trail: who, for
// which tenant, how many tools; never the query.
func (s *discovery) evaluated(ctx context.Context, caller retriever.Caller, res retriever.Result) {
	if s.trail == nil {
		return
	}
	p, _ := auth.FromContext(ctx)
	entry := audittrail.Entry{Type: audittrail.TypeEvaluation, Method: "DiscoverTools", Principal: p.Name, Tenant: caller.Tenant,
		Outcome: "answered", Detail: fmt.Sprintf("%d tools of %d candidates", len(res.Tools), res.CandidateCount)}
	if pr, ok := peer.FromContext(ctx); ok && pr.Addr != nil {
		entry.Peer = pr.Addr.String()
	}
	if err := s.trail.Append(caller.Subject, entry); err != nil {
		s.log.Warn("audit trail append failed", "err", err)
	}
}

// ref is a key as a ToolRef (nil for nil).
func ref(k *cards.Key) *pb.ToolRef {
	if k == nil {
		return nil
	}
	return &pb.ToolRef{Server: k.Server, Name: k.Name}
}

func refs(ks []cards.Key) []*pb.ToolRef {
	var out []*pb.ToolRef
	for _, k := range ks {
		out = append(out, &pb.ToolRef{Server: k.Server, Name: k.Name})
	}
	return out
}

func int32s(xs []int) []int32 {
	if len(xs) == 0 {
		return nil
	}
	out := make([]int32, len(xs))
	for i, x := range xs {
		out[i] = int32(x)
	}
	return out
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

// ref is the tool a requested (name, server) stands for: the first of its
// readings (toolname.Readings: a qualified or provider name's pair, then the
// name as it is) that the caller may use; else, for a hashed provider name,
// the caller's one tool that goes by it; else the name as it is, which then
// answers as it always did. Readings the caller may not use are skipped
// exactly like tools that do not exist.
func (s *discovery) ref(ctx context.Context, c retriever.Caller, name, server string) (string, string) {
	rs := toolname.Readings(name, server)
	for _, r := range rs[:len(rs)-1] {
		if res, err := s.ret.Describe(ctx, c, r.Name, r.Server); err == nil && res.Ambiguous == nil {
			return r.Name, r.Server
		}
	}
	if server != "" || !toolname.Hashed(name) {
		return name, server
	}
	if _, err := s.ret.Describe(ctx, c, name, ""); !errors.Is(err, cards.ErrNotFound) {
		return name, server
	}
	keys, err := s.ret.Keys(c, func(k cards.Key) bool { return toolname.Provider(k.Server, k.Name) == name })
	if err != nil || len(keys) != 1 {
		return name, server
	}
	return keys[0].Name, keys[0].Server
}

func (s *discovery) DescribeTool(ctx context.Context, req *pb.DescribeToolRequest) (*pb.DescribeToolResponse, error) {
	caller := apiconv.CallerFromProto(req.GetCaller())
	name, server := s.ref(ctx, caller, req.GetName(), req.GetServer())
	res, err := s.ret.Describe(ctx, caller, name, server)
	if err != nil {
		return nil, toStatus(s.log, "DescribeTool", err)
	}
	if res.Ambiguous != nil {
		return &pb.DescribeToolResponse{AmbiguousServers: res.Ambiguous}, nil
	}
	s.used(req.GetCaller(), res.Card.Server, res.Card.Name)
	return &pb.DescribeToolResponse{Card: apiconv.ToolCardToProto(&res.Card, true)}, nil
}

var decisions = map[retriever.Decision]pb.AuthorizeCallResponse_Decision{
	retriever.Allow:                pb.AuthorizeCallResponse_DECISION_ALLOW,
	retriever.DenyUnknownTool:      pb.AuthorizeCallResponse_DECISION_DENY_UNKNOWN_TOOL,
	retriever.DenyAmbiguous:        pb.AuthorizeCallResponse_DECISION_DENY_AMBIGUOUS,
	retriever.DenyInvalidArguments: pb.AuthorizeCallResponse_DECISION_DENY_INVALID_ARGUMENTS,
}

func (s *discovery) AuthorizeCall(ctx context.Context, req *pb.AuthorizeCallRequest) (*pb.AuthorizeCallResponse, error) {
	caller := apiconv.CallerFromProto(req.GetCaller())
	name, server := s.ref(ctx, caller, req.GetName(), req.GetServer())
	a, err := s.ret.Authorize(ctx, caller, name, server, []byte(req.GetArgumentsJson()))
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
	entry := audittrail.Entry{Type: audittrail.TypeAuthorize, Method: "AuthorizeCall", Tenant: req.GetCaller().GetTenant(),
		Server: req.GetServer(), Name: req.GetName(), Outcome: string(a.Decision)}
	if a.Decision != retriever.DenyUnknownTool && a.Decision != retriever.DenyAmbiguous {
		out.Tool = &pb.ToolRef{Server: a.Key.Server, Name: a.Key.Name}
		out.CardVersion = a.Version
		s.used(req.GetCaller(), a.Key.Server, a.Key.Name)
		entry.Server, entry.Name, entry.CardVersion = a.Key.Server, a.Key.Name, a.Version
	}
	if s.trail != nil {
		p, _ := auth.FromContext(ctx)
		entry.Principal = p.Name
		if err := s.trail.Append(req.GetCaller().GetSubject(), entry); err != nil {
			s.log.Warn("audit trail append failed", "err", err)
		}
	}
	return out, nil
}

// used feeds the implicit-miss detector: an authorized tool described or
// authorized that none of the session's recent shortlists held.
func (s *discovery) used(c *pb.Caller, server, name string) {
	if s.fb != nil {
		s.fb.Used(c.GetTenant(), c.GetSubject(), c.GetSessionId(), feedback.Tool{Server: server, Name: name})
	}
}

func (s *discovery) ReportOutcome(ctx context.Context, req *pb.ReportOutcomeRequest) (*pb.ReportOutcomeResponse, error) {
	caller := apiconv.CallerFromProto(req.GetCaller())
	if s.fb == nil {
		return nil, status.Error(codes.Unavailable, "outcomes are not recorded by this server")
	}
	if err := retriever.ValidateCaller(caller); err != nil {
		return nil, toStatus(s.log, "ReportOutcome", err)
	}
	if req.GetDiscoveryId() == "" {
		return nil, toStatus(s.log, "ReportOutcome", cards.Invalid("discovery_id", "is required"))
	}
	var used *feedback.Tool
	switch o := req.GetOutcome().(type) {
	case *pb.ReportOutcomeRequest_UsedTool:
		// The tool must be one the caller may use: an unknown and a
		// forbidden tool get the same NotFound, and nothing is learned.
		name, server := s.ref(ctx, caller, o.UsedTool.GetName(), o.UsedTool.GetServer())
		res, err := s.ret.Describe(ctx, caller, name, server)
		if err != nil {
			return nil, toStatus(s.log, "ReportOutcome", err)
		}
		if res.Ambiguous != nil {
			return nil, toStatus(s.log, "ReportOutcome", cards.Invalid("used_tool.server", "is required: %q is ambiguous (%s)", o.UsedTool.GetName(), strings.Join(res.Ambiguous, ", ")))
		}
		used = &feedback.Tool{Server: res.Card.Server, Name: res.Card.Name}
	case *pb.ReportOutcomeRequest_NoneFit:
		if !o.NoneFit {
			return nil, toStatus(s.log, "ReportOutcome", cards.Invalid("none_fit", "must be true when given; or report used_tool"))
		}
	default:
		return nil, toStatus(s.log, "ReportOutcome", cards.Invalid("outcome", "is required: used_tool or none_fit"))
	}
	miss, err := s.fb.Outcome(ctx, caller.Tenant, caller.Subject, req.GetDiscoveryId(), used, used == nil)
	if err != nil {
		return nil, toStatus(s.log, "ReportOutcome", err)
	}
	return &pb.ReportOutcomeResponse{Miss: miss}, nil
}
