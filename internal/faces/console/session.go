package console

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/seed0cff8200/cardex/internal/access/audittrail"
	"github.com/seed0cff8200/cardex/internal/access/auth"
	"github.com/seed0cff8200/cardex/internal/access/ratelimit"
	"github.com/seed0cff8200/cardex/internal/access/tokens"
)

// Cookies. Both are HttpOnly and SameSite=Strict, limited to Path, and
// Secure when the listener speaks TLS.
const (
	// tokenCookie holds the bearer credential the user signed in with; it
	// is authenticated again at every request, like a gRPC call, so a
	// token the server stops accepting (deleted from service_tokens, a
	// restart with another token file) ends the session.
	tokenCookie = "cardex_console_token"
	// csrfCookie holds a random value that every form repeats.
	csrfCookie = "cardex_console_csrf"
)

type role int

const (
	roleDiscover role = iota // the playground: DiscoveryService
	roleCatalog              // everything else: CatalogService
)

var (
	errForbidden = errors.New("forbidden")
	errCSRF      = errors.New("the form is stale or did not come from this console (CSRF check failed): reload the page and submit it again")
)

// session is who is asking, as the gRPC guard would see them.
type session struct {
	// Token is the bearer credential presented ("" for none).
	Token string
	// Discover and Catalog are the principals for the two roles, nil when
	// the credential does not grant the role.
	Discover *auth.Principal
	Catalog  *auth.Principal
	// Refused says why a presented credential was not accepted.
	Refused string
	// Open: no credential is configured for any role (open loopback mode).
	Open bool
	// accepted: the credential itself was authenticated for some role (not
	// merely a role that is open to everyone).
	accepted bool
}

// CanDiscover and CanCatalog are for the templates.
func (s *session) CanDiscover() bool { return s.Discover != nil }
func (s *session) CanCatalog() bool  { return s.Catalog != nil }

// SignedIn says a credential was accepted.
func (s *session) SignedIn() bool { return s.accepted }

// Name names the credential (the token's name, jwt:ISSUER), or
// "unauthenticated" where the console is open.
func (s *session) Name() string {
	for _, p := range []*auth.Principal{s.Catalog, s.Discover} {
		if p != nil && p.Name != auth.Unauthenticated.Name {
			return p.Name
		}
	}
	return auth.Unauthenticated.Name
}

// Role is the credential's role ("" when none was accepted).
func (s *session) Role() string {
	for _, p := range []*auth.Principal{s.Catalog, s.Discover} {
		if p != nil && p.Name != auth.Unauthenticated.Name {
			return string(p.Role)
		}
	}
	return ""
}

// Binding is the caller the discover credential is bound to (nil: the
// playground's caller is the one the form states).
func (s *session) Binding() *auth.Binding {
	if s.Discover == nil {
		return nil
	}
	return s.Discover.Binding
}

func bearerOf(r *http.Request) string {
	if h := r.Header.Get("Authorization"); h != "" {
		return tokens.BearerToken(h)
	}
	if ck, err := r.Cookie(tokenCookie); err == nil {
		return ck.Value
	}
	return ""
}

// session authenticates the request's credential for both roles with the
// API's authenticator.
func (c *Console) session(r *http.Request) *session {
	s := &session{Token: bearerOf(r)}
	s.Open = c.authn.Open(auth.RoleDiscover) && c.authn.Open(auth.RoleCatalog)
	for _, x := range []struct {
		need auth.Role
		into **auth.Principal
	}{{auth.RoleDiscover, &s.Discover}, {auth.RoleCatalog, &s.Catalog}} {
		p, err := c.authn.Authenticate(r.Context(), s.Token, x.need)
		switch {
		case err == nil:
			*x.into = &p
			if s.Token != "" && !c.authn.Open(x.need) {
				s.accepted = true
			}
		case errors.Is(err, auth.ErrUnknownCredential) && s.Token != "":
			s.Refused = "the token was not accepted (unknown, removed or expired): sign in again"
		}
	}
	if s.accepted {
		s.Refused = ""
	}
	return s
}

// needs runs h only for a session whose credential grants role; others get
// the sign-in page (no credential) or a 403 that names what is needed.
func (c *Console) needs(need role, h func(http.ResponseWriter, *http.Request, *session)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s := c.session(r)
		p := s.Catalog
		what := "a token of role catalog or admin (what CatalogService needs)"
		if need == roleDiscover {
			p = s.Discover
			what = "a token of role discover or admin, or a JWT (what DiscoveryService needs)"
		}
		if p == nil {
			if !s.SignedIn() {
				q := url.Values{"next": {r.URL.RequestURI()}}
				if s.Refused != "" {
					q.Set("refused", "1")
				}
				http.Redirect(w, r, Path+"login?"+q.Encode(), http.StatusSeeOther)
				return
			}
			c.render(w, r, http.StatusForbidden, "error", page{Title: "Not allowed", Session: s,
				Error: "this page needs " + what + "; the credential " + s.Name() + " has role " + s.Role()})
			return
		}
		if r.Method == http.MethodPost {
			if err := c.checkCSRF(r); err != nil {
				c.render(w, r, http.StatusForbidden, "error", page{Title: "Not accepted", Session: s, Error: err.Error()})
				return
			}
		}
		h(w, r, s)
	}
}

type loginData struct {
	Next    string
	Refused bool
}

func (c *Console) loginPage(w http.ResponseWriter, r *http.Request) {
	d := loginData{Next: safeNext(r.URL.Query().Get("next")), Refused: r.URL.Query().Get("refused") != ""}
	p := page{Title: "Sign in", Nav: "login", Data: d}
	if d.Refused {
		p.Error = "the token was not accepted (unknown, removed or expired): sign in again"
	}
	c.render(w, r, 0, "login", p)
}

// login checks the token with the API's authenticator and keeps it in the
// token cookie.
func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	d := loginData{Next: safeNext(r.PostFormValue("next"))}
	if err := c.checkCSRF(r); err != nil {
		c.render(w, r, http.StatusForbidden, "login", page{Title: "Sign in", Nav: "login", Error: err.Error(), Data: d})
		return
	}
	token := strings.TrimSpace(r.PostFormValue("token"))
	probe := r.Clone(r.Context())
	probe.Header = http.Header{"Authorization": {"Bearer " + token}}
	s := c.session(probe)
	if !s.SignedIn() {
		msg := "the token was not accepted: give a service token (role discover, catalog or admin) or a JWT of this server"
		if token == "" {
			msg = "a token is required"
		} else if s.Open {
			msg = "this server has no credential configured: the console is open without signing in"
		}
		c.recordRefusal(r, token != "")
		c.render(w, r, http.StatusUnauthorized, "login", page{Title: "Sign in", Nav: "login", Error: msg, Data: d})
		return
	}
	http.SetCookie(w, &http.Cookie{Name: tokenCookie, Value: token, Path: Path, HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
	next := d.Next
	if next == "" {
		next = Path
	}
	http.Redirect(w, r, next, http.StatusSeeOther)
}

func (c *Console) logout(w http.ResponseWriter, r *http.Request) {
	if err := c.checkCSRF(r); err != nil {
		c.render(w, r, http.StatusForbidden, "error", page{Title: "Not accepted", Error: err.Error()})
		return
	}
	http.SetCookie(w, &http.Cookie{Name: tokenCookie, Value: "", Path: Path, MaxAge: -1, HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, Path+"login", http.StatusSeeOther)
}

// recordRefusal puts a refused sign-in into the audit trail, as the gRPC
// guard records refused credentials (at most 5 a second per address).
func (c *Console) recordRefusal(r *http.Request, presented bool) {
	if c.cfg.Trail == nil {
		return
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	if c.refusals.Allow(ratelimit.Call, host, "") != nil {
		return
	}
	detail := auth.ErrNoCredential.Error()
	if presented {
		detail = auth.ErrUnknownCredential.Error()
	}
	if err := c.cfg.Trail.Append("", audittrail.Entry{Type: audittrail.TypeAuthentication, Method: "console login",
		Peer: r.RemoteAddr, Outcome: "refused", Detail: detail}); err != nil {
		c.log.Warn("audit trail append failed", "err", err)
	}
}

// safeNext keeps a redirect target inside the console.
func safeNext(next string) string {
	if !strings.HasPrefix(next, Path) || strings.HasPrefix(next, "//") || strings.Contains(next, "\\") {
		return ""
	}
	return next
}

// csrfToken returns the request's CSRF value, setting the cookie when the
// browser has none yet.
func (c *Console) csrfToken(w http.ResponseWriter, r *http.Request) string {
	if ck, err := r.Cookie(csrfCookie); err == nil && len(ck.Value) == 64 {
		return ck.Value
	}
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	v := hex.EncodeToString(b)
	http.SetCookie(w, &http.Cookie{Name: csrfCookie, Value: v, Path: Path, HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
	return v
}

// checkCSRF accepts a form only when it repeats the CSRF cookie (which
// another site can neither read nor send: HttpOnly, SameSite=Strict) and,
// when the browser says where it came from, it came from this console: an
// origin the Host policy names (hostguard), not merely one equal to the
// request's Host, which a DNS-rebinding page sets to its own name.
func (c *Console) checkCSRF(r *http.Request) error {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" {
		return errCSRF
	}
	if o := r.Header.Get("Origin"); o != "" && !c.cfg.Hosts.OriginAllowed(r, o) {
		return errCSRF
	}
	ck, err := r.Cookie(csrfCookie)
	if err != nil || len(ck.Value) != 64 {
		return errCSRF
	}
	if subtle.ConstantTimeCompare([]byte(ck.Value), []byte(r.PostFormValue("csrf"))) != 1 {
		return errCSRF
	}
	return nil
}
