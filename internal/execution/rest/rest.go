// Package rest calls rest_operation cards on their upstream HTTP API.
//
// The request is rebuilt from the card: the method, path template and body
// content type under x-cardex-http at the input schema's root, and each
// argument's place (path, query or body) under x-cardex-in on its property,
// as `cardex import openapi` writes them. The destination is always the
// upstream entry's base_url followed by the card's path: arguments fill path
// segments (escaped, dot segments refused), the query string and the body,
// and nothing in them can change the scheme, host or port. Credentials come
// from the entry's headers (${VAR} from cardex's environment) and never
// reach the agent. A call is sent once: never retried, redirects not
// followed.
package rest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strings"
	"sync/atomic"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/seed0cff8200/cardex/cards"
	"github.com/seed0cff8200/cardex/internal/execution/upstream"
)

// Executor runs rest_operation cards on the rest upstreams of an upstreams
// file. Safe for concurrent use.
type Executor struct {
	cfg     upstream.Config
	client  *http.Client
	version string
	log     *slog.Logger
}

// New builds an executor over the upstreams file's rest entries.
func New(cfg upstream.Config, version string, log *slog.Logger) *Executor {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	return &Executor{
		cfg: cfg,
		client: &http.Client{
			Transport: tr,
			// A redirect is the upstream's answer, returned as it is:
			// following it could carry the credentials elsewhere.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		version: version,
		log:     log,
	}
}

// Close closes idle connections.
func (e *Executor) Close() { e.client.CloseIdleConnections() }

// Execute sends the allowed call of card once and returns its answer: for
// a 2xx, the body (as structured content when it is JSON, as text
// otherwise), the status and the pagination cursor; for any other status, a
// tool error with the status and the body cut at the size limit. Arguments
// that cannot be encoded are refused (cards.ErrInvalid) before anything is
// sent; a call without an answer is an *upstream.CallError.
func (e *Executor) Execute(ctx context.Context, tenant string, card *cards.Card, args json.RawMessage) (*mcp.CallToolResult, error) {
	server := card.Server
	u, ok := e.cfg.Find(tenant, server)
	if !ok {
		return nil, &upstream.CallError{Kind: upstream.KindNotRegistered, Server: server}
	}
	if u.UpstreamKind() != upstream.REST {
		return nil, &upstream.CallError{Kind: upstream.KindNotRegistered, Server: server,
			Err: fmt.Errorf("server %q is registered as a %s upstream; rest_operation cards need an entry with kind: rest and base_url", server, u.UpstreamKind())}
	}
	op, err := parseOperation(card.InputSchema)
	if err != nil {
		return nil, notCallable(card, err)
	}
	enc, err := op.encode(args)
	var ce *ConfigError
	if errors.As(err, &ce) {
		return nil, notCallable(card, err)
	}
	if err != nil {
		return nil, err
	}
	target, err := destination(u.BaseURL, enc)
	if err != nil {
		return nil, notCallable(card, err)
	}
	headers, err := u.ExpandHeaders()
	if err != nil {
		return nil, &upstream.CallError{Kind: upstream.KindNotRegistered, Server: server, Err: err}
	}

	what := op.method + " " + op.path // never the filled-in path: it holds argument values
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, u.CallTimeout())
	defer cancel()
	// sent: a connection was had, so the upstream may have seen the request.
	var sent atomic.Bool
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{GotConn: func(httptrace.GotConnInfo) { sent.Store(true) }})
	var body io.Reader
	if enc.body != nil {
		body = bytes.NewReader(enc.body)
	}
	req, err := http.NewRequestWithContext(ctx, op.method, target, body)
	if err != nil {
		return nil, notCallable(card, err)
	}
	req.Header.Set("Accept", "application/json, */*;q=0.5")
	req.Header.Set("User-Agent", "cardex/"+e.version)
	if enc.body != nil {
		req.Header.Set("Content-Type", enc.contentType)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := e.client.Do(req)
	if err != nil {
		return nil, e.failure(server, what, op.method, u, err, sent.Load(), parent, ctx)
	}
	defer resp.Body.Close()
	limit := u.ResponseLimit()
	data, cut, err := readAll(resp.Body, limit)
	if err != nil {
		kind := upstream.KindUnreachable
		if ctx.Err() != nil && parent.Err() == nil {
			kind = upstream.KindTimeout
		}
		e.log.Warn("rest upstream: the body of an answer did not arrive", "server", server, "operation", what, "err", cause(err))
		return nil, &upstream.CallError{Kind: kind, Server: server,
			Err: fmt.Errorf("answered %s with HTTP %d, but its body did not arrive: %s", what, resp.StatusCode, upstream.Reason(err))}
	}
	ok2xx := resp.StatusCode >= 200 && resp.StatusCode < 300
	if cut && ok2xx {
		return nil, &upstream.CallError{Kind: upstream.KindTooLarge, Server: server,
			Err: fmt.Errorf("its response to %s (HTTP %d) is larger than the upstream's max_response_bytes (%d bytes): nothing of it is returned", what, resp.StatusCode, limit)}
	}
	return answer(server, what, resp, data, cut, limit), nil
}

func notCallable(card *cards.Card, err error) error {
	return &upstream.CallError{Kind: upstream.KindNotRegistered, Server: card.Server,
		Err: fmt.Errorf("%s/%s: %v", card.Server, card.Name, err)}
}

// destination is the base URL followed by the encoded path and query. It
// checks what the construction already guarantees: scheme, host and port
// are the base URL's, and the path stays under the base path.
func destination(baseURL string, enc *request) (string, error) {
	base, err := url.Parse(baseURL)
	if err != nil {
		return "", err
	}
	basePath := strings.TrimSuffix(base.EscapedPath(), "/")
	s := base.Scheme + "://" + base.Host + basePath + enc.path
	if enc.query != "" {
		s += "?" + enc.query
	}
	got, err := url.Parse(s)
	if err != nil {
		return "", fmt.Errorf("the request URL does not parse: %v", err)
	}
	if got.Scheme != base.Scheme || got.Host != base.Host || !strings.HasPrefix(got.EscapedPath(), basePath+"/") {
		return "", errors.New("the request URL would leave the upstream's base_url")
	}
	return s, nil
}

// failure classifies a request that got no response.
func (e *Executor) failure(server, what, method string, u upstream.Upstream, err error, sent bool, parent, ctx context.Context) error {
	timedOut := ctx.Err() != nil && parent.Err() == nil
	// The agent is told why, never where: the transport's error names the
	// upstream's address, which only the operator's log keeps.
	c := upstream.Reason(err)
	if !timedOut && parent.Err() == nil {
		e.log.Warn("rest upstream: no answer", "server", server, "operation", what, "err", cause(err))
	}
	switch {
	case sent && !idempotent(method):
		msg := fmt.Errorf("did not answer %s within %s", what, u.CallTimeout())
		if !timedOut {
			msg = fmt.Errorf("lost the connection during %s: %s", what, c)
		}
		return &upstream.CallError{Kind: upstream.KindUncertain, Server: server, Err: msg}
	case parent.Err() != nil:
		return parent.Err()
	case timedOut:
		return &upstream.CallError{Kind: upstream.KindTimeout, Server: server, Err: fmt.Errorf("%s: no answer within %s", what, u.CallTimeout())}
	}
	return &upstream.CallError{Kind: upstream.KindUnreachable, Server: server, Err: fmt.Errorf("%s: %s", what, c)}
}

// cause strips the request URL (which holds argument values) from a client
// error.
func cause(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	var ne *net.OpError
	if errors.As(err, &ne) {
		return ne
	}
	return err
}

// answer turns a response into the tool result.
func answer(server, what string, resp *http.Response, data []byte, cut bool, limit int64) *mcp.CallToolResult {
	ct := resp.Header.Get("Content-Type")
	mt, _, _ := mime.ParseMediaType(ct)
	isJSON := (mt == "application/json" || strings.HasSuffix(mt, "+json")) && !cut && json.Valid(data)
	structured := map[string]any{"status": resp.StatusCode}
	if ct != "" {
		structured["content_type"] = ct
	}
	if isJSON {
		structured["body"] = json.RawMessage(data)
	}
	statusLine := fmt.Sprintf("HTTP %d %s", resp.StatusCode, http.StatusText(resp.StatusCode))
	text := bodyText(data, mt, statusLine)
	res := &mcp.CallToolResult{}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		res.IsError = true
		msg := fmt.Sprintf("upstream %q answered %s with %s", server, what, statusLine)
		if loc := resp.Header.Get("Location"); loc != "" && resp.StatusCode >= 300 && resp.StatusCode < 400 {
			msg += "; a redirect, not followed"
			structured["location"] = loc
		}
		if len(data) > 0 {
			msg += ":\n" + text
		}
		if cut {
			msg += fmt.Sprintf("\n… (cut at %d bytes, the upstream's max_response_bytes)", limit)
			structured["body_cut"] = true
		}
		res.Content = []mcp.Content{&mcp.TextContent{Text: msg}}
		res.StructuredContent = structured
		return res
	}
	if len(data) == 0 {
		text = statusLine + " (no body)"
	}
	res.Content = []mcp.Content{&mcp.TextContent{Text: text}}
	if p := pagination(resp.Header, data, isJSON); p != nil {
		structured["pagination"] = p
		res.Content = append(res.Content, &mcp.TextContent{Text: fmt.Sprintf(
			"One page: this is the page the upstream returned, not the whole list; cardex fetched no more. Its next-page cursor (%s), as the API gave it: %s",
			p.From, string(p.Next))})
	}
	res.StructuredContent = structured
	return res
}

// bodyText is the body as text, or a note when it is not text.
func bodyText(data []byte, mt, statusLine string) string {
	if utf8.Valid(data) {
		return string(data)
	}
	if mt == "" {
		mt = "unknown type"
	}
	return fmt.Sprintf("%s: a body of %d bytes of %s, which is not text and is not shown", statusLine, len(data), mt)
}
