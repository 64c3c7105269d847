package server_test

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"

	pb "github.com/seed0cff8200/cardex/proto/cardex/v1"
	"github.com/seed0cff8200/cardex/retriever"
)

// permissiveCompanions bring every companion a tiny catalogue has: the
// rules are under test here, not the thresholds.
var permissiveCompanions = retriever.WithCompanions(retriever.CompanionOptions{Anchor: 0.05, Weak: 1, Min: 0.01, Prior: 2, MaxSlots: 2})

// coUsedEnv is the example catalogue after three sessions of an admin who
// looked an invoice up and then used a proration (which a support caller
// may use), a dataset export (analytics:admin: a support caller may not)
// and a void (destructive), each reported through ReportOutcome.
func coUsedEnv(t *testing.T, o envOptions) *env {
	t.Helper()
	o.cards, o.feedback = acmeCards(t), true
	o.retriever = append(o.retriever, permissiveCompanions)
	e := newEnv(t, o)
	admin := adminCaller()
	for _, session := range []string{"s1", "s2", "s3"} {
		admin.SessionId = session
		for _, used := range [][2]string{{"billing", "get_invoice"}, {"billing", "calculate_proration"}, {"analytics", "export_dataset"}, {"billing", "void_invoice"}} {
			d := e.discover(t, &pb.DiscoverToolsRequest{Caller: admin, Query: "invoice " + used[1]})
			if _, err := e.disc.ReportOutcome(rpcCtx(t), &pb.ReportOutcomeRequest{Caller: admin, DiscoveryId: d.GetDiscoveryId(),
				Outcome: &pb.ReportOutcomeRequest_UsedTool{UsedTool: &pb.ToolRef{Server: used[0], Name: used[1]}}}); err != nil {
				t.Fatalf("ReportOutcome: %v", err)
			}
		}
	}
	if n, err := e.fb.FlushCoUse(rpcCtx(t), true); err != nil || n != 3 {
		t.Fatalf("FlushCoUse = %d, %v; want 3 sessions", n, err)
	}
	return e
}

const supportAgentToken = "support-agent-token-0123456789"

const invoiceQuery = "show invoice INV-1042 with its line items"

func TestCompanionsOverGRPC(t *testing.T) {
	e := coUsedEnv(t, envOptions{})
	res := e.discover(t, &pb.DiscoverToolsRequest{Caller: adminCaller(), Query: invoiceQuery, TopK: 10})
	got := map[string]string{}
	for _, tl := range res.GetTools() {
		if w := tl.GetCompanionOf(); w != nil {
			got[tl.GetCard().GetServer()+"/"+tl.GetCard().GetName()] = w.GetServer() + "/" + w.GetName()
			if !strings.HasPrefix(tl.GetReason(), "used with "+w.GetServer()+"/"+w.GetName()) {
				t.Errorf("companion %s: reason %q", tl.GetCard().GetName(), tl.GetReason())
			}
		}
	}
	if len(got) == 0 {
		t.Fatalf("no companion in %v", toolNames(res.GetTools()))
	}
	if _, ok := got["billing/void_invoice"]; ok {
		t.Errorf("the destructive billing/void_invoice was brought by co-usage: %v", got)
	}
	// The request can turn them off.
	off := e.discover(t, &pb.DiscoverToolsRequest{Caller: adminCaller(), Query: invoiceQuery, TopK: 10, NoCompanions: true})
	for _, tl := range off.GetTools() {
		if tl.GetCompanionOf() != nil {
			t.Errorf("no_companions: %s is still a companion", tl.GetCard().GetName())
		}
	}
}

// No answer to a caller mentions a tool outside its scopes, whatever the
// co-usage, on DiscoverTools (query, intents, every top_k) and on the
// ExecutionService's search with intents.
func TestCompanionsNeverLeakOverGRPC(t *testing.T) {
	e := coUsedEnv(t, envOptions{agentTokens: "tokens:\n  - token: " + supportAgentToken +
		"\n    tenant: acme\n    subject: bot\n    scopes: [" + strings.Join(supportScopes, ", ") + "]\n"})
	visible := map[string]bool{}
	for _, c := range supportVisible(acmeCards(t)) {
		visible[c.Server+"/"+c.Name] = true
	}
	check := func(where string, tools []string, raw string) {
		t.Helper()
		for _, n := range tools {
			if !visible[n] {
				t.Errorf("%s: %s is outside the support caller's scopes", where, n)
			}
		}
		for _, secret := range []string{"export_dataset", "void_invoice"} {
			if strings.Contains(raw, secret) {
				t.Errorf("%s: the answer mentions %s: %s", where, secret, raw)
			}
		}
	}
	companions := 0
	for _, k := range []int32{1, 2, 3, 5, 10, 50} {
		for _, intents := range [][]string{nil, {"look the invoice up", "work out the proration"}} {
			req := &pb.DiscoverToolsRequest{Caller: supportCaller(), Query: invoiceQuery, Intents: intents, TopK: k}
			res := e.discover(t, req)
			raw, _ := protojson.Marshal(res)
			check("DiscoverTools", toolNames(res.GetTools()), string(raw))
			for _, tl := range res.GetTools() {
				if tl.GetCompanionOf() != nil {
					companions++
				}
			}
		}
	}
	if companions == 0 {
		t.Error("the support caller got no companion at all: the test shows nothing")
	}
	ctx := bearerCtx(t, supportAgentToken)
	sr, err := e.exec.SearchTools(ctx, &pb.ExecutionServiceSearchToolsRequest{Query: invoiceQuery, Intents: []string{"look the invoice up", "work out the proration"}, Limit: 10})
	if err != nil {
		t.Fatalf("ExecutionService.SearchTools: %v", err)
	}
	var names []string
	for _, tl := range sr.GetTools() {
		names = append(names, tl.GetServer()+"/"+tl.GetName())
	}
	raw, _ := protojson.Marshal(sr)
	check("ExecutionService.SearchTools", names, string(raw))
}
