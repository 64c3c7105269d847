// Package ratelimit bounds how fast and how concurrently callers may use
// cardex: token buckets per caller and per tenant, with discovery (search,
// describe) on its own bucket at twice the call rate, as progressive-
// disclosure gateways do (an agent searches and describes more often than
// it calls), a bucket per credential whatever callers it names, and a cap on
// each caller's calls in flight.
package ratelimit

import (
	"math"
	"strconv"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Class is the bucket a request draws from.
type Class int

// The classes.
const (
	// Call: AuthorizeCall, call_tool / CallTool, ReportOutcome, catalog
	// calls.
	Call Class = iota
	// Discovery: DiscoverTools, SearchTools, DescribeTool and the search
	// and describe meta-tools; their rate is twice the call rate.
	Discovery
)

func (c Class) String() string {
	if c == Discovery {
		return "discovery"
	}
	return "call"
}

// Config sets the limits; a zero rate or count is no limit.
type Config struct {
	// CallRate is each caller's calls per second (burst: one second's
	// worth); discovery gets twice as much.
	CallRate float64
	// TenantRate is each tenant's calls per second, all its callers
	// together; discovery gets twice as much.
	TenantRate float64
	// CredentialRate is each credential's calls per second, whatever
	// callers it names (an unbound discover token states its caller in each
	// request, and could otherwise escape the caller and tenant buckets by
	// naming a new one each time); discovery gets twice as much.
	CredentialRate float64
	// InFlight is how many calls one caller may have in progress at once.
	InFlight int
	// MaxKeys bounds the buckets kept in memory (default 100,000); idle,
	// full buckets are dropped first.
	MaxKeys int
}

// Limiter is safe for concurrent use. A nil *Limiter limits nothing.
type Limiter struct {
	cfg Config
	now func() time.Time

	mu       sync.Mutex
	buckets  map[bucketKey]*rate.Limiter
	inflight map[string]int
}

type bucketKey struct {
	scope string // "caller", "tenant" or "credential"
	class Class
	key   string
}

// New returns a limiter, or nil when cfg limits nothing.
func New(cfg Config) *Limiter {
	if cfg.CallRate <= 0 && cfg.TenantRate <= 0 && cfg.CredentialRate <= 0 && cfg.InFlight <= 0 {
		return nil
	}
	if cfg.MaxKeys <= 0 {
		cfg.MaxKeys = 100_000
	}
	return &Limiter{cfg: cfg, now: time.Now, buckets: map[bucketKey]*rate.Limiter{}, inflight: map[string]int{}}
}

// Denial says which limit refused a request and when to try again.
type Denial struct {
	Scope      string // "caller", "tenant", "credential" or "in_flight"
	Class      Class
	Limit      float64 // per second, or the in-flight cap
	RetryAfter time.Duration
}

func (d *Denial) Error() string {
	if d.Scope == "in_flight" {
		return "too many calls in flight for this caller (the limit is " + strconv.Itoa(int(d.Limit)) + "); retry after " + d.RetryAfter.String()
	}
	return "rate limit of the " + d.Scope + " exceeded (" + d.Class.String() + ": " + strconv.FormatFloat(d.Limit, 'g', -1, 64) + " per second); retry after " + d.RetryAfter.Round(time.Millisecond).String()
}

// CallerKey is the bucket key of a caller by identity: every surface that
// limits a (tenant, subject) uses it, so they draw on the same buckets.
func CallerKey(tenant, subject string) string { return "caller:" + tenant + "/" + subject }

// Allow takes one token from the caller's and the tenant's bucket of the
// class (either key may be ""), or takes none and says how long to wait.
func (l *Limiter) Allow(class Class, caller, tenant string) *Denial {
	return l.AllowFor(class, "", caller, tenant)
}

// AllowFor is Allow with the credential's bucket too (credential "" is
// none): a call of a credential that names its callers draws from the
// credential's, the caller's and the tenant's buckets.
func (l *Limiter) AllowFor(class Class, credential, caller, tenant string) *Denial {
	if l == nil {
		return nil
	}
	now := l.now()
	type want struct {
		k    bucketKey
		rate float64
	}
	mult := 1.0
	if class == Discovery {
		mult = 2
	}
	var wants []want
	if caller != "" && l.cfg.CallRate > 0 {
		wants = append(wants, want{bucketKey{"caller", class, caller}, l.cfg.CallRate * mult})
	}
	if tenant != "" && l.cfg.TenantRate > 0 {
		wants = append(wants, want{bucketKey{"tenant", class, tenant}, l.cfg.TenantRate * mult})
	}
	if credential != "" && l.cfg.CredentialRate > 0 {
		wants = append(wants, want{bucketKey{"credential", class, credential}, l.cfg.CredentialRate * mult})
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	var taken []*rate.Reservation
	for _, w := range wants {
		r := l.bucket(w.k, w.rate, now).ReserveN(now, 1)
		if d := r.DelayFrom(now); !r.OK() || d > 0 {
			r.CancelAt(now)
			for _, t := range taken {
				t.CancelAt(now)
			}
			return &Denial{Scope: w.k.scope, Class: class, Limit: w.rate, RetryAfter: max(d, time.Millisecond)}
		}
		taken = append(taken, r)
	}
	return nil
}

// bucket returns the bucket of k, making it. Call with l.mu held.
func (l *Limiter) bucket(k bucketKey, perSecond float64, now time.Time) *rate.Limiter {
	if b := l.buckets[k]; b != nil {
		return b
	}
	if len(l.buckets) >= l.cfg.MaxKeys {
		l.sweep(now)
	}
	b := rate.NewLimiter(rate.Limit(perSecond), int(math.Max(1, math.Ceil(perSecond))))
	l.buckets[k] = b
	return b
}

// sweep drops full buckets (a new one is the same), then, if still over
// the cap, any. Call with l.mu held.
func (l *Limiter) sweep(now time.Time) {
	for k, b := range l.buckets {
		if b.TokensAt(now) >= float64(b.Burst()) {
			delete(l.buckets, k)
		}
	}
	for k := range l.buckets {
		if len(l.buckets) < l.cfg.MaxKeys {
			break
		}
		delete(l.buckets, k)
	}
}

// Acquire counts one call of caller in flight; release it when the call
// ends. It refuses when the caller already has InFlight calls.
func (l *Limiter) Acquire(caller string) (release func(), d *Denial) {
	if l == nil || l.cfg.InFlight <= 0 || caller == "" {
		return func() {}, nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.inflight[caller] >= l.cfg.InFlight {
		return nil, &Denial{Scope: "in_flight", Limit: float64(l.cfg.InFlight), RetryAfter: 100 * time.Millisecond}
	}
	l.inflight[caller]++
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			if l.inflight[caller]--; l.inflight[caller] <= 0 {
				delete(l.inflight, caller)
			}
		})
	}, nil
}
