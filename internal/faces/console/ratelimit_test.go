package console_test

import (
	"net/http"
	"testing"

	"github.com/seed0cff8200/cardex/internal/access/ratelimit"
	"github.com/seed0cff8200/cardex/internal/faces/console"
)

// TestPlaygroundRateLimitSaysRetryAfter: the playground draws from the
// caller's discovery bucket like DiscoverTools; a refusal is 429 with
// Retry-After, the seconds until the bucket holds a token again (a
// discovery rate of 0.2 a second: 5), as /mcp and the HTTP/JSON API say it.
func TestPlaygroundRateLimitSaysRetryAfter(t *testing.T) {
	h := newHarness(t, true, func(_ *harness, c *console.Config) {
		c.Limiter = ratelimit.New(ratelimit.Config{CallRate: 0.1})
	})
	get := func() *http.Response {
		t.Helper()
		resp, err := http.Get(h.url + "/console/playground?query=refund+the+customer&tenant=acme&subject=alice&scopes=*")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	if resp := get(); resp.StatusCode != http.StatusOK {
		t.Fatalf("first discovery: %d", resp.StatusCode)
	}
	resp := get()
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "5" {
		t.Errorf("second discovery: %d, Retry-After %q; want 429 with Retry-After 5", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
}
