// Package gateway is what an agent can do through cardex, whatever the
// surface (the MCP front at /mcp, the gRPC ExecutionService behind `cardex
// tools`): search the tools it may use, describe one, and call one. Every
// describe and call is authorized on its own, exactly as AuthorizeCall does
// (tenant, active status, scopes, arguments against the input schema), before
// anything is forwarded to an upstream.
package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/seed0cff8200/cardex/cards"
	"github.com/seed0cff8200/cardex/internal/codec/toolname"
	"github.com/seed0cff8200/cardex/internal/execution/sqlquery"
	"github.com/seed0cff8200/cardex/internal/execution/upstream"
	"github.com/seed0cff8200/cardex/retriever"
)

// The meta-tools' limits.
const (
	MaxQueryLen    = 200 // search query, code points
	DefaultLimit   = 20
	MaxLimit       = 50  // larger limits are capped, not refused
	MaxSummaryLen  = 500 // summaries in search results, code points
	MaxNameLen     = cards.MaxNameLen
	SearchTools    = "search_tools"
	DescribeTool   = "describe_tool"
	CallTool       = "call_tool"
	unknownToolMsg = "unknown tool"
)

// MetaTools are the names of cardex's own tools. As a tool name given to
// describe_tool or call_tool they are unknown: meta-tools cannot be nested.
var MetaTools = []string{SearchTools, DescribeTool, CallTool}

// Executor runs an allowed call of a card on the card's upstream and
// returns the tool result. An error wrapping cards.ErrInvalid is a refusal of
// the arguments before anything was sent; an *upstream.CallError is a call
// that produced no result.
type Executor interface {
	Execute(ctx context.Context, tenant string, card *cards.Card, args json.RawMessage) (*mcp.CallToolResult, error)
}

// Gateway runs the three operations. Upstreams, Executors and Audit may be
// nil (then nothing of that kind can be called, and nothing is audited).
type Gateway struct {
	Retriever *retriever.Retriever
	// Upstreams forwards the calls of mcp_tool cards.
	Upstreams upstream.Caller
	// Executors run the calls of the other card kinds, by kind
	// (rest_operation: the REST executor).
	Executors map[cards.Kind]Executor
	Audit     *upstream.Audit
	Log       *slog.Logger
	// SQL runs the query cards of the SQL upstreams (nil: none).
	SQL *sqlquery.Pools
}

// executor is the one that runs calls of kind, or nil.
func (g *Gateway) executor(kind cards.Kind) Executor {
	if kind == cards.KindMCPTool {
		if g.Upstreams == nil {
			return nil
		}
		return mcpExecutor{g.Upstreams}
	}
	return g.Executors[kind]
}

// mcpExecutor forwards to the card's upstream MCP server.
type mcpExecutor struct{ up upstream.Caller }

func (m mcpExecutor) Execute(ctx context.Context, tenant string, card *cards.Card, args json.RawMessage) (*mcp.CallToolResult, error) {
	return m.up.Call(ctx, tenant, card.Server, card.Name, args)
}

// ToolSummary is one search result.
type ToolSummary struct {
	Name    string `json:"name"`
	Server  string `json:"server"`
	Summary string `json:"summary"`
	// Confidence and Intents are set for a search with intents: the
	// calibrated confidence and the (0-based) intents the tool answers.
	Confidence float64 `json:"confidence,omitempty"`
	Intents    []int   `json:"intents,omitempty"`
	// CompanionOf is set for a companion: the matched tool that past
	// sessions of the tenant used it with.
	CompanionOf *Ref `json:"companion_of,omitempty"`
}

// Ref names a tool of the caller's tenant.
type Ref struct {
	Server string `json:"server"`
	Name   string `json:"name"`
}

// MaxIntents is the most intents one search may carry.
const MaxIntents = retriever.MaxIntents

// SearchIntents ranks the caller's authorized tools for the parts of a task
// (and the query, when given) and merges them fairly, at most limit: see
// retriever.Request.Intents. Each intent is at most MaxQueryLen code points.
// It reports whether it abstained (no tool matched any part well enough).
func (g *Gateway) SearchIntents(ctx context.Context, c retriever.Caller, query string, intents []string, limit int, noCompanions bool) ([]ToolSummary, bool, error) {
	res, err := g.Discover(ctx, c, query, intents, limit, noCompanions)
	if err != nil {
		return nil, false, err
	}
	return Summaries(res), res.Abstained, nil
}

// Summaries are a shortlist's tools as a ranked search lists them (summary
// cut to MaxSummaryLen, with confidence, intents and companion).
func Summaries(res retriever.Result) []ToolSummary {
	out := make([]ToolSummary, 0, len(res.Tools))
	for _, t := range res.Tools {
		s := ToolSummary{Name: t.Card.Name, Server: t.Card.Server, Summary: cards.Cut(t.Card.Summary, MaxSummaryLen),
			Confidence: t.Scores.Confidence, Intents: t.Intents}
		if k := t.CompanionOf; k != nil {
			s.CompanionOf = &Ref{Server: k.Server, Name: k.Name}
		}
		out = append(out, s)
	}
	return out
}

// Discover is the shortlist behind SearchIntents, with the cards: the same
// ranking as DiscoveryService.DiscoverTools for the same caller, query,
// intents and top_k = limit (default DefaultLimit, capped at MaxLimit).
func (g *Gateway) Discover(ctx context.Context, c retriever.Caller, query string, intents []string, limit int, noCompanions bool) (retriever.Result, error) {
	if n := utf8.RuneCountInString(query); n > MaxQueryLen {
		return retriever.Result{}, cards.Invalid("query", "is %d characters; the limit is %d", n, MaxQueryLen)
	}
	if len(intents) > MaxIntents {
		return retriever.Result{}, cards.Invalid("intents", "has %d entries; the limit is %d", len(intents), MaxIntents)
	}
	for i, in := range intents {
		if n := utf8.RuneCountInString(in); n > MaxQueryLen {
			return retriever.Result{}, cards.Invalid(fmt.Sprintf("intents[%d]", i), "is %d characters; the limit is %d", n, MaxQueryLen)
		}
	}
	switch {
	case limit == 0:
		limit = DefaultLimit
	case limit < 0:
		return retriever.Result{}, cards.Invalid("limit", "is %d; it must be between 1 and %d (default %d)", limit, MaxLimit, DefaultLimit)
	case limit > MaxLimit:
		limit = MaxLimit
	}
	return g.Retriever.Discover(ctx, retriever.Request{Caller: c, Query: query, Intents: intents, TopK: limit, NoCompanions: noCompanions})
}

// Search lists the caller's authorized tools that match the query (every one,
// in (server, name) order, when the query is empty), at most limit.
func (g *Gateway) Search(ctx context.Context, c retriever.Caller, query string, limit int) ([]ToolSummary, error) {
	rows, _, err := g.SearchPage(ctx, c, query, limit, "")
	return rows, err
}

// SearchPage is Search from cursor on (a next cursor of a previous page of
// the same query; empty: the first page), with the cursor of the next page
// ("" after the last).
func (g *Gateway) SearchPage(ctx context.Context, c retriever.Caller, query string, limit int, cursor string) ([]ToolSummary, string, error) {
	if n := utf8.RuneCountInString(query); n > MaxQueryLen {
		return nil, "", cards.Invalid("query", "is %d characters; the limit is %d", n, MaxQueryLen)
	}
	switch {
	case limit == 0:
		limit = DefaultLimit
	case limit < 0:
		return nil, "", cards.Invalid("limit", "is %d; it must be between 1 and %d (default %d)", limit, MaxLimit, DefaultLimit)
	case limit > MaxLimit:
		limit = MaxLimit
	}
	rows, next, err := g.Retriever.Search(ctx, c, query, limit, cursor)
	if err != nil {
		return nil, "", err
	}
	out := make([]ToolSummary, 0, len(rows))
	for _, r := range rows {
		out = append(out, ToolSummary{Name: r.Name, Server: r.Server, Summary: cards.Cut(r.Summary, MaxSummaryLen)})
	}
	return out, next, nil
}

// Denial is a describe or call that was refused; nothing was forwarded.
type Denial struct {
	Outcome    string // upstream.OutcomeDenied*
	Message    string
	Ambiguous  []string
	Violations []string
}

func (d *Denial) Error() string {
	if len(d.Violations) > 0 {
		return d.Message + ":\n  - " + strings.Join(d.Violations, "\n  - ")
	}
	return d.Message
}

// unknown answers like the retriever does for a card that does not exist.
func unknown(name string) *Denial {
	name = cards.Cut(name, MaxNameLen)
	return &Denial{Outcome: upstream.OutcomeDeniedUnknown, Message: fmt.Sprintf("%s %q", unknownToolMsg, name)}
}

// checkName refuses, as unknown, names no card can have: empty, over-long,
// invalid, reserved, or a meta-tool's (no nesting).
func checkName(name, server string) *Denial {
	if name == "" || !cards.ValidName(name) || strings.HasPrefix(strings.ToLower(name), cards.ReservedPrefix) {
		return unknown(name)
	}
	for _, m := range MetaTools {
		if strings.EqualFold(name, m) {
			return unknown(name)
		}
	}
	if server != "" && !cards.ValidName(server) {
		return unknown(name)
	}
	return nil
}

// refs are the tools a requested (name, server) may stand for, in order
// (toolname.Readings), then, for a hashed provider name, the caller's tools
// that go by it (toolname.Hashed).
func (g *Gateway) refs(c retriever.Caller, name, server string) ([]toolname.Ref, error) {
	out := toolname.Readings(name, server)
	if server != "" || !toolname.Hashed(name) {
		return out, nil
	}
	keys, err := g.Retriever.Keys(c, func(k cards.Key) bool { return toolname.Provider(k.Server, k.Name) == name })
	if err != nil {
		return nil, err
	}
	for _, k := range keys {
		out = append(out, toolname.Ref{Server: k.Server, Name: k.Name})
	}
	return out, nil
}

// Describe returns one authorized card, or a *Denial (unknown tool, or an
// ambiguous name with the candidate servers). name may be qualified, or a
// provider name (toolname.Provider).
func (g *Gateway) Describe(ctx context.Context, c retriever.Caller, name, server string) (cards.Card, error) {
	if d := checkName(name, server); d != nil {
		return cards.Card{}, d
	}
	rs, err := g.refs(c, name, server)
	if err != nil {
		return cards.Card{}, err
	}
	for _, r := range rs {
		res, err := g.Retriever.Describe(ctx, c, r.Name, r.Server)
		switch {
		case errors.Is(err, cards.ErrNotFound):
			continue
		case err != nil:
			return cards.Card{}, err
		case res.Ambiguous != nil:
			return cards.Card{}, ambiguous(name, res.Ambiguous)
		}
		return res.Card, nil
	}
	return cards.Card{}, unknown(name)
}

// Callable says whether the caller can call a card (one it may use)
// through this gateway: on a server with an SQL upstream, its query card
// when the caller holds the scopes of every view (the views themselves
// are described, not called); elsewhere an MCP tool always (its server's
// upstream entry decides where), another kind when the gateway has an
// executor for it (REST operations: the REST executor).
func (g *Gateway) Callable(c retriever.Caller, card *cards.Card) bool {
	if g.SQL.Has(card.Tenant, card.Server) {
		return card.Name == sqlquery.QueryTool && g.readsAllViews(c, card.Server)
	}
	return card.Kind == cards.KindMCPTool || g.Executors[card.Kind] != nil
}

// Pinned returns the pins that the caller may use and can call, in the order
// given; the others are left out as if they did not exist.
func (g *Gateway) Pinned(ctx context.Context, c retriever.Caller, pins []cards.Key) ([]cards.Card, error) {
	var out []cards.Card
	for _, k := range pins {
		res, err := g.Retriever.Describe(ctx, c, k.Name, k.Server)
		if errors.Is(err, cards.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if g.Callable(c, &res.Card) {
			out = append(out, res.Card)
		}
	}
	return out, nil
}

// Tools returns every card that the caller may use and can call, in
// (server, name) order.
func (g *Gateway) Tools(ctx context.Context, c retriever.Caller) ([]cards.Card, error) {
	var out []cards.Card
	seen := map[cards.Key]bool{}
	cursor := ""
	for {
		rows, next, err := g.Retriever.Search(ctx, c, "", retriever.MaxPageSize, cursor)
		if err != nil {
			return nil, err
		}
		for _, r := range rows {
			res, err := g.Retriever.Describe(ctx, c, r.Name, r.Server)
			if errors.Is(err, cards.ErrNotFound) {
				continue // gone since the page was read
			}
			if err != nil {
				return nil, err
			}
			if k := res.Card.Key(); g.Callable(c, &res.Card) && !seen[k] {
				seen[k] = true
				out = append(out, res.Card)
			}
		}
		if next == "" {
			return out, nil
		}
		cursor = next
	}
}

func ambiguous(name string, servers []string) *Denial {
	return &Denial{Outcome: upstream.OutcomeDeniedAmbiguous, Ambiguous: servers,
		Message: fmt.Sprintf("tool %q is ambiguous: name a server (one of %s)", name, strings.Join(servers, ", "))}
}

// CallResult is a forwarded call's answer: the upstream's result as it is,
// and the real tool it came from.
type CallResult struct {
	// ExecutionID names the call in the audit log.
	ExecutionID string
	Result      *mcp.CallToolResult
	Tool        cards.Key
	// Query is set for a query on an SQL upstream (see sql.go).
	Query *QueryReceipt
}

// How calls reach the gateway, as the audit log records them (Origin.Via).
const (
	ViaMCP       = "mcp"        // call_tool on the MCP front
	ViaMCPDirect = "mcp_direct" // tools/call of the tool's own name on the MCP front
	ViaGRPC      = "grpc"       // ExecutionService.CallTool
)

// Origin is where a call comes from, for the audit log.
type Origin struct {
	Via string
	// Disclosure is the caller's token's disclosure mode, if it has one.
	Disclosure string
}

// Call authorizes the call exactly as AuthorizeCall does and, when allowed,
// forwards it to the card's upstream. It returns a *Denial when refused
// (nothing forwarded) and an *upstream.CallError when the upstream produced
// no result. Every call, allowed or not, is audited (never its arguments).
// name may be qualified (SERVER__NAME).
func (g *Gateway) Call(ctx context.Context, c retriever.Caller, o Origin, name, server string, args json.RawMessage) (CallResult, error) {
	start := time.Now()
	entry := upstream.AuditEntry{ID: uuid.NewString(), Via: o.Via, Disclosure: o.Disclosure, Tenant: c.Tenant}
	if cards.ValidName(name) {
		entry.Tool = name
	}
	if cards.ValidName(server) {
		entry.Server = server
	}
	res, err := g.call(ctx, c, name, server, args, &entry)
	res.ExecutionID = entry.ID
	entry.Time = start.UTC()
	entry.LatencyMS = float64(time.Since(start).Microseconds()) / 1000
	var d *Denial
	var ce *upstream.CallError
	switch {
	case errors.As(err, &d):
		entry.Outcome = d.Outcome
	case errors.As(err, &ce):
		entry.Outcome, entry.Detail = ce.Kind, ce.Error()
		if rpcErr := (*jsonrpc.Error)(nil); errors.As(err, &rpcErr) {
			// The upstream's own message may quote the arguments: only its code.
			entry.Detail = fmt.Sprintf("upstream %q answered with JSON-RPC error %d", ce.Server, rpcErr.Code)
		}
	case err != nil:
		entry.Outcome, entry.Detail = "error", err.Error()
	case res.Query != nil && res.Query.Error != "":
		entry.Outcome = OutcomeSQLError
	case res.Result.IsError:
		entry.Outcome = upstream.OutcomeToolError
	default:
		entry.Outcome = upstream.OutcomeOK
	}
	if aerr := g.Audit.Append(entry, c.Subject); aerr != nil {
		g.log().Warn("audit log append failed", "err", aerr)
	}
	return res, err
}

func (g *Gateway) call(ctx context.Context, c retriever.Caller, name, server string, args json.RawMessage, entry *upstream.AuditEntry) (CallResult, error) {
	if d := checkName(name, server); d != nil {
		return CallResult{}, d
	}
	if len(strings.TrimSpace(string(args))) == 0 {
		args = json.RawMessage("{}")
	}
	var a retriever.Authorization
	rs, err := g.refs(c, name, server)
	if err != nil {
		return CallResult{}, err
	}
	for _, r := range rs {
		a, err = g.Retriever.Authorize(ctx, c, r.Name, r.Server, args)
		if err != nil || a.Decision != retriever.DenyUnknownTool {
			break
		}
	}
	if errors.Is(err, cards.ErrInvalid) {
		return CallResult{}, &Denial{Outcome: upstream.OutcomeDeniedArguments, Message: "arguments refused", Violations: []string{err.Error()}}
	}
	if err != nil {
		return CallResult{}, err
	}
	switch a.Decision {
	case retriever.Allow:
	case retriever.DenyAmbiguous:
		return CallResult{}, ambiguous(name, a.Ambiguous)
	case retriever.DenyInvalidArguments:
		entry.Server, entry.Tool = a.Key.Server, a.Key.Name
		return CallResult{}, &Denial{Outcome: upstream.OutcomeDeniedArguments, Message: a.Message, Violations: a.Violations}
	default:
		return CallResult{}, unknown(name)
	}
	entry.Server, entry.Tool = a.Key.Server, a.Key.Name
	// The card's kind decides who runs it.
	desc, err := g.Retriever.Describe(ctx, c, a.Key.Name, a.Key.Server)
	if err != nil || desc.Card.Version != a.Version {
		// Revoked or changed between the two reads: authorize again next time.
		return CallResult{}, unknown(name)
	}
	if g.SQL.Has(c.Tenant, a.Key.Server) {
		return g.callSQL(ctx, c, name, server, desc.Card, args, entry)
	}
	ex := g.executor(desc.Card.Kind)
	if ex == nil {
		return CallResult{}, &upstream.CallError{Kind: upstream.KindNotRegistered, Server: a.Key.Server,
			Err: fmt.Errorf("%s/%s is a %s card, and this server calls none of that kind", a.Key.Server, a.Key.Name, desc.Card.Kind)}
	}
	r, err := ex.Execute(ctx, c.Tenant, &desc.Card, args)
	if errors.Is(err, cards.ErrInvalid) {
		// Refused by the executor before anything was sent.
		return CallResult{}, &Denial{Outcome: upstream.OutcomeDeniedArguments, Message: "arguments refused", Violations: []string{err.Error()}}
	}
	if err != nil {
		return CallResult{}, err
	}
	return CallResult{Result: r, Tool: a.Key}, nil
}

func (g *Gateway) log() *slog.Logger {
	if g.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return g.Log
}
