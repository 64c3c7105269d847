package console_test

// The browser side of the console tests: a real headless Chromium (Debian's
// chromium; scripts/test installs it when missing) driven with chromedp,
// one browser a test and one browser context (its own cookies) a user.
//
// Every page the tests load is also written as a PNG screenshot: into a
// temporary directory, or into docs/console (the README's pictures) when
// CARDEX_SCREENSHOTS=1.

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/chromedp"
)

// stepTimeout bounds one browser step (a page load, a form submission); the
// machines that run the tests may be loaded, so it is generous.
const stepTimeout = 60 * time.Second

// chromiumPath finds the browser: $CARDEX_CHROMIUM, or chromium (Debian's
// package), chromium-browser or google-chrome on PATH. Without one the test
// fails in CI and is skipped elsewhere.
func chromiumPath(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("CARDEX_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	msg := "no Chromium on PATH: the console tests drive a real browser (apt-get install chromium; scripts/test installs it; or set CARDEX_CHROMIUM)"
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// newBrowser starts a headless browser for the test, stopped at its end.
func newBrowser(t *testing.T) context.Context {
	t.Helper()
	path := chromiumPath(t)
	opts := append(slices.Clone(chromedp.DefaultExecAllocatorOptions[:]),
		chromedp.ExecPath(path), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-dev-shm-usage", true), chromedp.WindowSize(1280, 900))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	bctx, cancelBrowser := chromedp.NewContext(actx)
	t.Cleanup(func() {
		cancelBrowser()
		cancelAlloc()
	})
	// The first run starts the browser; it must have no deadline (the
	// browser lives as long as its context).
	if err := chromedp.Do(bctx); err != nil {
		t.Fatalf("starting %s: %v", path, err)
	}
	return bctx
}

// user is one person at the console: a browser context of its own (its own
// cookies), signed in with a token or not.
type user struct {
	t   *testing.T
	h   *harness
	ctx context.Context
}

// user opens a browser context and signs in with token ("": not signed in).
func (h *harness) user(t *testing.T, browser context.Context, token string) *user {
	t.Helper()
	ctx, cancel := chromedp.NewContext(browser, chromedp.WithNewBrowserContext())
	t.Cleanup(cancel)
	if err := chromedp.Do(ctx); err != nil { // opens the tab, without a deadline
		t.Fatal(err)
	}
	u := &user{t: t, h: h, ctx: ctx}
	if token != "" {
		u.login(token)
	}
	return u
}

// with is the user in a subtest (failures are the subtest's).
func (u *user) with(t *testing.T) *user {
	c := *u
	c.t = t
	return &c
}

// run runs one browser action with a bounded wait.
func run[T any](u *user, a chromedp.Action[T]) T {
	u.t.Helper()
	ctx, cancel := context.WithTimeout(u.ctx, stepTimeout)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		u.t.Fatal(err)
	}
	return v
}

// js evaluates a JavaScript expression in the page and decodes its value.
func js[T any](u *user, expr string) T {
	u.t.Helper()
	return run(u, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
}

func (u *user) do(steps ...chromedp.Action[chromedp.Void]) {
	u.t.Helper()
	run(u, chromedp.Steps(steps...))
}

// open loads a console path and returns the HTTP status of the document
// (after redirects).
func (u *user) open(path string) int64 {
	u.t.Helper()
	resp := run(u, chromedp.NavigateResponse(u.h.url+path))
	return resp.Status
}

// click clicks the element and returns the HTTP status of the document the
// browser loads then (a form submission).
func (u *user) click(sel string) int64 {
	u.t.Helper()
	ctx, cancel := context.WithTimeout(u.ctx, stepTimeout)
	defer cancel()
	resp, err := chromedp.RunResponse(ctx, chromedp.Click(chromedp.CSS(sel)))
	if err != nil {
		u.t.Fatalf("clicking %s: %v", sel, err)
	}
	return resp.Status
}

// fill sets form fields by element id.
func (u *user) fill(fields map[string]string) {
	u.t.Helper()
	for id, v := range fields {
		u.do(chromedp.SetValue(chromedp.ID(id), v))
	}
}

// value is the value of a form field, by id.
func (u *user) value(id string) string {
	u.t.Helper()
	return js[string](u, `document.getElementById(`+quoteJS(id)+`).value`)
}

// path is the page's location below the console's URL.
func (u *user) path() string {
	u.t.Helper()
	loc := run(u, chromedp.Location())
	return strings.TrimPrefix(loc, u.h.url)
}

// text is the text content of the first element matching a CSS selector,
// trimmed ("" when there is none).
func (u *user) text(sel string) string {
	u.t.Helper()
	return strings.TrimSpace(js[string](u, `(document.querySelector(`+quoteJS(sel)+`) || {textContent: ""}).textContent`))
}

// texts are the text contents of every element matching a CSS selector.
func (u *user) texts(sel string) []string {
	u.t.Helper()
	out := js[[]string](u, `[...document.querySelectorAll(`+quoteJS(sel)+`)].map(e => e.textContent.trim())`)
	if out == nil {
		out = []string{}
	}
	return out
}

// html is the whole document as the browser holds it.
func (u *user) html() string {
	u.t.Helper()
	return js[string](u, `document.documentElement.outerHTML`)
}

// download clicks a link and returns the file the browser saves as name.
func (u *user) download(sel, name string) []byte {
	u.t.Helper()
	dir := u.t.TempDir()
	id := chromedp.FromContext(u.ctx).BrowserContextID
	u.do(chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
		_, err := chromedp.CallBrowser(ctx, browser.SetDownloadBehavior, browser.SetDownloadBehaviorParams{
			Behavior: browser.SetDownloadBehaviorBehaviorAllow, BrowserContextID: id, DownloadPath: dir})
		return err
	}), chromedp.Click(chromedp.CSS(sel)))
	// The browser renames the file to its name when it is complete.
	deadline := time.Now().Add(stepTimeout)
	for {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err == nil {
			return b
		}
		if time.Now().After(deadline) {
			ents, _ := os.ReadDir(dir)
			u.t.Fatalf("no %s downloaded by clicking %s (the download directory holds %v)", name, sel, ents)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// login signs in through the sign-in form.
func (u *user) login(token string) {
	u.t.Helper()
	if st := u.open("/console/login"); st != 200 {
		u.t.Fatalf("sign-in page: HTTP %d", st)
	}
	u.fill(map[string]string{"token": token})
	if st := u.click("#login-form button[type=submit]"); st != 200 {
		u.t.Fatalf("signing in: HTTP %d: %s", st, u.text("#error"))
	}
	if u.text("#who-name") == "" {
		u.t.Fatalf("signed in, but the page (%s) names nobody: %s", u.path(), u.text("main"))
	}
}

// shot writes a full-page PNG screenshot of the current page as NAME.png.
func (u *user) shot(name string) {
	u.t.Helper()
	dir := u.t.TempDir()
	if os.Getenv("CARDEX_SCREENSHOTS") == "1" {
		dir = filepath.Join("..", "..", "..", "docs", "console")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			u.t.Fatal(err)
		}
	}
	png := run(u, chromedp.FullScreenshot(100))
	if len(png) < 8 || string(png[1:4]) != "PNG" {
		u.t.Fatalf("screenshot %s: not a PNG", name)
	}
	p := filepath.Join(dir, name+".png")
	if err := os.WriteFile(p, png, 0o644); err != nil {
		u.t.Fatal(err)
	}
	u.t.Logf("screenshot: %s (%d bytes)", p, len(png))
}

// quoteJS quotes s as a JavaScript string literal.
func quoteJS(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`, "\r", `\r`, "<", `\x3c`)
	return `"` + r.Replace(s) + `"`
}
