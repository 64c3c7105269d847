// Package mcpfront serves cardex to MCP clients over streamable HTTP: three
// meta-tools with fixed definitions written by cardex — search_tools,
// describe_tool and call_tool — instead of every upstream tool's definition,
// plus what the token's disclosure mode lists (its pinned tools, or in full
// mode every tool it may use, under their qualified names SERVER__NAME).
//
// The caller is identified on every HTTP request by its bearer token (the
// token file maps it to tenant, subject, scopes and disclosure); requests
// without a token are refused unless the token file enables anonymous access.
// Each token has an MCP server of its own, so its sessions are told
// (notifications/tools/list_changed) when its list changes. Disclosure
// changes what is listed, never what is permitted: every describe and call,
// of a listed tool or not, is authorized on its own by the gateway.
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
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/seed0cff8200/cardex/cards"
	"github.com/seed0cff8200/cardex/internal/access/tokens"
	"github.com/seed0cff8200/cardex/internal/codec/cardjson"
	"github.com/seed0cff8200/cardex/internal/codec/toolformat"
	"github.com/seed0cff8200/cardex/internal/codec/toolname"
	"github.com/seed0cff8200/cardex/internal/execution/gateway"
	"github.com/seed0cff8200/cardex/internal/execution/upstream"
	"github.com/seed0cff8200/cardex/retriever"
)

// Path is where cardex serves MCP.
const Path = "/mcp"

// SessionIdle is how long a session may go without a request before it is
// closed (the client then starts a new one).
const SessionIdle = 30 * time.Minute

// Config is what NewHandler needs.
type Config struct {
	Gateway *gateway.Gateway
	Tokens  *tokens.Table
	Logger  *slog.Logger
	Version string
	// Stateless serves every request on its own, without sessions (for
	// replicas behind a load balancer without session affinity): a client
	// sees a change of its list at its next tools/list, or through
	// subscriptions/listen (protocol 2026-07-28). Otherwise a client that
	// initializes holds a session and is sent list_changed.
	Stateless bool
	// PageSize is how many tools a full-mode tools/list page holds
	// (DefaultPageSize when 0).
	PageSize int
	// HostChecked says the listener checks Host names itself (hostguard,
	// which also answers the names it is told): the MCP SDK's own check,
	// loopback names only, is then off.
	HostChecked bool
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
				"Then call describe_tool for the full definition of the one you want, and call_tool to run it. " +
				"Two operators work in the query and in each intent: \"select:SERVER/NAME,SERVER/NAME\" returns exactly those tools, in that order " +
				"(a tool you may not use is absent, as if it did not exist); \"+word\" keeps only the tools with that word in their server, name or description " +
				"and ranks them by all the words (\"+slack send message\").",
			InputSchema: json.RawMessage(`{"type":"object","properties":{` +
				`"query":{"type":"string","maxLength":200,"description":"What you want to do, in plain words (at most 200 characters); or select:SERVER/NAME,SERVER/NAME for exactly those tools; +word requires a word (e.g. +github open an issue). Empty lists every tool you may use."},` +
				`"intents":{"type":"array","maxItems":8,"items":{"type":"string","maxLength":200},"description":"The steps of a multi-step task, one short sentence each (at most 8), e.g. [\"create a word document\", \"convert it to PDF\"]. Each step is searched on its own and the results are merged, each step's best tool first; each result lists the steps it answers (0-based)."},` +
				`"no_companions":{"type":"boolean","description":"With intents: leave out the tools that past sessions used together with the best matches (each such result names it in companion_of)."},` +
				`"limit":{"type":"integer","minimum":1,"description":"How many results (default 20; more than 50 is capped at 50)."},` +
				`"cursor":{"type":"string","description":"next_cursor of a previous answer to the same query (without intents), for the next page."},` +
				`"format":{"type":"string","enum":["anthropic_tool_reference","anthropic_tools","openai_tool_search","openai_functions"],"description":"For orchestrators: answer with full tool definitions shaped for a model provider (see cardex's docs/INTEGRATIONS.md), ranked as DiscoverTools ranks them, instead of names and summaries."},` +
				`"call_id":{"type":"string","maxLength":256,"description":"With format anthropic_tool_reference or openai_tool_search: the id of the model's search call this answers."}},` +
				`"additionalProperties":false}`),
			Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, DestructiveHint: &f, OpenWorldHint: &f},
		},
		{
			Name:  gateway.DescribeTool,
			Title: "Describe a tool",
			Description: "Show one tool's full definition: summary, description, input and output JSON schemas and behaviour hints. " +
				"Give server too when several servers have a tool of that name.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{` +
				`"name":{"type":"string","description":"The tool's name, as search_tools returned it, or its qualified name SERVER__NAME."},` +
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
				`"name":{"type":"string","description":"The tool's name, or its qualified name SERVER__NAME."},` +
				`"server":{"type":"string","description":"The tool's server, when the name alone is ambiguous."},` +
				`"arguments":{"type":"object","description":"The tool's arguments, matching its input schema."}},` +
				`"required":["name"],"additionalProperties":false}`),
			Annotations: &mcp.ToolAnnotations{DestructiveHint: &t, OpenWorldHint: &t},
		},
	}
}

// Front is the HTTP handler for /mcp: bearer-token authentication in front
// of a streamable-HTTP MCP server per token. Close stops it following the
// catalogue.
type Front struct {
	f        *front
	handler  http.Handler
	stop     context.CancelFunc
	done     chan struct{}
	active   atomic.Int64 // requests in flight, but for long-lived streams
	draining atomic.Bool
}

// NewHandler builds the /mcp handler and starts following the catalogue, so
// that sessions learn when their token's list changes.
func NewHandler(cfg Config) *Front {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	f := &front{gw: cfg.Gateway, tokens: cfg.Tokens, log: log, version: cfg.Version, stateless: cfg.Stateless,
		pageSize: cfg.PageSize, grants: map[string]*grant{}}
	if f.pageSize <= 0 {
		f.pageSize = DefaultPageSize
	}
	fr := &Front{f: f, done: make(chan struct{})}
	opts := &mcp.StreamableHTTPOptions{Stateless: cfg.Stateless, Logger: cfg.Logger, DisableLocalhostProtection: cfg.HostChecked}
	if !cfg.Stateless {
		opts.SessionTimeout = SessionIdle
	}
	sdk := mcp.NewStreamableHTTPHandler(fr.server, opts)
	inner := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fr.serveMCP(w, r, sdk) })
	table := cfg.Tokens
	verify := func(_ context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
		id, ok := table.Lookup(token)
		if !ok {
			return nil, fmt.Errorf("%w: unknown bearer token", auth.ErrInvalidToken)
		}
		// UserID binds a session to the token that opened it.
		return &auth.TokenInfo{Scopes: id.Scopes, UserID: id.Key, Extra: map[string]any{identityKey: id}}, nil
	}
	withToken := auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(inner)
	fr.handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") == "" {
			if _, ok := table.Anonymous(); ok {
				inner.ServeHTTP(w, r)
				return
			}
			w.Header().Set("WWW-Authenticate", `Bearer realm="cardex"`)
			http.Error(w, "cardex needs a bearer token: Authorization: Bearer TOKEN", http.StatusUnauthorized)
			return
		}
		withToken.ServeHTTP(w, r)
	})
	ctx, stop := context.WithCancel(context.Background())
	fr.stop = stop
	go func() {
		defer close(fr.done)
		f.follow(ctx)
	}()
	return fr
}

func (fr *Front) ServeHTTP(w http.ResponseWriter, r *http.Request) { fr.handler.ServeHTTP(w, r) }

// server is the SDK's getServer: the MCP server of the request's token.
func (fr *Front) server(r *http.Request) *mcp.Server {
	id, ok := identity(fr.f.tokens, auth.TokenInfoFromContext(r.Context()), r.Header)
	if !ok {
		return nil
	}
	return fr.f.grantFor(id).srv
}

// serveMCP checks that a session is used by the token that opened it, and
// counts the requests in flight for Drain.
func (fr *Front) serveMCP(w http.ResponseWriter, r *http.Request, sdk http.Handler) {
	if fr.draining.Load() {
		http.Error(w, "cardex is shutting down", http.StatusServiceUnavailable)
		return
	}
	if sid := r.Header.Get("Mcp-Session-Id"); sid != "" && !fr.f.stateless {
		id, ok := identity(fr.f.tokens, auth.TokenInfoFromContext(r.Context()), r.Header)
		if !ok || !fr.f.grantFor(id).owns(sid) {
			http.Error(w, "session not found", http.StatusNotFound)
			return
		}
	}
	// GET streams (sessions) and subscriptions/listen (stateless) last as
	// long as the client listens: they are not work in flight.
	if r.Method == http.MethodPost && r.Header.Get("Mcp-Method") != "subscriptions/listen" {
		fr.active.Add(1)
		defer fr.active.Add(-1)
	}
	sdk.ServeHTTP(w, r)
}

// Drain refuses new requests, waits until the requests in flight are
// answered (or ctx ends) and closes every session, ending the streams that
// would otherwise hold an HTTP server's Shutdown until its deadline.
func (fr *Front) Drain(ctx context.Context) {
	fr.draining.Store(true)
	for fr.active.Load() > 0 && ctx.Err() == nil {
		select {
		case <-ctx.Done():
		case <-time.After(10 * time.Millisecond):
		}
	}
	fr.f.closeSessions()
}

// Close stops following the catalogue and closes every session.
func (fr *Front) Close() {
	fr.stop()
	<-fr.done
	fr.f.closeSessions()
}

// identityKey holds the token's tokens.Identity in auth.TokenInfo.Extra.
const identityKey = "cardex.identity"

// identity is who a request is: its bearer token's identity, or the
// anonymous one when it carries no token and anonymous access is on.
func identity(table *tokens.Table, ti *auth.TokenInfo, h http.Header) (tokens.Identity, bool) {
	if ti != nil {
		id, ok := ti.Extra[identityKey].(tokens.Identity)
		return id, ok && id.Tenant != ""
	}
	if h.Get("Authorization") != "" {
		return tokens.Identity{}, false
	}
	return table.Anonymous()
}

type front struct {
	gw        *gateway.Gateway
	tokens    *tokens.Table
	log       *slog.Logger
	version   string
	stateless bool
	pageSize  int

	mu     sync.Mutex
	grants map[string]*grant // by tokens.Identity.Key
}

// grantOf is the grant of the request's identity.
func (f *front) grantOf(req *mcp.CallToolRequest) (*grant, bool) {
	if req.Extra == nil {
		return nil, false
	}
	id, ok := identity(f.tokens, req.Extra.TokenInfo, req.Extra.Header)
	if !ok {
		return nil, false
	}
	return f.grantFor(id), true
}

// caller is the identity of the request: the bearer token's, or the
// anonymous one when the request had no token and anonymous access is on.
func (f *front) caller(req *mcp.CallToolRequest) (retriever.Caller, bool) {
	g, ok := f.grantOf(req)
	if !ok {
		return retriever.Caller{}, false
	}
	return g.caller, true
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
	Format  string   `json:"format"`
	CallID  string   `json:"call_id"`

	NoCompanions bool `json:"no_companions"`
}

// Shaped is search_tools' answer with a format: the shortlist's definitions
// in that format and the answer to hand the provider (toolformat), as
// DiscoverTools' definition_json and provider_json carry them.
type Shaped struct {
	Format      string            `json:"format"`
	Definitions []json.RawMessage `json:"definitions"`
	Result      json.RawMessage   `json:"result"`
	Abstained   bool              `json:"abstained,omitempty"`
}

// shaped answers search_tools with a format.
func (f *front) shaped(ctx context.Context, c retriever.Caller, a searchArgs) (*mcp.CallToolResult, error) {
	format, err := toolformat.ParseRequest(a.Format, a.CallID)
	if err == nil && a.Cursor != "" {
		err = cards.Invalid("cursor", "pages a search without format; a search with a format answers in one page (raise limit)")
	}
	if err != nil {
		return toolError(err.Error()), nil
	}
	res, err := f.gw.Discover(ctx, c, a.Query, a.Intents, a.Limit, a.NoCompanions)
	if err != nil {
		return f.errorResult(gateway.SearchTools, err)
	}
	out := Shaped{Format: string(format), Abstained: res.Abstained}
	out.Definitions, out.Result = toolformat.Shape(format, res.Cards(), a.CallID)
	return jsonResult(out)
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
	if a.Format != "" || a.CallID != "" {
		return f.shaped(ctx, c, a)
	}
	var rows []gateway.ToolSummary
	var next string
	var err error
	abstained := false
	if len(a.Intents) > 0 {
		if a.Cursor != "" {
			return toolError("cursor: pages a search without intents; a search with intents answers in one page (raise limit)"), nil
		}
		rows, abstained, err = f.gw.SearchIntents(ctx, c, a.Query, a.Intents, a.Limit, a.NoCompanions)
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
// JSON shape of a card (internal/codec/cardjson), and the name to call it by.
type Described struct {
	cardjson.Card
	// QualifiedName is SERVER__NAME, the name to call the tool by directly
	// with tools/call (absent when the pair has none).
	QualifiedName string `json:"qualified_name,omitempty"`
}

// DescribeCard renders a card for describe_tool.
func DescribeCard(c *cards.Card) Described {
	q, _ := toolname.Qualify(c.Server, c.Name)
	return Described{Card: cardjson.ForModel(c), QualifiedName: q}
}

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
	g, ok := f.grantOf(req)
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
	res, err := f.gw.Call(ctx, g.caller, gateway.Origin{Via: gateway.ViaMCP, Disclosure: g.id.Disclosure}, a.Name, a.Server, a.Arguments)
	if err != nil {
		return f.errorResult(gateway.CallTool, err)
	}
	return upstreamResult(res), nil
}

// upstreamResult is the upstream's result as it is: content, structured
// content, isError.
func upstreamResult(res gateway.CallResult) *mcp.CallToolResult {
	out := &mcp.CallToolResult{Content: res.Result.Content, StructuredContent: res.Result.StructuredContent, IsError: res.Result.IsError}
	if out.Content == nil {
		out.Content = []mcp.Content{}
	}
	return out
}

// direct runs tools/call of a real tool's name (qualified or bare) exactly as
// call_tool would. A tool the caller may not use is an unknown tool, the
// JSON-RPC error the SDK answers for any name it does not know.
func (f *front) direct(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	g, ok := f.grantOf(req)
	if !ok {
		return toolError("not authenticated"), nil
	}
	args := req.Params.Arguments
	if strings.TrimSpace(string(args)) == "null" {
		args = nil
	}
	name := req.Params.Name
	res, err := f.gw.Call(ctx, g.caller, gateway.Origin{Via: gateway.ViaMCPDirect, Disclosure: g.id.Disclosure}, name, "", args)
	var d *gateway.Denial
	switch {
	case errors.As(err, &d) && d.Outcome == upstream.OutcomeDeniedUnknown:
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: d.Message}
	case errors.As(err, &d) && d.Ambiguous != nil:
		var qs []string
		for _, s := range d.Ambiguous {
			if q, ok := toolname.Qualify(s, name); ok {
				qs = append(qs, q)
			}
		}
		return toolError(fmt.Sprintf("tool %q is ambiguous: call it by its qualified name (one of %s)", name, strings.Join(qs, ", "))), nil
	case err != nil:
		return f.errorResult(name, err)
	}
	return upstreamResult(res), nil
}
