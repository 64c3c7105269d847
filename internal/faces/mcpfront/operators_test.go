package mcpfront_test

// search_tools with the query operators (select:, +word) through the real
// SDK client over streamable HTTP, and their documentation in the tool's
// definition.

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/seed0cff8200/cardex/internal/execution/gateway"
	"github.com/seed0cff8200/cardex/internal/faces/mcpfront"
)

func TestSearchToolsOperators(t *testing.T) {
	e := setup(t, false)
	cs := mustConnect(t, e.url, supportToken)
	sel := "select:files/read_file,files/delete_file,old/none,billing/get_invoice,files__stat"

	// delete_file needs files:admin: absent for the support token, as a
	// tool that does not exist; the qualified name works too.
	rows, _, text := search(t, cs, map[string]any{"query": sel})
	if got := rowNames(rows); !slices.Equal(got, []string{"files/read_file", "billing/get_invoice", "files/stat"}) || strings.Contains(text, "delete_file") {
		t.Errorf("support: %v (%s)", got, text)
	}
	rows, _, _ = search(t, mustConnect(t, e.url, adminToken), map[string]any{"query": sel})
	if got := rowNames(rows); !slices.Equal(got, []string{"files/read_file", "files/delete_file", "billing/get_invoice", "files/stat"}) {
		t.Errorf("admin: %v", got)
	}
	// Nothing the caller may use: the ordinary "no tool matches".
	if _, _, text := search(t, cs, map[string]any{"query": "select:files/delete_file"}); text != noMatchText {
		t.Errorf("unauthorized selection: %q", text)
	}

	// +word keeps the tools that hold the word.
	rows, _, _ = search(t, cs, map[string]any{"query": "+disk usage"})
	if got := rowNames(rows); !slices.Equal(got, []string{"disk/stat"}) {
		t.Errorf("+disk usage: %v", got)
	}
	rows, _, _ = search(t, cs, map[string]any{"query": "+files"})
	for _, r := range rows {
		if r.Server != "files" || r.Name == "delete_file" {
			t.Errorf("+files reached %s/%s", r.Server, r.Name)
		}
	}

	// In intents.
	rows, _, text = search(t, cs, map[string]any{"intents": []string{"select:disk/stat", "+workspace read a text file"}, "limit": 3})
	if len(rows) < 2 || rowNames(rows)[0] != "disk/stat" || !slices.Equal(rows[0].Intents, []int{0}) || rows[0].Confidence != 1 {
		t.Fatalf("intents: %s", text)
	}
	for _, r := range rows[1:] {
		if r.Server != "files" {
			t.Errorf("+workspace reached %s/%s", r.Server, r.Name)
		}
	}

	// A malformed selection is a tool error naming the field.
	res, text := call(t, cs, "search_tools", map[string]any{"query": "select:"})
	if !res.IsError || !strings.Contains(text, "query") || !strings.Contains(text, "select:") {
		t.Errorf("select: alone: error %v, %q", res.IsError, text)
	}

	// The definition the model reads documents both operators.
	for _, tool := range mcpfront.Tools() {
		if tool.Name != gateway.SearchTools {
			continue
		}
		for _, want := range []string{"select:SERVER/NAME", "+word"} {
			schema, err := json.Marshal(tool.InputSchema)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(tool.Description, want) || !strings.Contains(string(schema), want) {
				t.Errorf("search_tools does not document %s", want)
			}
		}
	}
}
