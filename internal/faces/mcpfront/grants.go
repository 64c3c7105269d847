package mcpfront

import (
	"context"
	"encoding/json"
	"errors"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/seed0cff8200/cardex/internal/access/tokens"
	"github.com/seed0cff8200/cardex/internal/execution/gateway"
	"github.com/seed0cff8200/cardex/retriever"
)

// A grant is one token's view of the MCP front: its identity, its own MCP
// server (so that list_changed reaches exactly the sessions of the token
// whose list changed) and the list that server announces.
type grant struct {
	id     tokens.Identity
	caller retriever.Caller
	srv    *mcp.Server

	mu      sync.Mutex
	loaded  bool
	seq     uint64            // the retriever's view the list was built from
	list    []Listed          // what tools/list answers, in order
	defs    map[string]string // real tool name → its definition as JSON
	skipped map[string]bool   // tools left out, logged once
}

func callerOf(id tokens.Identity) retriever.Caller {
	return retriever.Caller{Tenant: id.Tenant, Subject: id.Subject, Scopes: id.Scopes}
}

// grantFor returns the token's grant, built (and its list loaded) at first use.
func (f *front) grantFor(id tokens.Identity) *grant {
	f.mu.Lock()
	g := f.grants[id.Key]
	if g == nil {
		g = &grant{id: id, caller: callerOf(id), defs: map[string]string{}, skipped: map[string]bool{}}
		g.srv = f.serverFor(g)
		f.grants[id.Key] = g
	}
	f.mu.Unlock()
	if err := f.refresh(context.Background(), g); err != nil {
		f.log.Error("building a token's tool list", "disclosure", id.Disclosure, "err", err)
	}
	return g
}

// serverFor builds a grant's MCP server: the meta-tools, and a middleware
// that answers tools/list from the grant's list and sends tools/call of any
// other name to the gateway, listed or not.
func (f *front) serverFor(g *grant) *mcp.Server {
	instructions := "This server gives you many tools through three: search_tools finds the tools you may use, " +
		"describe_tool shows one tool's schema, call_tool runs it."
	switch {
	case g.id.Disclosure == tokens.Full:
		instructions = "Every tool you may use is listed; call it by its name. search_tools, describe_tool and call_tool also work."
	case len(g.id.AlwaysLoad) > 0:
		instructions += " The other tools listed are pinned: call them directly. " +
			"Any tool you found may be called directly too, by its qualified name SERVER__NAME."
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "cardex", Title: "cardex tool catalogue", Version: f.version}, &mcp.ServerOptions{
		Instructions: instructions,
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: true}},
	})
	ts := Tools()
	s.AddTool(ts[0], f.search)
	s.AddTool(ts[1], f.describe)
	s.AddTool(ts[2], f.call)
	s.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			switch r := req.(type) {
			case *mcp.ListToolsRequest:
				return f.listTools(ctx, g, r)
			case *mcp.CallToolRequest:
				if !isMeta(r.Params.Name) {
					return f.direct(ctx, r)
				}
			}
			return next(ctx, method, req)
		}
	})
	return s
}

// isMeta: a meta-tool's name always means the meta-tool.
func isMeta(name string) bool {
	for _, m := range gateway.MetaTools {
		if name == m {
			return true
		}
	}
	return false
}

func (f *front) listTools(ctx context.Context, g *grant, req *mcp.ListToolsRequest) (*mcp.ListToolsResult, error) {
	if err := f.refresh(ctx, g); err != nil {
		f.log.Error("tools/list", "err", err)
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "internal error"}
	}
	cursor := ""
	if req.Params != nil {
		cursor = req.Params.Cursor
	}
	g.mu.Lock()
	list := g.list
	g.mu.Unlock()
	page, next, err := Page(list, g.id.Disclosure, cursor, f.pageSize)
	if err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: err.Error()}
	}
	res := &mcp.ListToolsResult{Tools: make([]*mcp.Tool, len(page)), NextCursor: next}
	for i, l := range page {
		res.Tools[i] = l.Tool
	}
	return res, nil
}

// refresh rebuilds the grant's list when the retriever's view changed since
// it was built, and mirrors the real tools on the grant's server: the SDK
// sends list_changed to the server's sessions when a tool is added, changed
// or removed, and only then.
func (f *front) refresh(ctx context.Context, g *grant) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	seq := f.gw.Retriever.Seq() // before the read: a change during it brings another refresh
	if g.loaded && g.seq == seq {
		return nil
	}
	list, skipped, err := List(ctx, f.gw, g.id)
	if err != nil {
		return err
	}
	for _, s := range skipped {
		if !g.skipped[s] {
			g.skipped[s] = true
			f.log.Warn("a tool the token may use is not listed", "disclosure", g.id.Disclosure, "tool", s)
		}
	}
	defs := map[string]string{}
	var changed []*mcp.Tool
	for _, l := range list {
		if l.Card == nil {
			continue
		}
		b, err := json.Marshal(l.Tool)
		if err != nil {
			return err
		}
		defs[l.Tool.Name] = string(b)
		if g.defs[l.Tool.Name] != string(b) {
			changed = append(changed, l.Tool)
		}
	}
	var gone []string
	for name := range g.defs {
		if _, ok := defs[name]; !ok {
			gone = append(gone, name)
		}
	}
	if len(gone) > 0 {
		g.srv.RemoveTools(gone...)
	}
	for _, t := range changed {
		g.srv.AddTool(t, f.direct) // reached only through the middleware, which calls direct too
	}
	g.list, g.defs, g.seq, g.loaded = list, defs, seq, true
	return nil
}

// owns says whether the session was opened on the grant's server.
func (g *grant) owns(sessionID string) bool {
	for ss := range g.srv.Sessions() {
		if ss.ID() == sessionID {
			return true
		}
	}
	return false
}

// follow refreshes every grant after each change of the retriever's view,
// until ctx ends.
func (f *front) follow(ctx context.Context) {
	for {
		changed := f.gw.Retriever.Changed()
		f.mu.Lock()
		gs := make([]*grant, 0, len(f.grants))
		for _, g := range f.grants {
			gs = append(gs, g)
		}
		f.mu.Unlock()
		for _, g := range gs {
			if err := f.refresh(ctx, g); err != nil && !errors.Is(err, context.Canceled) {
				f.log.Error("refreshing a token's tool list", "disclosure", g.id.Disclosure, "err", err)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-changed:
		}
	}
}

func (f *front) closeSessions() {
	f.mu.Lock()
	gs := make([]*grant, 0, len(f.grants))
	for _, g := range f.grants {
		gs = append(gs, g)
	}
	f.mu.Unlock()
	for _, g := range gs {
		for ss := range g.srv.Sessions() {
			ss.Close()
		}
	}
}
