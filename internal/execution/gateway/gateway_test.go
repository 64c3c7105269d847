package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/seed0cff8200/cardex/cards"
	"github.com/seed0cff8200/cardex/cards/embedded"
	"github.com/seed0cff8200/cardex/embed"
	"github.com/seed0cff8200/cardex/internal/execution/gateway"
	"github.com/seed0cff8200/cardex/internal/execution/upstream"
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

// TestListing: Tools is every card the caller may use and can call, across
// the retriever's pages, in (server, name) order; Pinned keeps the pins' order
// and drops what the caller may not use or cannot call.
func TestListing(t *testing.T) {
	ctx := context.Background()
	st, err := embedded.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	var cs []cards.Card
	for i := range 230 {
		cs = append(cs, cards.Card{Tenant: "acme", Server: fmt.Sprintf("s%d", i%3), Name: fmt.Sprintf("tool_%03d", i), Kind: cards.KindMCPTool,
			Summary: "A tool.", RequiredScopes: []string{"widgets:read"}})
	}
	cs = append(cs,
		cards.Card{Tenant: "acme", Server: "s0", Name: "secret", Kind: cards.KindMCPTool, Summary: "Secret.", RequiredScopes: []string{"widgets:admin"}},
		cards.Card{Tenant: "acme", Server: "s0", Name: "old", Kind: cards.KindMCPTool, Summary: "Old.", Status: cards.StatusRevoked},
		cards.Card{Tenant: "acme", Server: "rest", Name: "get_widget", Kind: cards.KindRESTOperation, Summary: "REST."},
		cards.Card{Tenant: "globex", Server: "s0", Name: "theirs", Kind: cards.KindMCPTool, Summary: "Not acme's."},
		cards.Card{Tenant: "acme", Server: "s1", Name: "x__y", Kind: cards.KindMCPTool, Summary: "A name that reads as qualified."})
	if _, err := st.Put(ctx, cs); err != nil {
		t.Fatal(err)
	}
	ret, err := retriever.New(ctx, st, embed.NewHashed(embed.DefaultDim), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ret.Close() })
	gw := &gateway.Gateway{Retriever: ret}

	all, err := gw.Tools(ctx, caller)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 231 {
		t.Fatalf("%d tools, want 231", len(all))
	}
	for i, c := range all {
		if c.Name == "secret" || c.Name == "old" || c.Kind != cards.KindMCPTool || c.Tenant != "acme" {
			t.Fatalf("listed %s/%s (%s, %s)", c.Server, c.Name, c.Kind, c.Tenant)
		}
		if i > 0 && (all[i-1].Server > c.Server || all[i-1].Server == c.Server && all[i-1].Name >= c.Name) {
			t.Fatalf("out of order at %d: %s/%s after %s/%s", i, c.Server, c.Name, all[i-1].Server, all[i-1].Name)
		}
	}

	pins := []cards.Key{{Server: "s2", Name: "tool_002"}, {Server: "s0", Name: "secret"}, {Server: "rest", Name: "get_widget"},
		{Server: "s0", Name: "old"}, {Server: "s0", Name: "theirs"}, {Server: "s0", Name: "tool_000"}}
	pinned, err := gw.Pinned(ctx, caller, pins)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range pinned {
		got = append(got, c.Server+"/"+c.Name)
	}
	if strings.Join(got, " ") != "s2/tool_002 s0/tool_000" {
		t.Fatalf("pinned %v", got)
	}
	// A bare name holding "__" that stands for no tool as SERVER__NAME is
	// read as the bare name.
	if c, err := gw.Describe(ctx, caller, "x__y", ""); err != nil || c.Server != "s1" {
		t.Fatalf("describe x__y: %+v %v", c, err)
	}
}

// TestQualifiedNames: describe and call take SERVER__NAME; a reading the
// caller may not use is skipped like one that does not exist.
func TestQualifiedNames(t *testing.T) {
	gw, up := newGateway(t)
	ctx := context.Background()
	card, err := gw.Describe(ctx, caller, "bulk__tool_07", "")
	if err != nil || card.Name != "tool_07" || card.Server != "bulk" {
		t.Fatalf("describe bulk__tool_07: %+v %v", card, err)
	}
	if _, err := gw.Describe(ctx, caller, "bulk__tool_07", "other"); err == nil {
		t.Fatal("a qualified name with another server was accepted")
	}
	res, err := gw.Call(ctx, caller, gateway.Origin{Via: "test"}, "bulk__tool_08", "bulk", nil)
	if err != nil || res.Tool != (cards.Key{Tenant: "acme", Server: "bulk", Name: "tool_08"}) {
		t.Fatalf("call bulk__tool_08: %+v %v", res, err)
	}
	for _, name := range []string{"bulk__secret_tool", "bulk__nope", "nope__tool_01"} {
		_, err := gw.Call(ctx, caller, gateway.Origin{Via: "test"}, name, "", nil)
		var d *gateway.Denial
		if !errors.As(err, &d) || d.Outcome != upstream.OutcomeDeniedUnknown || d.Message != `unknown tool "`+name+`"` {
			t.Fatalf("%s: %v", name, err)
		}
	}
	if len(up.calls) != 1 {
		t.Fatalf("forwarded %v", up.calls)
	}
}

// The cards package refuses the meta-tools' names (it cannot import this
// package): the two lists must agree.
func TestMetaToolNamesAreReserved(t *testing.T) {
	if !slices.Equal(slices.Sorted(slices.Values(gateway.MetaTools)), slices.Sorted(slices.Values(cards.ReservedNames))) {
		t.Fatalf("gateway.MetaTools %v, cards.ReservedNames %v", gateway.MetaTools, cards.ReservedNames)
	}
}
