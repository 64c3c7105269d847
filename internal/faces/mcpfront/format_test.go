package mcpfront_test

// search_tools with a provider format, through the real SDK client.

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/seed0cff8200/cardex/cards"
	"github.com/seed0cff8200/cardex/internal/codec/toolname"
)

func TestSearchToolsFormat(t *testing.T) {
	catalogue := []cards.Card{
		{Tenant: "acme", Server: "files", Name: "read_file", Kind: cards.KindMCPTool, Summary: "Read a text file from the workspace and return its content."},
		{Tenant: "acme", Server: "files", Name: "v2.stat", Kind: cards.KindMCPTool, Summary: "Show a text file's size and modification times."},
		{Tenant: "acme", Server: "weather", Name: "forecast", Kind: cards.KindMCPTool, Summary: "Weather forecast for a city for the next days."},
	}
	url, _ := frontWith(t, catalogue)
	cs := mustConnect(t, url, adminToken)

	res, text := call(t, cs, "search_tools", map[string]any{"query": "size of a text file", "limit": 2, "format": "anthropic_tool_reference", "call_id": "toolu_7"})
	if res.IsError {
		t.Fatalf("search_tools with a format: %s", text)
	}
	var shaped struct {
		Format      string
		Definitions []struct {
			Name         string
			InputSchema  json.RawMessage `json:"input_schema"`
			DeferLoading bool            `json:"defer_loading"`
		}
		Result struct {
			Type      string
			ToolUseID string `json:"tool_use_id"`
			Content   []struct {
				Type     string
				ToolName string `json:"tool_name"`
			}
		}
	}
	if err := json.Unmarshal([]byte(text), &shaped); err != nil {
		t.Fatalf("%v: %s", err, text)
	}
	stat := toolname.Provider("files", "v2.stat")
	if shaped.Format != "anthropic_tool_reference" || len(shaped.Definitions) != 2 || shaped.Definitions[0].Name != stat ||
		!shaped.Definitions[0].DeferLoading || shaped.Result.Type != "tool_result" || shaped.Result.ToolUseID != "toolu_7" ||
		len(shaped.Result.Content) != 2 || shaped.Result.Content[0].ToolName != stat {
		t.Fatalf("answer %s; want files/v2.stat first as %s", text, stat)
	}
	// The provider name (hashed: "." is not provider-safe) is taken back.
	if res, text := call(t, cs, "describe_tool", map[string]any{"name": stat}); res.IsError || !strings.Contains(text, `"name":"v2.stat"`) {
		t.Errorf("describe_tool(%s): %s", stat, text)
	}
	for _, tc := range []struct {
		args map[string]any
		want string
	}{
		{map[string]any{"query": "file", "format": "gemini"}, "format"},
		{map[string]any{"query": "file", "format": "openai_tool_search"}, "call_id"},
		{map[string]any{"query": "file", "call_id": "x"}, "call_id"},
		{map[string]any{"query": "file", "format": "openai_functions", "cursor": "abc"}, "cursor"},
	} {
		if res, text := call(t, cs, "search_tools", tc.args); !res.IsError || !strings.Contains(text, tc.want) {
			t.Errorf("search_tools(%v): %v %q; want a tool error naming %s", tc.args, res.IsError, text, tc.want)
		}
	}
}
