package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/seed0cff8200/cardex/internal/access/audittrail"
	"github.com/seed0cff8200/cardex/internal/access/auth"
	"github.com/seed0cff8200/cardex/internal/access/ratelimit"
	"github.com/seed0cff8200/cardex/internal/access/tokens"
	"github.com/seed0cff8200/cardex/internal/codec/apiconv"
	pb "github.com/seed0cff8200/cardex/proto/cardex/v1"
	"github.com/seed0cff8200/cardex/retriever"
)

// guard is the interceptor in front of every cardex service: it
// authenticates the call (service tokens and JWTs for DiscoveryService and
// CatalogService, agent tokens for ExecutionService), puts the verified
// caller into DiscoveryService requests, applies the rate and concurrency
// limits and the server-side deadline, and records refusals in the audit
// trail. Health and reflection pass untouched.
type guard struct {
	auth    *auth.Authenticator
	agents  *tokens.Table // nil: ExecutionService authenticates alone
	lim     *ratelimit.Limiter
	trail   *audittrail.Trail
	timeout time.Duration
	log     *slog.Logger
	// refusals bounds the refused calls recorded per client address, so a
	// flood of bad credentials cannot fill the disk with the trail.
	refusals *ratelimit.Limiter
}

// MaxRefusalsAudited is how many refused calls per second (with a burst
// of as many) the audit trail records for one client address; the rest
// are refused all the same, unrecorded.
const MaxRefusalsAudited = 5

var (
	discoveryPrefix = "/" + pb.DiscoveryService_ServiceDesc.ServiceName + "/"
	catalogPrefix   = "/" + pb.CatalogService_ServiceDesc.ServiceName + "/"
	executionPrefix = "/" + pb.ExecutionService_ServiceDesc.ServiceName + "/"
)

// discoveryClass are the methods on the discovery bucket (twice the call
// rate): finding and reading tools, as opposed to authorizing or calling.
var discoveryClass = map[string]bool{"DiscoverTools": true, "SearchTools": true, "DescribeTool": true}

func (g *guard) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, next grpc.UnaryHandler) (any, error) {
	var need auth.Role
	var method string
	switch m := info.FullMethod; {
	case strings.HasPrefix(m, discoveryPrefix):
		need, method = auth.RoleDiscover, strings.TrimPrefix(m, discoveryPrefix)
	case strings.HasPrefix(m, catalogPrefix):
		need, method = auth.RoleCatalog, strings.TrimPrefix(m, catalogPrefix)
	case strings.HasPrefix(m, executionPrefix):
		return g.execution(ctx, strings.TrimPrefix(m, executionPrefix), req, next)
	default:
		return next(ctx, req)
	}
	p, err := g.auth.Authenticate(ctx, bearer(ctx), need)
	if err != nil {
		return nil, g.refuse(ctx, method, p.Name, "", needs(need, g.auth), err)
	}
	ctx = auth.WithPrincipal(ctx, p)
	var limitKey, tenant string
	var routed []string
	if need != auth.RoleDiscover {
		limitKey, routed = "credential:"+p.Name, apiconv.RequestTenants(req)
	} else {
		field := callerField(req)
		if field == nil {
			return nil, status.Errorf(codes.Internal, "no caller in %T", req)
		}
		c, err := auth.Resolve(p, apiconv.CallerFromProto(*field))
		if err != nil {
			return nil, g.refuse(ctx, method, p.Name, c.Tenant, "", err)
		}
		// Checked here, before the caller names a rate-limit bucket.
		if err := retriever.ValidateCaller(c); err != nil {
			return nil, toStatus(g.log, method, err)
		}
		if p.Binding != nil {
			*field = &pb.Caller{Tenant: c.Tenant, Subject: c.Subject, Scopes: c.Scopes, SessionId: c.SessionID}
		}
		limitKey, tenant = ratelimit.CallerKey(c.Tenant, c.Subject), c.Tenant
		routed = []string{c.Tenant}
		if d, ok := req.(*pb.DiscoverToolsRequest); ok && d.GetEvaluation() && !g.mayEvaluate(ctx) {
			return nil, g.refuse(ctx, method, p.Name, c.Tenant, "", fmt.Errorf(
				"%w: evaluation (a discovery kept out of the discovery and feedback logs) needs a credential that may also write the catalogue (role admin); %s may not",
				auth.ErrWrongRole, p.Name))
		}
	}
	if err := checkTenantHeader(ctx, routed); err != nil {
		return nil, toStatus(g.log, method, err)
	}
	return g.limited(ctx, method, p.Name, namesCallers(p), limitKey, tenant, req, next)
}

// namesCallers is the credential whose calls draw from a bucket of its own
// because it states its callers itself (an unbound service token: without
// that bucket, naming a new caller each time would escape every limit), or
// "": a bound token or JWT is its caller, and an open service has no
// credential to limit.
func namesCallers(p auth.Principal) string {
	if p.Binding != nil || p.Name == auth.Unauthenticated.Name {
		return ""
	}
	return p.Name
}

// mayEvaluate says whether a call may mark its discovery as an
// evaluation's, keeping it out of the discovery and feedback logs: its
// credential must be accepted by both services, discovery and catalogue (a
// token of role admin; a catalog token where discovery takes no
// credential; anyone where neither does, as on a loopback server for
// development). A discover token or a JWT never may: an orchestrator cannot
// hide its traffic from the logs. The marked call is still recorded in the
// audit trail.
func (g *guard) mayEvaluate(ctx context.Context) bool {
	b := bearer(ctx)
	for _, need := range []auth.Role{auth.RoleDiscover, auth.RoleCatalog} {
		if _, err := g.auth.Authenticate(ctx, b, need); err != nil {
			return false
		}
	}
	return true
}

// execution authenticates an ExecutionService call by its agent token and
// hands the identity to the handler in the context.
func (g *guard) execution(ctx context.Context, method string, req any, next grpc.UnaryHandler) (any, error) {
	if g.agents == nil {
		return next(ctx, req)
	}
	header := ""
	if v := metadata.ValueFromIncomingContext(ctx, "authorization"); len(v) > 0 {
		header = v[0]
	}
	id, ok := g.agents.Authenticate(header)
	if !ok {
		err := auth.ErrNoCredential
		if header != "" {
			err = auth.ErrUnknownCredential
		}
		return nil, g.refuse(ctx, method, "", "", "an agent token", err)
	}
	if err := checkTenantHeader(ctx, []string{id.Tenant}); err != nil {
		return nil, toStatus(g.log, method, err)
	}
	name := "agent:" + id.Tenant + "/" + id.Subject
	return g.limited(tokens.NewContext(ctx, id), method, name, "", ratelimit.CallerKey(id.Tenant, id.Subject), id.Tenant, req, next)
}

// limited runs the call under the rate and in-flight limits and the
// server-side deadline. credential names the credential's own bucket ("" for
// an agent token, whose identity is its caller).
func (g *guard) limited(ctx context.Context, method, principal, credential, key, tenant string, req any, next grpc.UnaryHandler) (any, error) {
	class := ratelimit.Call
	if discoveryClass[method] {
		class = ratelimit.Discovery
	}
	if credential != "" {
		credential = "credential:" + credential
	}
	if d := g.lim.AllowFor(class, credential, key, tenant); d != nil {
		return nil, g.exhausted(ctx, method, principal, tenant, d)
	}
	release, d := g.lim.Acquire(key)
	if d != nil {
		return nil, g.exhausted(ctx, method, principal, tenant, d)
	}
	defer release()
	// CallTool is bounded by its upstream's own time-out.
	if g.timeout > 0 && method != "CallTool" {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, g.timeout)
		defer cancel()
	}
	return next(ctx, req)
}

func (g *guard) exhausted(ctx context.Context, method, principal, tenant string, d *ratelimit.Denial) error {
	g.record(ctx, audittrail.Entry{Type: audittrail.TypeRateLimit, Method: method, Principal: principal, Tenant: tenant,
		Outcome: "refused", Detail: d.Scope + " " + d.Class.String()})
	// The delay in whole seconds as a header too: Retry-After over HTTP/JSON.
	_ = grpc.SetHeader(ctx, d.Metadata())
	return d.Status().Err()
}

// needs says what credential a role takes.
func needs(r auth.Role, a *auth.Authenticator) string {
	s := "a service token of role " + string(r) + " or admin"
	if r == auth.RoleDiscover && a != nil && a.JWT != nil {
		s += ", or a JWT"
	}
	return s
}

// refuse records and answers a refused credential or binding; what names
// the credential the call needs.
func (g *guard) refuse(ctx context.Context, method, principal, tenant, what string, err error) error {
	g.record(ctx, audittrail.Entry{Type: audittrail.TypeAuthentication, Method: method, Principal: principal, Tenant: tenant,
		Outcome: "refused", Detail: err.Error()})
	switch {
	case errors.Is(err, auth.ErrNoCredential):
		return status.Errorf(codes.Unauthenticated, "%s needs %s: authorization: Bearer TOKEN", method, what)
	case errors.Is(err, auth.ErrUnknownCredential):
		return status.Error(codes.Unauthenticated, err.Error())
	case errors.Is(err, auth.ErrWrongRole), errors.Is(err, auth.ErrMismatch):
		return status.Error(codes.PermissionDenied, err.Error())
	}
	return toStatus(g.log, method, err)
}

func (g *guard) record(ctx context.Context, e audittrail.Entry) {
	if g.trail == nil {
		return
	}
	host := ""
	if pr, ok := peer.FromContext(ctx); ok && pr.Addr != nil {
		e.Peer = pr.Addr.String()
		host = e.Peer
		if h, _, err := net.SplitHostPort(e.Peer); err == nil {
			host = h
		}
	}
	if g.refusals.Allow(ratelimit.Call, host, "") != nil {
		return
	}
	if err := g.trail.Append("", e); err != nil {
		g.log.Warn("audit trail append failed", "err", err)
	}
}

func bearer(ctx context.Context) string {
	// The one key, not a copy of all the metadata.
	if v := metadata.ValueFromIncomingContext(ctx, "authorization"); len(v) > 0 {
		return tokens.BearerToken(v[0])
	}
	return ""
}

// callerField is the Caller field of a DiscoveryService request.
func callerField(req any) **pb.Caller {
	switch r := req.(type) {
	case *pb.DiscoverToolsRequest:
		return &r.Caller
	case *pb.SearchToolsRequest:
		return &r.Caller
	case *pb.DescribeToolRequest:
		return &r.Caller
	case *pb.AuthorizeCallRequest:
		return &r.Caller
	case *pb.ReportOutcomeRequest:
		return &r.Caller
	}
	return nil
}
