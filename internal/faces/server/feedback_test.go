package server_test

import (
	"slices"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/seed0cff8200/cardex/internal/telemetry/feedback"
	pb "github.com/seed0cff8200/cardex/proto/cardex/v1"
)

func shortNames(res *pb.DiscoverToolsResponse) []string {
	var out []string
	for _, t := range res.GetTools() {
		out = append(out, t.GetCard().GetServer()+"/"+t.GetCard().GetName())
	}
	return out
}

func events(t *testing.T, path string) []feedback.Event {
	t.Helper()
	evs, err := feedback.ReadEvents(path)
	if err != nil {
		t.Fatalf("feedback log: %v", err)
	}
	return evs
}

func TestReportOutcomeRecordsMissesAndLearns(t *testing.T) {
	e := newEnv(t, envOptions{cards: acmeCards(t), feedback: true})
	admin := adminCaller()
	const q = "the thingamajig went walkabout, sort it"
	first := e.discover(t, &pb.DiscoverToolsRequest{Caller: admin, Query: q, TopK: 3})
	want := "orders/reship_order"
	if slices.Contains(shortNames(first), want) {
		t.Fatalf("precondition: %s already in %v", want, shortNames(first))
	}
	res, err := e.disc.ReportOutcome(rpcCtx(t), &pb.ReportOutcomeRequest{Caller: admin, DiscoveryId: first.GetDiscoveryId(),
		Outcome: &pb.ReportOutcomeRequest_UsedTool{UsedTool: &pb.ToolRef{Server: "orders", Name: "reship_order"}}})
	if err != nil || !res.GetMiss() {
		t.Fatalf("ReportOutcome(used tool outside the shortlist) = %v, %v; want a miss", res, err)
	}
	// The query was learned: the same request now finds the tool.
	again := e.discover(t, &pb.DiscoverToolsRequest{Caller: admin, Query: q, TopK: 3})
	if !slices.Contains(shortNames(again), want) {
		t.Errorf("after the outcome, %q gives %v; want %s learned into the shortlist", q, shortNames(again), want)
	}
	// A used tool from the shortlist is a hit.
	hit := shortNames(again)[0]
	server, name, _ := cut(hit)
	res, err = e.disc.ReportOutcome(rpcCtx(t), &pb.ReportOutcomeRequest{Caller: admin, DiscoveryId: again.GetDiscoveryId(),
		Outcome: &pb.ReportOutcomeRequest_UsedTool{UsedTool: &pb.ToolRef{Server: server, Name: name}}})
	if err != nil || res.GetMiss() {
		t.Errorf("ReportOutcome(shortlisted tool) = %v, %v; want no miss", res, err)
	}
	// none_fit is a miss.
	res, err = e.disc.ReportOutcome(rpcCtx(t), &pb.ReportOutcomeRequest{Caller: admin, DiscoveryId: again.GetDiscoveryId(),
		Outcome: &pb.ReportOutcomeRequest_NoneFit{NoneFit: true}})
	if err != nil || !res.GetMiss() {
		t.Errorf("ReportOutcome(none_fit) = %v, %v; want a miss", res, err)
	}
	all := events(t, e.fbPath)
	if len(all) != 4 || all[0].Type != feedback.TypeLowConfidence || all[0].DiscoveryID != first.GetDiscoveryId() {
		t.Fatalf("want the first (unmatched) discovery logged low-confidence, then 3 outcomes: %+v", all)
	}
	evs := all[1:]
	if ev := evs[0]; ev.Type != feedback.TypeOutcome || !ev.Miss || ev.Query != q || ev.Tool == nil || ev.Tool.Name != "reship_order" || ev.DiscoveryID != first.GetDiscoveryId() {
		t.Errorf("first event = %+v", ev)
	}
	if ev := evs[2]; !ev.NoneFit || !ev.Miss {
		t.Errorf("none_fit event = %+v", ev)
	}
}

func TestReportOutcomeRefusals(t *testing.T) {
	e := newEnv(t, envOptions{cards: acmeCards(t), feedback: true})
	d := e.discover(t, &pb.DiscoverToolsRequest{Caller: supportCaller(), Query: "refund an order"})
	used := func(server, name string) *pb.ReportOutcomeRequest_UsedTool {
		return &pb.ReportOutcomeRequest_UsedTool{UsedTool: &pb.ToolRef{Server: server, Name: name}}
	}
	otherSubject := proto.Clone(supportCaller()).(*pb.Caller)
	otherSubject.Subject = "someone-else"
	otherTenant := proto.Clone(supportCaller()).(*pb.Caller)
	otherTenant.Tenant = "globex"
	cases := []struct {
		name string
		req  *pb.ReportOutcomeRequest
		code codes.Code
	}{
		{"no caller", &pb.ReportOutcomeRequest{DiscoveryId: d.GetDiscoveryId(), Outcome: used("orders", "get_order")}, codes.InvalidArgument},
		{"no discovery id", &pb.ReportOutcomeRequest{Caller: supportCaller(), Outcome: used("orders", "get_order")}, codes.InvalidArgument},
		{"no outcome", &pb.ReportOutcomeRequest{Caller: supportCaller(), DiscoveryId: d.GetDiscoveryId()}, codes.InvalidArgument},
		{"unknown discovery", &pb.ReportOutcomeRequest{Caller: supportCaller(), DiscoveryId: "nope", Outcome: used("orders", "get_order")}, codes.NotFound},
		{"another subject's discovery", &pb.ReportOutcomeRequest{Caller: otherSubject, DiscoveryId: d.GetDiscoveryId(), Outcome: used("orders", "get_order")}, codes.NotFound},
		{"another tenant's discovery", &pb.ReportOutcomeRequest{Caller: otherTenant, DiscoveryId: d.GetDiscoveryId(), Outcome: &pb.ReportOutcomeRequest_NoneFit{NoneFit: true}}, codes.NotFound},
		{"forbidden tool", &pb.ReportOutcomeRequest{Caller: supportCaller(), DiscoveryId: d.GetDiscoveryId(), Outcome: used("billing", "issue_refund")}, codes.NotFound},
		{"nonexistent tool", &pb.ReportOutcomeRequest{Caller: supportCaller(), DiscoveryId: d.GetDiscoveryId(), Outcome: used("billing", "issue_refundz")}, codes.NotFound},
	}
	var forbiddenMsg, missingMsg string
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.disc.ReportOutcome(rpcCtx(t), tc.req)
			if status.Code(err) != tc.code {
				t.Fatalf("code %v (%v), want %v", status.Code(err), err, tc.code)
			}
			switch tc.name {
			case "forbidden tool":
				forbiddenMsg = status.Convert(err).Message()
			case "nonexistent tool":
				missingMsg = status.Convert(err).Message()
			}
		})
	}
	// Unknown means unknown; and a forbidden tool taught nothing.
	if forbiddenMsg == "" || len(forbiddenMsg) != len(missingMsg)-1 {
		t.Errorf("forbidden %q vs missing %q: the answers must read alike", forbiddenMsg, missingMsg)
	}
	if len(e.ret.Learned()) != 0 {
		t.Errorf("refused outcomes taught phrasings: %v", e.ret.Learned())
	}
	if evs := events(t, e.fbPath); len(evs) != 0 {
		t.Errorf("refused outcomes were recorded: %+v", evs)
	}
}

func TestImplicitMissAndLowConfidence(t *testing.T) {
	e := newEnv(t, envOptions{cards: acmeCards(t), feedback: true})
	c := adminCaller()
	c.SessionId = "conversation-1"
	d := e.discover(t, &pb.DiscoverToolsRequest{Caller: c, Query: "where is my package", TopK: 3})
	shortlisted := shortNames(d)
	// Describing a shortlisted tool is no miss; authorizing one outside
	// every recent shortlist of the session is.
	server, name, _ := cut(shortlisted[0])
	if _, err := e.disc.DescribeTool(rpcCtx(t), &pb.DescribeToolRequest{Caller: c, Name: name, Server: server}); err != nil {
		t.Fatal(err)
	}
	if slices.Contains(shortlisted, "infra/restart_service") {
		t.Fatalf("precondition: %v", shortlisted)
	}
	if _, err := e.disc.AuthorizeCall(rpcCtx(t), &pb.AuthorizeCallRequest{Caller: c, Name: "restart_service", Server: "infra", ArgumentsJson: `{}`}); err != nil {
		t.Fatal(err)
	}
	// Without a session nothing can be judged.
	if _, err := e.disc.DescribeTool(rpcCtx(t), &pb.DescribeToolRequest{Caller: adminCaller(), Name: "restart_service", Server: "infra"}); err != nil {
		t.Fatal(err)
	}
	evs := events(t, e.fbPath)
	if len(evs) != 1 || evs[0].Type != feedback.TypeImplicitMiss || evs[0].Tool.Name != "restart_service" || evs[0].DiscoveryID != d.GetDiscoveryId() || evs[0].Query != "where is my package" {
		t.Fatalf("events = %+v; want one implicit miss of restart_service", evs)
	}
	// A query nothing matches is low-confidence, reformulated and logged.
	low := e.discover(t, &pb.DiscoverToolsRequest{Caller: c, Query: "zxqv blorp"})
	if !low.GetLowConfidence() {
		t.Errorf("low_confidence false for a query that matches nothing: %v", shortNames(low))
	}
	good := e.discover(t, &pb.DiscoverToolsRequest{Caller: c, Query: "restart the payments service"})
	if good.GetLowConfidence() || good.GetReformulatedQuery() != "" {
		t.Errorf("a well-matched query was flagged low-confidence")
	}
	evs = events(t, e.fbPath)
	if last := evs[len(evs)-1]; last.Type != feedback.TypeLowConfidence || last.DiscoveryID != low.GetDiscoveryId() {
		t.Errorf("last event = %+v; want the low-confidence discovery", last)
	}
}

func cut(s string) (string, string, bool) {
	for i := range s {
		if s[i] == '/' {
			return s[:i], s[i+1:], true
		}
	}
	return "", s, false
}
