package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/seed0cff8200/cardex/cards"
	"github.com/seed0cff8200/cardex/cards/embedded"
	"github.com/seed0cff8200/cardex/embed"
	"github.com/seed0cff8200/cardex/internal/gateway"
	"github.com/seed0cff8200/cardex/internal/upstream"
	"github.com/seed0cff8200/cardex/retriever"
)

// countingUpstream records what reaches it.
type countingUpstream struct{ calls []string }

func (u *countingUpstream) Call(_ context.Context, tenant, server, tool string, args json.RawMessage) (*mcp.CallToolResult, error) {
	u.calls = append(u.calls, tenant+"/"+server+"/"+tool+" "+string(args))
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
}

func newGateway(t *testing.T) (*gateway.Gateway, *countingUpstream) {
	t.Helper()
	ctx := context.Background()
	st, err := embedded.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	var cs []cards.Card
	for i := range 60 {
		cs = append(cs, cards.Card{Tenant: "acme", Server: "bulk", Name: fmt.Sprintf("tool_%02d", i), Kind: cards.KindMCPTool,
			Summary: "Look up widget number " + fmt.Sprint(i) + " " + strings.Repeat("é", 470)})
	}
	cs = append(cs, cards.Card{Tenant: "acme", Server: "bulk", Name: "secret_tool", Kind: cards.KindMCPTool, Summary: "Look up a secret widget.",
		RequiredScopes: []string{"widgets:admin"}})
	if _, err := st.Put(ctx, cs); err != nil {
		t.Fatal(err)
	}
	ret, err := retriever.New(ctx, st, embed.NewHashed(embed.DefaultDim), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ret.Close() })
	up := &countingUpstream{}
	return &gateway.Gateway{Retriever: ret, Upstreams: up}, up
}

var caller = retriever.Caller{Tenant: "acme", Subject: "s", Scopes: []string{"widgets:read"}}

func TestSearchLimits(t *testing.T) {
	gw, _ := newGateway(t)
	for _, tc := range []struct {
		query   string
		limit   int
		want    int
		wantErr string
	}{
		{"widget", 0, 20, ""},
		{"widget", 7, 7, ""},
		{"widget", 500, 50, ""},
		{"", 0, 20, ""},
		{"widget", -1, 0, "limit"},
		{strings.Repeat("w", 201), 0, 0, "query: is 201 characters; the limit is 200"},
	} {
		rows, err := gw.Search(context.Background(), caller, tc.query, tc.limit)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("Search(%.10q, %d): err %v, want %q", tc.query, tc.limit, err, tc.wantErr)
			}
			continue
		}
		if err != nil || len(rows) != tc.want {
			t.Errorf("Search(%.10q, %d): %d rows, %v; want %d", tc.query, tc.limit, len(rows), err, tc.want)
		}
		for _, r := range rows {
			if r.Name == "secret_tool" {
				t.Error("search shows a tool outside the caller's scopes")
			}
			if n := utf8.RuneCountInString(r.Summary); n > gateway.MaxSummaryLen {
				t.Errorf("summary of %d code points", n)
			}
		}
	}
}

func TestCallAuthorizesBeforeForwarding(t *testing.T) {
	gw, up := newGateway(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name, server, args string
		outcome            string
	}{
		{"secret_tool", "", `{}`, upstream.OutcomeDeniedUnknown},
		{"call_tool", "", `{}`, upstream.OutcomeDeniedUnknown},
		{"CALL_TOOL", "", `{}`, upstream.OutcomeDeniedUnknown},
		{"", "", `{}`, upstream.OutcomeDeniedUnknown},
		{"tool_01", "bad server", `{}`, upstream.OutcomeDeniedUnknown},
		{"tool_01", "", `[1]`, upstream.OutcomeDeniedArguments},
		{"tool_01", "", `{"x":` + strings.Repeat(" ", retriever.MaxArgsBytes) + `1}`, upstream.OutcomeDeniedArguments},
	} {
		_, err := gw.Call(ctx, caller, gateway.Origin{Via: "test"}, tc.name, tc.server, json.RawMessage(tc.args))
		var d *gateway.Denial
		if !errors.As(err, &d) || d.Outcome != tc.outcome {
			t.Errorf("%q/%q: %v, want %s", tc.server, tc.name, err, tc.outcome)
		}
	}
	if len(up.calls) != 0 {
		t.Fatalf("forwarded: %v", up.calls)
	}
	res, err := gw.Call(ctx, caller, gateway.Origin{Via: "test"}, "tool_01", "", nil)
	if err != nil || res.Tool.Server != "bulk" || res.ExecutionID == "" {
		t.Fatalf("%+v %v", res, err)
	}
	if len(up.calls) != 1 || up.calls[0] != "acme/bulk/tool_01 {}" {
		t.Fatalf("forwarded %v", up.calls)
	}
}
