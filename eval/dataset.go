// Package eval measures retrieval quality and token savings on labelled
// datasets: it loads a dataset (tools.jsonl, queries.jsonl), registers the
// tools as cards, runs every query in the lexical, semantic and hybrid
// modes, and reports recall@K, MRR and nDCG@10 with group semantics, the
// misses, and what the shortlist saves in tokens against shipping the whole
// catalogue.
//
// The dataset format is the one of shared/eval/README.md:
//
//	tools.jsonl   {"name", "server", "tool_name", "description", "input_schema"}
//	queries.jsonl {"id", "query", "expected": [...], "expected_groups": [[...], ...]}
//
// A tool's label is its "name" ("server/tool_name" where the catalogue has
// servers, the bare name otherwise). A query's needs are its
// expected_groups when present, otherwise one singleton group per expected
// label; a need is met when any member of its group is retrieved.
package eval

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// Tool is one row of tools.jsonl.
type Tool struct {
	// Name is the label used by queries.
	Name string `json:"name"`
	// Server is the namespace, empty where the catalogue has none.
	Server string `json:"server"`
	// ToolName is the bare tool name; empty means Name.
	ToolName    string          `json:"tool_name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
}

// BareName is the tool's name without its server.
func (t *Tool) BareName() string {
	if t.ToolName != "" {
		return t.ToolName
	}
	return t.Name
}

// HasSchema reports whether the tool carries an input schema.
func (t *Tool) HasSchema() bool {
	s := bytes.TrimSpace(t.InputSchema)
	return len(s) > 0 && string(s) != "null"
}

// Query is one row of queries.jsonl.
type Query struct {
	ID       string     `json:"id"`
	Query    string     `json:"query"`
	Expected []string   `json:"expected"`
	Groups   [][]string `json:"expected_groups,omitempty"`
	// Type is informational ("single", "multi"); subsets are computed from
	// the number of needs, not from it.
	Type     string `json:"type,omitempty"`
	Category string `json:"category,omitempty"`
	// Intents are the task's parts, one sub-request each (LiveMCPBench:
	// the annotators' step plan), standing in for what an orchestrator's
	// model sends as DiscoverTools intents.
	Intents []string `json:"intents,omitempty"`
}

// Needs returns the query's needs: expected_groups when present, otherwise
// one singleton group per expected label.
func (q *Query) Needs() [][]string {
	if len(q.Groups) > 0 {
		return q.Groups
	}
	out := make([][]string, len(q.Expected))
	for i, e := range q.Expected {
		out[i] = []string{e}
	}
	return out
}

// Server is one row of servers.jsonl: what a server is, in its authors'
// words.
type Server struct {
	Server      string `json:"server"`
	Title       string `json:"title"`
	Description string `json:"description"`
	Category    string `json:"category,omitempty"`
	Web         string `json:"web,omitempty"`
}

// Dataset is one loaded dataset folder.
type Dataset struct {
	Name    string // the folder's base name
	Dir     string
	Tools   []Tool
	Queries []Query  // nil when the folder has no queries.jsonl
	Servers []Server // nil when the folder has no servers.jsonl
	// Examples are search examples by tool label (examples.jsonl, or
	// another file given to LoadExamples), registered on the cards; nil
	// when there are none.
	Examples map[string][]string
	// ExamplesFile is the file Examples came from.
	ExamplesFile string
}

// ExamplesFileName is a dataset folder's search examples: one line per
// tool, {"name": label, "examples": [...]}.
const ExamplesFileName = "examples.jsonl"

// WithoutExamples returns a shallow copy of the dataset without its search
// examples.
func (d *Dataset) WithoutExamples() *Dataset {
	out := *d
	out.Examples, out.ExamplesFile = nil, ""
	return &out
}

// LoadExamples reads a search-examples file ({"name", "examples"} a line)
// into d.Examples, replacing what it held. Every name must be a tool of the
// dataset, at most once; tools without a line get no examples.
func (d *Dataset) LoadExamples(path string) error {
	labels := make(map[string]bool, len(d.Tools))
	for _, t := range d.Tools {
		labels[t.Name] = true
	}
	ex := map[string][]string{}
	if err := readJSONL(path, func(line int, raw []byte) error {
		var row struct {
			Name     string   `json:"name"`
			Examples []string `json:"examples"`
		}
		if err := strictUnmarshal(raw, &row); err != nil {
			return err
		}
		switch {
		case !labels[row.Name]:
			return fmt.Errorf("tool %q is not in tools.jsonl", row.Name)
		case ex[row.Name] != nil:
			return fmt.Errorf("tool %q appears twice", row.Name)
		}
		ex[row.Name] = append([]string{}, row.Examples...)
		return nil
	}); err != nil {
		return err
	}
	d.Examples, d.ExamplesFile = ex, path
	return nil
}

// HasIntents reports whether any query carries intents.
func (d *Dataset) HasIntents() bool {
	for i := range d.Queries {
		if len(d.Queries[i].Intents) > 0 {
			return true
		}
	}
	return false
}

// HasSchemas reports whether any tool carries an input schema.
func (d *Dataset) HasSchemas() bool {
	for i := range d.Tools {
		if d.Tools[i].HasSchema() {
			return true
		}
	}
	return false
}

// Load reads a dataset folder: tools.jsonl (required), and servers.jsonl,
// examples.jsonl and queries.jsonl (optional). It checks that tool labels are unique, that query ids are
// unique and every query has a text and at least one need, and that every
// label a query names exists among the tools.
func Load(dir string) (*Dataset, error) {
	d := &Dataset{Name: filepath.Base(filepath.Clean(dir)), Dir: dir}
	if abs, err := filepath.Abs(dir); err == nil {
		d.Name = filepath.Base(abs)
	}
	toolsPath := filepath.Join(dir, "tools.jsonl")
	if err := readJSONL(toolsPath, func(line int, raw []byte) error {
		var t Tool
		if err := strictUnmarshal(raw, &t); err != nil {
			return err
		}
		if t.Name == "" {
			return errors.New(`"name" is required`)
		}
		d.Tools = append(d.Tools, t)
		return nil
	}); err != nil {
		return nil, err
	}
	if len(d.Tools) == 0 {
		return nil, fmt.Errorf("%s: no tools", toolsPath)
	}
	labels := make(map[string]bool, len(d.Tools))
	for _, t := range d.Tools {
		if labels[t.Name] {
			return nil, fmt.Errorf("%s: tool %q appears twice", toolsPath, t.Name)
		}
		labels[t.Name] = true
	}

	serversPath := filepath.Join(dir, "servers.jsonl")
	if _, err := os.Stat(serversPath); err == nil {
		if err := readJSONL(serversPath, func(line int, raw []byte) error {
			var s Server
			if err := strictUnmarshal(raw, &s); err != nil {
				return err
			}
			if s.Server == "" {
				return errors.New(`"server" is required`)
			}
			d.Servers = append(d.Servers, s)
			return nil
		}); err != nil {
			return nil, err
		}
	}

	examplesPath := filepath.Join(dir, ExamplesFileName)
	if _, err := os.Stat(examplesPath); err == nil {
		if err := d.LoadExamples(examplesPath); err != nil {
			return nil, err
		}
	}

	queriesPath := filepath.Join(dir, "queries.jsonl")
	if _, err := os.Stat(queriesPath); errors.Is(err, os.ErrNotExist) {
		return d, nil
	}
	ids := map[string]bool{}
	if err := readJSONL(queriesPath, func(line int, raw []byte) error {
		var q Query
		if err := strictUnmarshal(raw, &q); err != nil {
			return err
		}
		switch {
		case q.ID == "":
			return errors.New(`"id" is required`)
		case ids[q.ID]:
			return fmt.Errorf("query id %q appears twice", q.ID)
		case strings.TrimSpace(q.Query) == "":
			return fmt.Errorf("query %s: empty query", q.ID)
		}
		ids[q.ID] = true
		needs := q.Needs()
		if len(needs) == 0 {
			return fmt.Errorf("query %s: no expected tools", q.ID)
		}
		for i, g := range needs {
			if len(g) == 0 {
				return fmt.Errorf("query %s: expected group %d is empty", q.ID, i)
			}
			for _, name := range g {
				if !labels[name] {
					return fmt.Errorf("query %s: expected tool %q is not in tools.jsonl", q.ID, name)
				}
			}
		}
		d.Queries = append(d.Queries, q)
		return nil
	}); err != nil {
		return nil, err
	}
	return d, nil
}

// readJSONL calls fn for every non-blank line of a JSON Lines file, adding
// the file and line to any error.
func readJSONL(path string, fn func(line int, raw []byte) error) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 1<<16)
	for n := 1; ; n++ {
		raw, err := r.ReadBytes('\n')
		if len(bytes.TrimSpace(raw)) > 0 {
			if ferr := fn(n, raw); ferr != nil {
				return fmt.Errorf("%s:%d: %w", path, n, ferr)
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
	}
}

// strictUnmarshal decodes one JSON value. Unknown fields are allowed (the
// format has informational extras) but trailing data is not.
func strictUnmarshal(raw []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("more than one JSON value on the line")
	}
	return nil
}
