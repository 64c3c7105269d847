// Package mcpfront serves cardex to MCP clients over streamable HTTP: exactly
// three tools with fixed definitions written by cardex — search_tools,
// describe_tool and call_tool — instead of every upstream tool's definition.
//
// The caller is identified on every HTTP request by its bearer token (the
// token file maps it to tenant, subject and scopes); requests without a token
// are refused unless the token file enables anonymous access. tools/list is
// the same three definitions for everyone and never depends on earlier
// requests; what a caller may search, describe and call is decided per
// request by the gateway.
package mcpfront

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/seed0cff8200/cardex/cards"
	"github.com/seed0cff8200/cardex/internal/cardjson"
	"github.com/seed0cff8200/cardex/internal/gateway"
	"github.com/seed0cff8200/cardex/internal/tokens"
	"github.com/seed0cff8200/cardex/internal/upstream"
	"github.com/seed0cff8200/cardex/retriever"
)

// Path is where cardex serves MCP.
const Path = "/mcp"

// Config is what NewHandler needs.
type Config struct {
	Gateway *gateway.Gateway
	Tokens  *tokens.Table
	Logger  *slog.Logger
	Version string
}

// Tools returns the three fixed tool definitions.
func Tools() []*mcp.Tool {
	f := false
	t := true
	return []*mcp.Tool{
		{
			Name:  gateway.SearchTools,
			Title: "Search tools",
			Description: "Find the tools you may use for a task. Returns names, servers and one-line summaries, best match first. " +
				"When the task has several steps, pass them as intents (one short sentence each): every step gets its tools. " +
				"Then call describe_tool for the full definition of the one you want, and call_tool to run it.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{` +
				`"query":{"type":"string","maxLength":200,"description":"What you want to do, in plain words (at most 200 characters). Empty lists every tool you may use."},` +
				`"intents":{"type":"array","maxItems":8,"items":{"type":"string","maxLength":200},"description":"The steps of a multi-step task, one short sentence each (at most 8), e.g. [\"create a word document\", \"convert it to PDF\"]. Each step is searched on its own and the results are merged, each step's best tool first; each result lists the steps it answers (0-based)."},` +
				`"limit":{"type":"integer","minimum":1,"description":"How many results (default 20; more than 50 is capped at 50)."},` +
				`"cursor":{"type":"string","description":"next_cursor of a previous answer to the same query (without intents), for the next page."}},` +
				`"required":["query"],"additionalProperties":false}`),
			Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, DestructiveHint: &f, OpenWorldHint: &f},
		},
		{
			Name:  gateway.DescribeTool,
			Title: "Describe a tool",
			Description: "Show one tool's full definition: summary, description, input and output JSON schemas and behaviour hints. " +
				"Give server too when several servers have a tool of that name.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{` +
				`"name":{"type":"string","description":"The tool's name, as search_tools returned it."},` +
				`"server":{"type":"string","description":"The tool's server, when the name alone is ambiguous."}},` +
				`"required":["name"],"additionalProperties":false}`),
			Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, DestructiveHint: &f, OpenWorldHint: &f},
		},
		{
			Name:  gateway.CallTool,
			Title: "Call a tool",
			Description: "Run one tool with arguments that match its input schema (see describe_tool) and return its result. " +
				"The call is authorized on its own; a tool you may not use is unknown.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{` +
				`"name":{"type":"string","description":"The tool's name."},` +
				`"server":{"type":"string","description":"The tool's server, when the name alone is ambiguous."},` +
				`"arguments":{"type":"object","description":"The tool's arguments, matching its input schema."}},` +
				`"required":["name"],"additionalProperties":false}`),
			Annotations: &mcp.ToolAnnotations{DestructiveHint: &t, OpenWorldHint: &t},
		},
	}
}

// NewServer builds the MCP server with the three tools. Its tool list never
// changes.
func NewServer(cfg Config) *mcp.Server {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "cardex", Title: "cardex tool catalogue", Version: cfg.Version}, &mcp.ServerOptions{
		Instructions: "This server gives you many tools through three: search_tools finds the tools you may use, " +
			"describe_tool shows one tool's schema, call_tool runs it.",
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{}},
	})
	f := &front{gw: cfg.Gateway, tokens: cfg.Tokens, log: log}
	ts := Tools()
	s.AddTool(ts[0], f.search)
	s.AddTool(ts[1], f.describe)
	s.AddTool(ts[2], f.call)
	return s
}

// NewHandler is the HTTP handler for /mcp: bearer-token authentication in
// front of a stateless streamable-HTTP MCP server.
func NewHandler(cfg Config) http.Handler {
	srv := NewServer(cfg)
	mcpHandler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
		&mcp.StreamableHTTPOptions{Stateless: true, Logger: cfg.Logger})
	table := cfg.Tokens
	verify := func(_ context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
		id, ok := table.Lookup(token)
		if !ok {
			return nil, fmt.Errorf("%w: unknown bearer token", auth.ErrInvalidToken)
		}
		return &auth.TokenInfo{Scopes: id.Scopes, UserID: id.Tenant + "/" + id.Subject,
			Extra: map[string]any{"tenant": id.Tenant, "subject": id.Subject}}, nil
	}
	withToken := auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(mcpHandler)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") == "" {
			if _, ok := table.Anonymous(); ok {
				mcpHandler.ServeHTTP(w, r)
				return
			}
			w.Header().Set("WWW-Authenticate", `Bearer realm="cardex"`)
			http.Error(w, "cardex needs a bearer token: Authorization: Bearer TOKEN", http.StatusUnauthorized)
			return
		}
		withToken.ServeHTTP(w, r)
	})
}

type front struct {
	gw     *gateway.Gateway
	tokens *tokens.Table
	log    *slog.Logger
}

// caller is the identity of the request: the bearer token's, or the
// anonymous one when the request had no token and anonymous access is on.
func (f *front) caller(req *mcp.CallToolRequest) (retriever.Caller, bool) {
	if req.Extra != nil && req.Extra.TokenInfo != nil {
		ti := req.Extra.TokenInfo
		tenant, _ := ti.Extra["tenant"].(string)
		subject, _ := ti.Extra["subject"].(string)
		if tenant != "" {
			return retriever.Caller{Tenant: tenant, Subject: subject, Scopes: ti.Scopes}, true
		}
		return retriever.Caller{}, false
	}
	if req.Extra != nil && req.Extra.Header.Get("Authorization") != "" {
		return retriever.Caller{}, false
	}
	if id, ok := f.tokens.Anonymous(); ok {
		return retriever.Caller{Tenant: id.Tenant, Subject: id.Subject, Scopes: id.Scopes}, true
	}
	return retriever.Caller{}, false
}

func decode(req *mcp.CallToolRequest, v any) error {
	raw := req.Params.Arguments
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		raw = json.RawMessage("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("invalid arguments for %s: %v", req.Params.Name, err)
	}
	return nil
}

func toolError(msg string) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: msg}}}
}

func jsonResult(v any) (*mcp.CallToolResult, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}, StructuredContent: json.RawMessage(b)}, nil
}

// errorResult turns an expected error into a tool error the model can read.
func (f *front) errorResult(tool string, err error) (*mcp.CallToolResult, error) {
	var d *gateway.Denial
	var ce *upstream.CallError
	switch {
	case errors.As(err, &d):
		return toolError(d.Error()), nil
	case errors.As(err, &ce):
		return toolError(ce.Error()), nil
	case errors.Is(err, cards.ErrInvalid):
		return toolError(err.Error()), nil
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return toolError("the request was cancelled or timed out"), nil
	}
	f.log.Error("mcp tool failed", "tool", tool, "err", err)
	return toolError("internal error"), nil
}

type searchArgs struct {
	Query   string   `json:"query"`
	Intents []string `json:"intents"`
	Limit   int      `json:"limit"`
	Cursor  string   `json:"cursor"`
}

// noMatch is search_tools' answer when nothing matches well enough.
const noMatch = "no tool matches; rephrase the request in other words, or split it into intents (one per step)"

func (f *front) search(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	c, ok := f.caller(req)
	if !ok {
		return toolError("not authenticated"), nil
	}
	var a searchArgs
	if err := decode(req, &a); err != nil {
		return toolError(err.Error()), nil
	}
	var rows []gateway.ToolSummary
	var next string
	var err error
	abstained := false
	if len(a.Intents) > 0 {
		if a.Cursor != "" {
			return toolError("cursor: pages a search without intents; a search with intents answers in one page (raise limit)"), nil
		}
		rows, abstained, err = f.gw.SearchIntents(ctx, c, a.Query, a.Intents, a.Limit)
	} else {
		rows, next, err = f.gw.SearchPage(ctx, c, a.Query, a.Limit, a.Cursor)
		abstained = strings.TrimSpace(a.Query) != "" && len(rows) == 0 && a.Cursor == ""
	}
	if err != nil {
		return f.errorResult(gateway.SearchTools, err)
	}
	if abstained {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: noMatch}},
			StructuredContent: map[string]any{"tools": []gateway.ToolSummary{}, "no_match": true}}, nil
	}
	out := map[string]any{"tools": rows}
	if next != "" {
		out["next_cursor"] = next
	}
	return jsonResult(out)
}

type describeArgs struct {
	Name   string `json:"name"`
	Server string `json:"server"`
}

// Described is describe_tool's answer: the card a model needs, in the one
// JSON shape of a card (internal/cardjson).
type Described = cardjson.Card

// DescribeCard renders a card for describe_tool.
func DescribeCard(c *cards.Card) Described { return cardjson.ForModel(c) }

func (f *front) describe(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	c, ok := f.caller(req)
	if !ok {
		return toolError("not authenticated"), nil
	}
	var a describeArgs
	if err := decode(req, &a); err != nil {
		return toolError(err.Error()), nil
	}
	card, err := f.gw.Describe(ctx, c, a.Name, a.Server)
	var d *gateway.Denial
	if errors.As(err, &d) && d.Ambiguous != nil {
		// Not an error: the answer is the candidate servers.
		return jsonResult(map[string]any{"ambiguous": true, "servers": d.Ambiguous, "message": d.Message})
	}
	if err != nil {
		return f.errorResult(gateway.DescribeTool, err)
	}
	return jsonResult(DescribeCard(&card))
}

type callArgs struct {
	Name      string          `json:"name"`
	Server    string          `json:"server"`
	Arguments json.RawMessage `json:"arguments"`
}

func (f *front) call(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	c, ok := f.caller(req)
	if !ok {
		return toolError("not authenticated"), nil
	}
	var a callArgs
	if err := decode(req, &a); err != nil {
		return toolError(err.Error()), nil
	}
	if strings.TrimSpace(string(a.Arguments)) == "null" {
		a.Arguments = nil
	}
	res, err := f.gw.Call(ctx, c, "mcp", a.Name, a.Server, a.Arguments)
	if err != nil {
		return f.errorResult(gateway.CallTool, err)
	}
	// The upstream's result as it is: content, structured content, isError.
	out := &mcp.CallToolResult{Content: res.Result.Content, StructuredContent: res.Result.StructuredContent, IsError: res.Result.IsError}
	if out.Content == nil {
		out.Content = []mcp.Content{}
	}
	return out, nil
}
