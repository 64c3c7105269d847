// Package console is the web console of `cardex serve` for platform teams,
// at /console/ on the HTTP listener: the catalogue (tenants, server entries,
// cards with their schemas, lint findings and misses), a discovery
// playground, the recorded misses with suggested aliases and a
// queries.jsonl export, and stored `cardex eval` reports as tables and
// charts. Pages are rendered on the server with html/template from embedded
// files; charts are SVG drawn on the server, so everything but the copy
// buttons works without JavaScript.
//
// It authorizes like the gRPC API, with the same authenticator: the
// playground needs what DiscoverTools needs (a discover or admin token, or
// a JWT; a bound credential fixes the caller), every catalogue, misses and
// evaluation page and every write what CatalogService needs (catalog or
// admin). On a server with no credential configured for a role, that
// role's pages are open, as the API is.
package console

import (
	"bytes"
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/seed0cff8200/cardex/cards"
	cardembed "github.com/seed0cff8200/cardex/embed"
	"github.com/seed0cff8200/cardex/internal/access/audittrail"
	"github.com/seed0cff8200/cardex/internal/access/auth"
	"github.com/seed0cff8200/cardex/internal/access/ratelimit"
	"github.com/seed0cff8200/cardex/internal/faces/hostguard"
	"github.com/seed0cff8200/cardex/internal/sources/enrich"
	"github.com/seed0cff8200/cardex/internal/telemetry/feedback"
	"github.com/seed0cff8200/cardex/retriever"
)

// Path is where the console is served.
const Path = "/console/"

// Config is what New needs.
type Config struct {
	Store     cards.Store
	Retriever *retriever.Retriever
	// Auth authenticates console users exactly as the gRPC services do
	// (nil: no credential configured, everything open).
	Auth *auth.Authenticator
	// Limiter applies the API's rate limits to the playground's
	// discoveries and to writes (nil: none).
	Limiter *ratelimit.Limiter
	// Trail records the console's catalogue writes and refused logins.
	Trail *audittrail.Trail
	// FeedbackLog is the feedback log (DATA_DIR/feedback.jsonl) the misses
	// pages read.
	FeedbackLog string
	// AutoPins is `cardex serve --auto-pin-hot` (0: off), for the usage
	// page to say.
	AutoPins int
	// Guard, when set, lists the learned changes it held back.
	Guard interface{ Held() []feedback.Held }
	// EvalDir, when set, holds `cardex eval` report files (*.json) the
	// evaluation page lists.
	EvalDir string
	// GRPCAddr and GRPCTLS describe the gRPC listener, for the commands the
	// playground shows.
	GRPCAddr string
	GRPCTLS  bool
	// Enrichment is the server's enrichment worker (serve --enrich-url),
	// or nil: the catalogue shows its status and a card's page can ask it
	// for fresh search examples.
	Enrichment *enrich.Worker
	Logger     *slog.Logger
	// Hosts are the names the console is reached by besides loopback ones:
	// a form must come from one of them (the CSRF check).
	Hosts hostguard.Policy
}

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Console serves the pages.
type Console struct {
	cfg      Config
	log      *slog.Logger
	authn    *auth.Authenticator
	pages    map[string]*template.Template
	mux      *http.ServeMux
	tenants  *keyIndex
	feedback *eventCache
	// lintEmb embeds card texts for the look-alike check, as `cardex cards
	// lint` does (the hashed embedder: no model needed).
	lintEmb cardembed.Embedder
	// refusals bounds refused logins recorded per client address.
	refusals *ratelimit.Limiter
}

// New builds the console.
func New(cfg Config) (*Console, error) {
	if cfg.Store == nil || cfg.Retriever == nil {
		return nil, errors.New("console: Store and Retriever are required")
	}
	c := &Console{cfg: cfg, log: cfg.Logger, authn: cfg.Auth, mux: http.NewServeMux(),
		tenants: &keyIndex{store: cfg.Store}, feedback: &eventCache{path: cfg.FeedbackLog},
		lintEmb: cardembed.NewHashed(cardembed.DefaultDim), refusals: ratelimit.New(ratelimit.Config{CallRate: 5})}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	if c.authn == nil {
		c.authn = &auth.Authenticator{}
	}
	if err := c.parseTemplates(); err != nil {
		return nil, err
	}
	static, err := fs.Sub(staticFS, "static")
	if err != nil {
		return nil, err
	}
	m := c.mux
	m.Handle("GET "+Path+"static/", http.StripPrefix(Path+"static/", staticFiles(http.FileServerFS(static))))
	m.HandleFunc("GET "+Path+"{$}", c.home)
	m.HandleFunc("GET "+Path+"login", c.loginPage)
	m.HandleFunc("POST "+Path+"login", c.login)
	m.HandleFunc("POST "+Path+"logout", c.logout)
	m.HandleFunc("GET "+Path+"playground", c.needs(roleDiscover, c.playground))
	m.HandleFunc("GET "+Path+"catalog", c.needs(roleCatalog, c.catalogPage))
	m.HandleFunc("GET "+Path+"cards/{tenant}/{server}/{name}", c.needs(roleCatalog, c.cardPage))
	m.HandleFunc("POST "+Path+"cards/{tenant}/{server}/{name}/status", c.needs(roleCatalog, c.writeStatus))
	m.HandleFunc("POST "+Path+"cards/{tenant}/{server}/{name}/aliases", c.needs(roleCatalog, c.writeAlias))
	m.HandleFunc("POST "+Path+"cards/{tenant}/{server}/{name}/examples", c.needs(roleCatalog, c.writeExamples))
	m.HandleFunc("POST "+Path+"cards/{tenant}/{server}/{name}/enrich", c.needs(roleCatalog, c.enrichCard))
	m.HandleFunc("GET "+Path+"misses", c.needs(roleCatalog, c.missesPage))
	m.HandleFunc("GET "+Path+"misses/queries.jsonl", c.needs(roleCatalog, c.missesExport))
	m.HandleFunc("GET "+Path+"usage", c.needs(roleCatalog, c.usagePage))
	m.HandleFunc("GET "+Path+"eval", c.needs(roleCatalog, c.evalPage))
	m.HandleFunc("POST "+Path+"eval", c.needs(roleCatalog, c.evalUpload))
	return c, nil
}

// ServeHTTP answers every request under Path, with the console's security
// headers. The referrer policy is same-origin, not no-referrer: under
// no-referrer a browser sends "Origin: null" with a form's POST, and the
// CSRF check (which compares the Origin with the console's origins) would
// refuse every form, the sign-in first.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("X-Frame-Options", "DENY")
	c.mux.ServeHTTP(w, r)
}

func staticFiles(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "public, max-age=300")
		h.ServeHTTP(w, r)
	})
}

func (c *Console) home(w http.ResponseWriter, r *http.Request) {
	s := c.session(r)
	switch {
	case s.Catalog != nil:
		http.Redirect(w, r, Path+"catalog", http.StatusSeeOther)
	case s.Discover != nil:
		http.Redirect(w, r, Path+"playground", http.StatusSeeOther)
	default:
		http.Redirect(w, r, Path+"login", http.StatusSeeOther)
	}
}

// page is what every template gets.
type page struct {
	Title   string
	Nav     string // the current page's nav entry
	Session *session
	CSRF    string
	Error   string
	Notice  string
	Data    any
}

var funcs = template.FuncMap{
	"f2":      func(x float64) string { return fmt.Sprintf("%.2f", x) },
	"f3":      func(x float64) string { return fmt.Sprintf("%.3f", x) },
	"f4":      func(x float64) string { return fmt.Sprintf("%.4f", x) },
	"pct":     func(x float64) string { return fmt.Sprintf("%.1f%%", 100*x) },
	"join":    strings.Join,
	"when":    func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04 UTC") },
	"day":     func(t time.Time) string { return t.UTC().Format("2006-01-02") },
	"cardURL": cardURL,
	"add":     func(a, b int) int { return a + b },
	"isTrue":  func(b *bool) bool { return b != nil && *b },
	"isFalse": func(b *bool) bool { return b != nil && !*b },
	"svg":     func(s string) template.HTML { return template.HTML(s) }, // only for charts this package draws, whose text is escaped
}

func cardURL(k cards.Key) string {
	return Path + "cards/" + pathEscape(k.Tenant) + "/" + pathEscape(k.Server) + "/" + pathEscape(k.Name)
}

func (c *Console) parseTemplates() error {
	layout, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html")
	if err != nil {
		return err
	}
	c.pages = map[string]*template.Template{}
	for _, name := range []string{"login", "catalog", "card", "playground", "misses", "usage", "eval", "error"} {
		t, err := layout.Clone()
		if err != nil {
			return err
		}
		if _, err := t.ParseFS(templateFS, "templates/"+name+".html"); err != nil {
			return err
		}
		c.pages[name] = t
	}
	return nil
}

// render writes a page; status 0 means 200.
func (c *Console) render(w http.ResponseWriter, r *http.Request, status int, name string, p page) {
	if p.Session == nil {
		p.Session = c.session(r)
	}
	p.CSRF = c.csrfToken(w, r)
	var buf bytes.Buffer
	if err := c.pages[name].ExecuteTemplate(&buf, "layout.html", p); err != nil {
		c.log.Error("console: rendering failed", "page", name, "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if status != 0 {
		w.WriteHeader(status)
	}
	_, _ = w.Write(buf.Bytes())
}

// fail renders an error page for err with the HTTP status that the gRPC
// code of the same error maps to.
func (c *Console) fail(w http.ResponseWriter, r *http.Request, title string, err error) {
	st, msg := httpStatus(w, c.log, err)
	c.render(w, r, st, "error", page{Title: title, Error: msg})
}

// httpStatus is the console's one place that maps errors to HTTP statuses
// and messages, as internal/faces/server maps them to gRPC codes: expected errors
// keep their message (it names the field and the limit, or says "not
// found" alike for what does not exist and what the caller may not see);
// anything else is logged and answered as an internal error. A refusal by
// a rate or in-flight limit says when to retry (Retry-After, on w).
func httpStatus(w http.ResponseWriter, log *slog.Logger, err error) (int, string) {
	var d *ratelimit.Denial
	switch {
	case errors.As(err, &d):
		d.SetRetryAfter(w.Header())
		return http.StatusTooManyRequests, d.Error()
	case errors.Is(err, cards.ErrInvalid):
		return http.StatusBadRequest, err.Error()
	case errors.Is(err, cards.ErrNotFound):
		return http.StatusNotFound, err.Error()
	case errors.Is(err, cards.ErrConflict):
		return http.StatusConflict, err.Error() + ": someone changed the card since this page was loaded; reload it and try again"
	case errors.Is(err, cards.ErrUnavailable):
		return http.StatusServiceUnavailable, err.Error()
	case errors.Is(err, auth.ErrMismatch), errors.Is(err, auth.ErrWrongRole):
		return http.StatusForbidden, err.Error()
	case errors.Is(err, errForbidden), errors.Is(err, errCSRF):
		return http.StatusForbidden, err.Error()
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return http.StatusGatewayTimeout, err.Error()
	}
	log.Error("console: internal error", "err", err)
	return http.StatusInternalServerError, "internal error"
}
