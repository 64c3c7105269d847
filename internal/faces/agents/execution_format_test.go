package agents_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/seed0cff8200/cardex/internal/codec/toolformat"
	"github.com/seed0cff8200/cardex/internal/codec/toolname"
	pb "github.com/seed0cff8200/cardex/proto/cardex/v1"
	"github.com/seed0cff8200/cardex/retriever"
)

// TestSearchToolsFormat: ExecutionService.SearchTools with a format answers
// the shortlist DiscoverTools ranks for the token's caller, shaped for the
// provider as DiscoverTools and MCP search_tools shape it: one definition
// per tool, in order, named by its provider name, and the provider's
// answer; nothing outside the token's scopes, on a catalogue with and
// without the forbidden cards alike.
func TestSearchToolsFormat(t *testing.T) {
	all := loadCatalogue(t, "../../../examples/catalog", "../../../examples/catalog-other-tenant")
	full, bare := startExec(t, all), startExec(t, visibleToSupport(all))
	for _, tc := range []struct {
		req     *pb.ExecutionServiceSearchToolsRequest
		query   string
		intents []string
		limit   int
	}{
		{req: &pb.ExecutionServiceSearchToolsRequest{Query: "where is my package", Limit: 3}, query: "where is my package", limit: 3},
		{req: &pb.ExecutionServiceSearchToolsRequest{Intents: []string{"where is my package", "refund the customer"}}, intents: []string{"where is my package", "refund the customer"}, limit: 20},
	} {
		for _, f := range toolformat.Formats {
			req := &pb.ExecutionServiceSearchToolsRequest{Query: tc.req.GetQuery(), Intents: tc.req.GetIntents(), Limit: tc.req.GetLimit(), Format: string(f)}
			if f.Search() {
				req.CallId = "call_7"
			}
			res := full.search(t, supportToken, req)
			want, err := full.ret.Discover(context.Background(), retriever.Request{Caller: supportCaller, Query: tc.query, Intents: tc.intents, TopK: tc.limit})
			if err != nil {
				t.Fatal(err)
			}
			wantDefs, wantAnswer := toolformat.Shape(f, want.Cards(), req.GetCallId())
			if len(wantDefs) == 0 || len(res.GetDefinitionsJson()) != len(wantDefs) || len(res.GetTools()) != len(wantDefs) || len(res.GetMatches()) != len(wantDefs) {
				t.Fatalf("%s %q: %d definitions, %d tools, %d matches; want %d of each", f, req.GetIntents(), len(res.GetDefinitionsJson()), len(res.GetTools()), len(res.GetMatches()), len(wantDefs))
			}
			for i, d := range res.GetDefinitionsJson() {
				var def struct{ Name string }
				if err := json.Unmarshal([]byte(d), &def); err != nil {
					t.Fatal(err)
				}
				x := res.GetTools()[i]
				if d != string(wantDefs[i]) || def.Name != toolname.Provider(x.GetServer(), x.GetName()) {
					t.Errorf("%s #%d: definition %s for %s/%s; want %s", f, i+1, d, x.GetServer(), x.GetName(), wantDefs[i])
				}
			}
			if res.GetProviderJson() != string(wantAnswer) {
				t.Errorf("%s: provider answer %s; want %s", f, res.GetProviderJson(), wantAnswer)
			}
			if f.Search() && !strings.Contains(res.GetProviderJson(), `"call_7"`) {
				t.Errorf("%s: the answer does not name the search call: %s", f, res.GetProviderJson())
			}
			for _, n := range summaryNames(res.GetTools()) {
				if !slices.Contains(cardNames(visibleToSupport(all)), n) {
					t.Errorf("%s: %s is not a card the support agent may see", f, n)
				}
			}
			if b := bare.search(t, supportToken, req); b.GetProviderJson() != res.GetProviderJson() || !slices.Equal(b.GetDefinitionsJson(), res.GetDefinitionsJson()) {
				t.Errorf("%s: the answer differs between a catalogue with and without the forbidden cards", f)
			}
		}
	}
	// Without a format: no definitions, no answer.
	if res := full.search(t, supportToken, &pb.ExecutionServiceSearchToolsRequest{Query: "where is my package"}); len(res.GetDefinitionsJson()) != 0 || res.GetProviderJson() != "" {
		t.Errorf("no format: %v", res)
	}
	// Refusals name the field, as DiscoverTools' do.
	for _, tc := range []struct {
		req  *pb.ExecutionServiceSearchToolsRequest
		want string
	}{
		{&pb.ExecutionServiceSearchToolsRequest{Query: "x", Format: "claude"}, "format"},
		{&pb.ExecutionServiceSearchToolsRequest{Query: "x", Format: "openai_tool_search"}, "call_id: is required"},
		{&pb.ExecutionServiceSearchToolsRequest{Query: "x", Format: "openai_functions", CallId: "call_7"}, "call_id: is only used"},
		{&pb.ExecutionServiceSearchToolsRequest{Query: "x", CallId: "call_7"}, "call_id: is only used"},
		{&pb.ExecutionServiceSearchToolsRequest{Query: "x", Format: "anthropic_tool_reference", CallId: "bad id"}, "call_id: must match"},
	} {
		_, err := full.client.SearchTools(asAgent(t, supportToken), tc.req)
		if st := status.Convert(err); st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), tc.want) {
			t.Errorf("format %q call_id %q: %v; want InvalidArgument saying %q", tc.req.GetFormat(), tc.req.GetCallId(), err, tc.want)
		}
	}
}
