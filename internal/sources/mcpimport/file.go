package mcpimport

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/seed0cff8200/cardex/cards"
)

// Limits of a catalogue file.
const (
	// MaxFileBytes bounds a tools or servers file.
	MaxFileBytes = 64 << 20
	// MaxFileTools bounds the tools of one file.
	MaxFileTools = 100_000
)

// FileServer is one server's part of a catalogue file: its tools in file
// order. Name is "" for tools the file gives no server (a saved tools/list
// result, a bare tool list): the caller names their server.
type FileServer struct {
	Name  string
	Tools []*mcp.Tool
}

// ReadToolsFile reads a catalogue of MCP tools saved to a file, in any of
// these shapes (one JSON value, or several one after another, as in JSON
// Lines):
//
//   - a tools/list result, {"tools": [...], "nextCursor": ...}, or the
//     JSON-RPC response that carries one ({"result": {"tools": [...]}}):
//     every page of a listing may follow the first;
//   - an array of tools;
//   - one tool a value: an MCP tool ({"name", "title", "description",
//     "inputSchema", "outputSchema", "annotations"}) or a row of a JSON
//     Lines catalogue ({"server", "tool_name", "name": "SERVER/TOOL",
//     "description", "input_schema"}; see ../shared/eval/README.md). A row
//     with a server belongs to that server; its tool is tool_name, or the
//     part of name after "SERVER/".
//
// The servers are returned in the order of their first tool. A tool listed
// twice for one server is an error (its second line is named), as is a
// malformed value (named by its position).
func ReadToolsFile(path string) ([]FileServer, error) {
	data, err := readLimited(path)
	if err != nil {
		return nil, err
	}
	var out []FileServer
	index := map[string]int{}
	seen := map[[2]string]int{}
	total := 0
	add := func(server string, t *mcp.Tool, at int) error {
		if t == nil || t.Name == "" {
			return fmt.Errorf("%s: value %d: a tool without a name", path, at)
		}
		k := [2]string{server, t.Name}
		if first, dup := seen[k]; dup {
			return fmt.Errorf("%s: value %d: tool %q of server %q again (first at value %d)", path, at, t.Name, server, first)
		}
		seen[k] = at
		if total++; total > MaxFileTools {
			return fmt.Errorf("%s: more than %d tools", path, MaxFileTools)
		}
		i, ok := index[server]
		if !ok {
			i = len(out)
			index[server] = i
			out = append(out, FileServer{Name: server})
		}
		out[i].Tools = append(out[i].Tools, t)
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	for at := 1; ; at++ {
		var raw json.RawMessage
		if err := dec.Decode(&raw); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, fmt.Errorf("%s: value %d: %v", path, at, err)
		}
		tools, server, err := parseValue(raw)
		if err != nil {
			return nil, fmt.Errorf("%s: value %d: %v", path, at, err)
		}
		for _, t := range tools {
			if err := add(server, t, at); err != nil {
				return nil, err
			}
		}
	}
	if total == 0 {
		return nil, fmt.Errorf("%s: no tools (a tools/list result, an array of tools, or one tool a line)", path)
	}
	return out, nil
}

// fileRow is what a value of a tools file may hold: an MCP tool's fields, a
// JSON Lines row's, a tools/list result's or a JSON-RPC response's.
type fileRow struct {
	Tools  []*mcp.Tool `json:"tools"`
	Result *struct {
		Tools []*mcp.Tool `json:"tools"`
	} `json:"result"`

	Server       *string              `json:"server"`
	ToolName     string               `json:"tool_name"`
	Name         string               `json:"name"`
	Title        string               `json:"title"`
	Description  string               `json:"description"`
	InputSchema  json.RawMessage      `json:"inputSchema"`
	InputSnake   json.RawMessage      `json:"input_schema"`
	OutputSchema json.RawMessage      `json:"outputSchema"`
	OutputSnake  json.RawMessage      `json:"output_schema"`
	Annotations  *mcp.ToolAnnotations `json:"annotations"`
}

// parseValue reads one value of a tools file: its tools and their server
// ("" when the value names none).
func parseValue(raw json.RawMessage) ([]*mcp.Tool, string, error) {
	if t := bytes.TrimSpace(raw); len(t) > 0 && t[0] == '[' {
		var tools []*mcp.Tool
		if err := json.Unmarshal(raw, &tools); err != nil {
			return nil, "", err
		}
		return tools, "", nil
	}
	var r fileRow
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, "", err
	}
	server := ""
	if r.Server != nil {
		server = *r.Server
	}
	switch {
	case r.Tools != nil:
		return r.Tools, server, nil
	case r.Result != nil:
		return r.Result.Tools, server, nil
	}
	name := r.ToolName
	if name == "" {
		name = r.Name
		if server != "" {
			name = strings.TrimPrefix(name, server+"/")
		}
	}
	t := &mcp.Tool{Name: name, Title: r.Title, Description: r.Description, Annotations: r.Annotations}
	if in := firstSchema(r.InputSchema, r.InputSnake); in != nil {
		t.InputSchema = in
	}
	if out := firstSchema(r.OutputSchema, r.OutputSnake); out != nil {
		t.OutputSchema = out
	}
	return []*mcp.Tool{t}, server, nil
}

// firstSchema is the first of the spellings that holds a schema (not
// absent, not null).
func firstSchema(schemas ...json.RawMessage) json.RawMessage {
	for _, s := range schemas {
		if t := bytes.TrimSpace(s); len(t) > 0 && string(t) != "null" {
			return s
		}
	}
	return nil
}

// ReadServersFile reads server entries of tenant from a JSON Lines file,
// one server a line: {"server" (or "name"), "title", "description"}; other
// fields (category, web) are ignored. Text is sanitised and cut to the
// limits as an import from a live server is.
func ReadServersFile(path, tenant string) ([]cards.ServerInfo, error) {
	data, err := readLimited(path)
	if err != nil {
		return nil, err
	}
	var out []cards.ServerInfo
	seen := map[string]int{}
	dec := json.NewDecoder(bytes.NewReader(data))
	for at := 1; ; at++ {
		var row struct {
			Server      string `json:"server"`
			Name        string `json:"name"`
			Title       string `json:"title"`
			Description string `json:"description"`
		}
		if err := dec.Decode(&row); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, fmt.Errorf("%s: line %d: %v", path, at, err)
		}
		name := row.Server
		if name == "" {
			name = row.Name
		}
		if !cards.ValidName(name) {
			return nil, fmt.Errorf("%s: line %d: server %q must match [A-Za-z0-9_.-]{1,%d}", path, at, name, cards.MaxNameLen)
		}
		if first, dup := seen[name]; dup {
			return nil, fmt.Errorf("%s: line %d: server %q again (first on line %d)", path, at, name, first)
		}
		seen[name] = at
		out = append(out, cards.ServerInfo{Tenant: tenant, Name: name,
			Title:       cards.CutAtWord(cards.Sanitize(row.Title), cards.MaxSummaryLen),
			Description: cards.CutAtWord(cards.Sanitize(row.Description), cards.MaxDescriptionLen)})
	}
	return out, nil
}

func readLimited(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(data) > MaxFileBytes {
		return nil, fmt.Errorf("%s: larger than %d MiB", path, MaxFileBytes>>20)
	}
	return data, nil
}
