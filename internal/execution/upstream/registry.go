package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Failure kinds of a forwarded call.
const (
	KindNotRegistered = "not_registered" // no upstream for the card's server
	KindUnreachable   = "unreachable"    // could not connect, or the connection broke
	KindTimeout       = "timeout"        // the call did not finish within the upstream's timeout
	KindProtocol      = "upstream_error" // the upstream answered with a JSON-RPC error
	// KindUncertain: a call that may have changed something (a
	// non-idempotent HTTP method) timed out or lost its connection after the
	// request went out. It may or may not have taken effect; it is never
	// retried.
	KindUncertain = "uncertain"
	// KindTooLarge: the upstream answered with more than the entry's
	// response size limit; nothing of it is returned.
	KindTooLarge = "response_too_large"
)

// CallError is a forwarded call that produced no result.
type CallError struct {
	Kind   string
	Server string
	Err    error
}

func (e *CallError) Error() string {
	switch e.Kind {
	case KindNotRegistered:
		if e.Err != nil {
			return fmt.Sprintf("cannot be called through cardex: %v", e.Err)
		}
		return fmt.Sprintf("server %q has no registered upstream", e.Server)
	case KindTimeout:
		return fmt.Sprintf("upstream %q did not answer in time: %v", e.Server, e.Err)
	case KindUnreachable:
		return fmt.Sprintf("upstream %q is unreachable: %v", e.Server, e.Err)
	case KindUncertain:
		return fmt.Sprintf("outcome uncertain: upstream %q %v; the call may or may not have taken effect, and it was not retried: check before calling again", e.Server, e.Err)
	case KindTooLarge:
		return fmt.Sprintf("upstream %q answered, but %v", e.Server, e.Err)
	default:
		return fmt.Sprintf("upstream %q answered with an error: %v", e.Server, e.Err)
	}
}

func (e *CallError) Unwrap() error { return e.Err }

// Caller forwards a tool call to the upstream of (tenant, server).
type Caller interface {
	Call(ctx context.Context, tenant, server, tool string, args json.RawMessage) (*mcp.CallToolResult, error)
}

// Registry keeps one client session per upstream, opened on first use and
// reopened after the connection breaks. Safe for concurrent use.
type Registry struct {
	cfg    Config
	log    *slog.Logger
	client *mcp.Client

	mu    sync.Mutex
	slots map[string]*slot
}

type slot struct {
	mu sync.Mutex
	cs *mcp.ClientSession
}

// NewRegistry validates the config and builds a registry (no connection is
// made yet).
func NewRegistry(cfg Config, version string, log *slog.Logger) (*Registry, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Registry{
		cfg:    cfg,
		log:    log,
		client: NewClient(version),
		slots:  map[string]*slot{},
	}, nil
}

// NewClient is the SDK client cardex connects to upstreams with.
func NewClient(version string) *mcp.Client {
	return mcp.NewClient(&mcp.Implementation{Name: "cardex", Version: version}, nil)
}

// Len is the number of upstreams in the file (of every kind).
func (r *Registry) Len() int { return len(r.cfg.Upstreams) }

// Call forwards one tools/call and returns the upstream's result as it is
// (content, structured content, isError). A call that produced no result
// returns a *CallError.
func (r *Registry) Call(ctx context.Context, tenant, server, tool string, args json.RawMessage) (*mcp.CallToolResult, error) {
	u, ok := r.cfg.Find(tenant, server)
	if !ok {
		return nil, &CallError{Kind: KindNotRegistered, Server: server}
	}
	if u.UpstreamKind() != MCP {
		return nil, &CallError{Kind: KindNotRegistered, Server: server,
			Err: fmt.Errorf("server %q is registered as a %s upstream, not an MCP server (mcp_tool cards need a url or command entry)", server, u.UpstreamKind())}
	}
	// A fresh context: the caller's context may come from cardex's own MCP
	// server and carry the SDK's per-request values (such as the protocol
	// version the agent speaks), which must not leak into the upstream
	// session. Cancellation still follows the caller.
	parent := ctx
	ctx, cancel := context.WithTimeout(context.Background(), u.CallTimeout())
	defer cancel()
	stop := context.AfterFunc(parent, cancel)
	defer stop()
	key := u.Tenant + "/" + u.Server
	cs, err := r.session(ctx, key, u)
	if err != nil {
		if parent.Err() != nil {
			return nil, parent.Err()
		}
		if ctx.Err() != nil {
			return nil, &CallError{Kind: KindTimeout, Server: server, Err: ctx.Err()}
		}
		return nil, r.unreachable(server, err)
	}
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if errors.Is(err, mcp.ErrSessionMissing) {
		// The upstream no longer knows the session (it restarted, or
		// expired it) and so did not run the call: reconnect and send it
		// once more.
		r.drop(key, cs)
		if cs, err = r.session(ctx, key, u); err != nil {
			return nil, r.unreachable(server, err)
		}
		res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	}
	if err == nil {
		return res, nil
	}
	var rpcErr *jsonrpc.Error
	switch {
	case parent.Err() != nil:
		return nil, parent.Err()
	case ctx.Err() != nil:
		return nil, &CallError{Kind: KindTimeout, Server: server, Err: ctx.Err()}
	case !transportFailure(err) && errors.As(err, &rpcErr):
		// The upstream's answer. (The SDK reports a failed request as a
		// JSON-RPC error too, "rejected by transport", wrapping the
		// network's: that is the connection, below.)
		return nil, &CallError{Kind: KindProtocol, Server: server, Err: err}
	}
	// The connection broke: the next call reconnects. The call itself is
	// not retried, since the upstream may have run it.
	r.drop(key, cs)
	return nil, r.unreachable(server, err)
}

func (r *Registry) session(ctx context.Context, key string, u Upstream) (*mcp.ClientSession, error) {
	r.mu.Lock()
	s := r.slots[key]
	if s == nil {
		s = &slot{}
		r.slots[key] = s
	}
	r.mu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cs != nil {
		return s.cs, nil
	}
	t, err := u.Transport()
	if err != nil {
		return nil, err
	}
	cs, err := r.client.Connect(ctx, t, nil)
	if err != nil {
		return nil, err
	}
	r.log.Info("upstream connected", "server", u.Server, "tenant", u.Tenant)
	s.cs = cs
	return cs, nil
}

func (r *Registry) drop(key string, cs *mcp.ClientSession) {
	r.mu.Lock()
	s := r.slots[key]
	r.mu.Unlock()
	if s == nil {
		return
	}
	s.mu.Lock()
	if s.cs == cs {
		s.cs = nil
	}
	s.mu.Unlock()
	cs.Close()
}

// Close closes every open session.
func (r *Registry) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	var errs []error
	for _, s := range r.slots {
		s.mu.Lock()
		if s.cs != nil {
			errs = append(errs, s.cs.Close())
			s.cs = nil
		}
		s.mu.Unlock()
	}
	return errors.Join(errs...)
}
