// Package hostguard decides which Host names cardex's HTTP listener
// answers, and which origins may post to it: one policy for every HTTP
// surface (the console, /mcp, /metrics, the health checks, and any JSON
// surface to come), so that a page of another site cannot reach them
// through DNS rebinding — its own name resolving to 127.0.0.1, its requests
// carrying that name in Host and Origin.
//
// On a loopback listener a request must name a loopback host (localhost,
// 127.0.0.0/8, ::1) or one of the policy's names (a local proxy's). Another
// listener answers any name: it is not open (cardex refuses to listen
// beyond loopback without credentials), and the names its clients, probes
// and proxies use are the deployment's (a Kubernetes probe names the pod's
// address).
package hostguard

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/seed0cff8200/cardex/cards"
)

// Policy is the set of host names (besides loopback ones) the listener
// answers to: the names clients and proxies use for it.
type Policy struct {
	hosts []string // lower-case, without port
}

// MaxHosts bounds the names of a policy.
const MaxHosts = 64

// Parse reads a comma-separated list of host names (no scheme, no port;
// an IP address is a name too).
func Parse(list string) (Policy, error) {
	var p Policy
	for _, h := range strings.Split(list, ",") {
		h = strings.ToLower(strings.TrimSpace(h))
		if h == "" {
			continue
		}
		if strings.ContainsAny(h, "/:@ ") && net.ParseIP(strings.Trim(h, "[]")) == nil {
			return Policy{}, fmt.Errorf("allowed host %q: give a host name or an IP address, without scheme or port", h)
		}
		p.hosts = append(p.hosts, strings.Trim(h, "[]"))
	}
	if len(p.hosts) > MaxHosts {
		return Policy{}, fmt.Errorf("%d allowed hosts; the limit is %d", len(p.hosts), MaxHosts)
	}
	return p, nil
}

// Handler answers 403 to a request whose Host the policy does not allow,
// and passes the others to next.
func (p Policy) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !p.HostAllowed(r, r.Host) {
			http.Error(w, fmt.Sprintf("Forbidden: invalid Host header %q (allowed: loopback names%s)", cards.Cut(r.Host, 80), p.named()), http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (p Policy) named() string {
	if len(p.hosts) == 0 {
		return ""
	}
	return ", " + strings.Join(p.hosts, ", ")
}

// HostAllowed reports whether hostport (a Host header, or an origin's
// host) names this listener for the request r.
func (p Policy) HostAllowed(r *http.Request, hostport string) bool {
	host := hostname(hostport)
	switch {
	case host == "":
		return false
	case isLoopback(host), slices.Contains(p.hosts, host):
		return true
	}
	return !onLoopback(r)
}

// OriginAllowed reports whether a browser's Origin header names this
// console: an http or https origin whose host the policy allows, and, for a
// loopback name, on the port the request came in on (another local port is
// another site's server). On a listener the policy knows nothing of (not
// loopback, no names) the origin must name the Host the request was sent
// to.
func (p Policy) OriginAllowed(r *http.Request, origin string) bool {
	u, err := url.Parse(origin)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return false
	}
	host := hostname(u.Host)
	switch {
	case isLoopback(host):
		return onLoopback(r) && port(u) == localPort(r)
	case slices.Contains(p.hosts, host):
		return true
	}
	return len(p.hosts) == 0 && !onLoopback(r) && strings.EqualFold(u.Host, r.Host)
}

// hostname is the lower-cased host of a host[:port], without brackets.
func hostname(hostport string) string {
	h := hostport
	if host, _, err := net.SplitHostPort(hostport); err == nil {
		h = host
	}
	return strings.ToLower(strings.Trim(h, "[]"))
}

func isLoopback(host string) bool {
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// onLoopback reports whether the request came in on a loopback address.
func onLoopback(r *http.Request) bool {
	a, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok || a == nil {
		return false
	}
	return isLoopback(hostname(a.String()))
}

func localPort(r *http.Request) string {
	a, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok || a == nil {
		return ""
	}
	_, p, _ := net.SplitHostPort(a.String())
	return p
}

// port is an origin's port, the scheme's default when it names none.
func port(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	if u.Scheme == "https" {
		return "443"
	}
	return "80"
}
