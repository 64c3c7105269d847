// Package toolformat shapes a shortlist of cards the way a model provider
// takes tools, so an orchestrator hands cardex's answer to its model API as
// it is:
//
//   - anthropic_tool_reference: Anthropic's client-side tool search. The
//     answer is the tool_result block of the model's search call, whose
//     content is one tool_reference block per tool; each tool's definition
//     carries defer_loading: true, for the request's tools array (a
//     tool_reference must name a tool defined there).
//   - anthropic_tools: the plain Messages API tool definitions
//     {name, description, input_schema}; the answer is their array.
//   - openai_tool_search: OpenAI Responses' client-executed tool_search. The
//     answer is the tool_search_output item of the model's tool_search_call,
//     carrying the function tools to load.
//   - openai_functions: the plain Responses function tools
//     {type: "function", name, description, parameters, strict}; the answer
//     is their array.
//
// Every tool is named by toolname.Provider, which both providers accept, and
// which AuthorizeCall, DescribeTool and call_tool take back. Schemas are sent
// as registered (byte for byte, so a prompt cache stays warm), and strict is
// true only when the schema already meets OpenAI's strict mode (Strict).
package toolformat

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"github.com/seed0cff8200/cardex/cards"
	"github.com/seed0cff8200/cardex/internal/codec/toolname"
)

// Format is one of the shapes; None is cardex's own.
type Format string

// The formats.
const (
	None                   Format = ""
	AnthropicToolReference Format = "anthropic_tool_reference"
	AnthropicTools         Format = "anthropic_tools"
	OpenAIToolSearch       Format = "openai_tool_search"
	OpenAIFunctions        Format = "openai_functions"
)

// Formats lists every format but None.
var Formats = []Format{AnthropicToolReference, AnthropicTools, OpenAIToolSearch, OpenAIFunctions}

// Limits.
const (
	// MaxCallIDLen bounds call_id, the id of the model's search call.
	MaxCallIDLen = 256
	// MaxDescriptionLen bounds a definition's description, in code points.
	MaxDescriptionLen = 1024
)

var callIDRule = regexp.MustCompile(`^[A-Za-z0-9_.:-]+$`)

// Parse reads a format name; field names the request field in errors.
func Parse(field, s string) (Format, error) {
	if s == "" {
		return None, nil
	}
	for _, f := range Formats {
		if Format(s) == f {
			return f, nil
		}
	}
	names := make([]string, len(Formats))
	for i, f := range Formats {
		names[i] = string(f)
	}
	return None, cards.Invalid(field, "is %q; it must be one of %s, or empty", cards.Cut(s, 40), strings.Join(names, ", "))
}

// Search reports whether the format answers a provider's tool search call
// (and so needs its call id).
func (f Format) Search() bool { return f == AnthropicToolReference || f == OpenAIToolSearch }

// CheckCallID checks the id of the model's search call that a tool-search
// format answers: required there (Anthropic's tool_use id, OpenAI's
// tool_search_call call_id), refused elsewhere.
func CheckCallID(f Format, field, id string) error {
	switch {
	case !f.Search() && id != "":
		return cards.Invalid(field, "is only used with format %s or %s", AnthropicToolReference, OpenAIToolSearch)
	case !f.Search():
		return nil
	case id == "":
		return cards.Invalid(field, "is required with format %s: the id of the model's search call (Anthropic: the tool_use block's id; OpenAI: the tool_search_call's call_id)", f)
	case len(id) > MaxCallIDLen:
		return cards.Invalid(field, "is %d characters; the limit is %d", len(id), MaxCallIDLen)
	case !callIDRule.MatchString(id):
		return cards.Invalid(field, "must match [A-Za-z0-9_.:-]{1,%d}", MaxCallIDLen)
	}
	return nil
}

// ParseRequest reads a request's format and call id (fields "format" and
// "call_id"), as every surface takes them: Parse, then CheckCallID.
func ParseRequest(format, callID string) (Format, error) {
	f, err := Parse("format", format)
	if err == nil {
		err = CheckCallID(f, "call_id", callID)
	}
	return f, err
}

// Shape is a shortlist in format f: each tool's Definition, in order, and
// the Answer to hand the provider (both nil for None).
func Shape(f Format, cs []cards.Card, callID string) (defs []json.RawMessage, answer json.RawMessage) {
	if f == None {
		return nil, nil
	}
	defs = make([]json.RawMessage, len(cs))
	for i := range cs {
		defs[i] = Definition(f, &cs[i])
	}
	return defs, Answer(f, cs, defs, callID)
}

// Definition is a card's tool definition in format f (nil for None).
func Definition(f Format, c *cards.Card) json.RawMessage {
	name := toolname.Provider(c.Server, c.Name)
	var v any
	switch f {
	case AnthropicToolReference, AnthropicTools:
		v = anthropicTool{Name: name, Description: description(c), InputSchema: inputSchema(c), DeferLoading: f == AnthropicToolReference}
	case OpenAIToolSearch, OpenAIFunctions:
		in := inputSchema(c)
		v = openAIFunction{Type: "function", Name: name, Description: description(c), Parameters: in, Strict: Strict(in),
			DeferLoading: f == OpenAIToolSearch}
	default:
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil { // schemas are valid JSON once normalised
		panic(fmt.Sprintf("toolformat: %v", err))
	}
	return b
}

// Answer is what the orchestrator hands the provider for a shortlist whose
// definitions are defs (Definition of each tool, in order): the tool_result
// block (anthropic_tool_reference), the tool_search_output item
// (openai_tool_search), or the definitions' array (the plain formats).
// callID is the model's search call's id (see CheckCallID).
func Answer(f Format, cs []cards.Card, defs []json.RawMessage, callID string) json.RawMessage {
	if defs == nil {
		defs = []json.RawMessage{}
	}
	var v any
	switch f {
	case None:
		return nil
	case AnthropicToolReference:
		refs := make([]toolReference, len(cs))
		for i := range cs {
			refs[i] = toolReference{Type: "tool_reference", ToolName: toolname.Provider(cs[i].Server, cs[i].Name)}
		}
		v = toolResult{Type: "tool_result", ToolUseID: callID, Content: refs}
	case OpenAIToolSearch:
		v = toolSearchOutput{Type: "tool_search_output", CallID: callID, Execution: "client", Status: "completed", Tools: defs}
	default:
		v = defs
	}
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("toolformat: %v", err))
	}
	return b
}

// Wire shapes (see docs/INTEGRATIONS.md for the providers' references).
type (
	anthropicTool struct {
		Name         string          `json:"name"`
		Description  string          `json:"description,omitempty"`
		InputSchema  json.RawMessage `json:"input_schema"`
		DeferLoading bool            `json:"defer_loading,omitempty"`
	}
	toolReference struct {
		Type     string `json:"type"`
		ToolName string `json:"tool_name"`
	}
	toolResult struct {
		Type      string          `json:"type"`
		ToolUseID string          `json:"tool_use_id"`
		Content   []toolReference `json:"content"`
	}
	openAIFunction struct {
		Type         string          `json:"type"`
		Name         string          `json:"name"`
		Description  string          `json:"description,omitempty"`
		Parameters   json.RawMessage `json:"parameters"`
		Strict       bool            `json:"strict"`
		DeferLoading bool            `json:"defer_loading,omitempty"`
	}
	toolSearchOutput struct {
		Type      string            `json:"type"`
		CallID    string            `json:"call_id"`
		Execution string            `json:"execution"`
		Status    string            `json:"status"`
		Tools     []json.RawMessage `json:"tools"`
	}
)

// description is what the model reads of a tool: its description (its
// summary when it has none) and when not to use it, cut to
// MaxDescriptionLen code points.
func description(c *cards.Card) string {
	d := c.Description
	if d == "" {
		d = c.Summary
	}
	if c.WhenNotToUse != "" {
		d += "\n\nNot for: " + c.WhenNotToUse
	}
	return cards.Cut(d, MaxDescriptionLen)
}

// inputSchema is the card's input schema as registered, or {"type":"object"}
// when it has none or it accepts anything (true, {}): both providers want an
// object schema.
func inputSchema(c *cards.Card) json.RawMessage {
	s := strings.TrimSpace(string(c.InputSchema))
	if s == "" || s == "true" || s == "{}" {
		return json.RawMessage(`{"type":"object"}`)
	}
	return json.RawMessage(c.InputSchema)
}
