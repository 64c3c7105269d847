package ratelimit

import (
	"strconv"
	"testing"
	"time"
)

func TestBuckets(t *testing.T) {
	now := time.Unix(1000, 0)
	l := New(Config{CallRate: 2, TenantRate: 3})
	l.now = func() time.Time { return now }
	// Calls: a burst of 2 per caller.
	for i := range 2 {
		if d := l.Allow(Call, "alice", "acme"); d != nil {
			t.Fatalf("call %d refused: %v", i+1, d)
		}
	}
	d := l.Allow(Call, "alice", "acme")
	if d == nil || d.Scope != "caller" || d.RetryAfter <= 0 || d.RetryAfter > 500*time.Millisecond {
		t.Fatalf("third call: %+v, want a caller refusal with a retry within 500ms", d)
	}
	// Discovery: its own bucket, twice the size.
	for i := range 4 {
		if d := l.Allow(Discovery, "alice", "acme"); d != nil {
			t.Fatalf("discovery %d refused: %v", i+1, d)
		}
	}
	if d := l.Allow(Discovery, "alice", "acme"); d == nil || d.Class != Discovery || d.Limit != 4 {
		t.Fatalf("fifth discovery: %+v", d)
	}
	// The tenant's bucket (3 calls) is shared by its callers; a refused
	// call takes nothing from the caller's bucket.
	if d := l.Allow(Call, "bob", "acme"); d != nil {
		t.Fatal(d)
	}
	if d := l.Allow(Call, "bob", "acme"); d == nil || d.Scope != "tenant" {
		t.Fatalf("bob's second call: %+v, want the tenant's limit", d)
	}
	if d := l.Allow(Call, "carol", "globex"); d != nil {
		t.Fatalf("another tenant: %v", d)
	}
	// Time refills.
	now = now.Add(time.Second)
	if d := l.Allow(Call, "alice", "acme"); d != nil {
		t.Fatalf("after a second: %v", d)
	}
	// Nil limits nothing.
	var none *Limiter
	if none.Allow(Call, "x", "y") != nil {
		t.Error("nil limiter refused")
	}
	if New(Config{}) != nil {
		t.Error("an empty config made a limiter")
	}
}

func TestInFlight(t *testing.T) {
	l := New(Config{InFlight: 2})
	r1, d1 := l.Acquire("a")
	r2, d2 := l.Acquire("a")
	if d1 != nil || d2 != nil {
		t.Fatal(d1, d2)
	}
	if _, d := l.Acquire("a"); d == nil || d.Scope != "in_flight" {
		t.Fatalf("third in flight: %+v", d)
	}
	if _, d := l.Acquire("b"); d != nil {
		t.Fatalf("another caller: %v", d)
	}
	r1()
	r1() // twice is once
	if _, d := l.Acquire("a"); d != nil {
		t.Fatalf("after a release: %v", d)
	}
	if _, d := l.Acquire("a"); d == nil {
		t.Fatal("a double release freed two slots")
	}
	r2()
}

func TestMaxKeys(t *testing.T) {
	now := time.Unix(1000, 0)
	l := New(Config{CallRate: 1, MaxKeys: 10})
	l.now = func() time.Time { return now }
	for i := range 100 {
		l.Allow(Call, string(rune('a'+i)), "")
	}
	if n := len(l.buckets); n > 10 {
		t.Errorf("%d buckets kept, the cap is 10", n)
	}
}

// TestCredentialBucket: a credential that names a new caller and tenant
// each time still draws from one bucket of its own; a refusal by it takes
// nothing from the caller's or the tenant's.
func TestCredentialBucket(t *testing.T) {
	now := time.Unix(1000, 0)
	l := New(Config{CallRate: 2, TenantRate: 3, CredentialRate: 4})
	l.now = func() time.Time { return now }
	for i := range 4 {
		if d := l.AllowFor(Call, "orchestrator", "caller-"+string(rune('a'+i)), "tenant-"+string(rune('a'+i))); d != nil {
			t.Fatalf("call %d refused: %v", i+1, d)
		}
	}
	d := l.AllowFor(Call, "orchestrator", "caller-z", "tenant-z")
	if d == nil || d.Scope != "credential" || d.Limit != 4 {
		t.Fatalf("fifth call, a new caller and tenant: %+v, want the credential's limit", d)
	}
	if d := l.AllowFor(Call, "", "caller-z", "tenant-z"); d != nil {
		t.Fatalf("the refused call took from caller-z's buckets: %v", d)
	}
	if d := l.AllowFor(Call, "other", "caller-y", "tenant-y"); d != nil {
		t.Fatalf("another credential: %v", d)
	}
}

// TestRetryAfterSeconds: a refusal says, in whole seconds rounded up and at
// least 1, when the bucket that refused holds a token again (an HTTP
// Retry-After value, and the gRPC retry-after header).
func TestRetryAfterSeconds(t *testing.T) {
	now := time.Unix(1000, 0)
	l := New(Config{CallRate: 0.1, TenantRate: 100})
	l.now = func() time.Time { return now }
	if d := l.Allow(Call, "alice", "acme"); d != nil {
		t.Fatal(d)
	}
	for _, tc := range []struct {
		after time.Duration
		want  int
	}{{0, 10}, {500 * time.Millisecond, 10}, {9 * time.Second, 1}, {9900 * time.Millisecond, 1}} {
		now = time.Unix(1000, 0).Add(tc.after)
		d := l.Allow(Call, "alice", "acme")
		if d == nil || d.RetryAfterSeconds() != tc.want {
			t.Errorf("%v after the first call: %+v, want a refusal with Retry-After %d", tc.after, d, tc.want)
		}
		if d != nil {
			if md := d.Metadata(); len(md.Get(RetryAfterMetadata)) != 1 || md.Get(RetryAfterMetadata)[0] != strconv.Itoa(tc.want) {
				t.Errorf("%v: metadata %v", tc.after, md)
			}
		}
	}
	if got := (&Denial{RetryAfter: time.Millisecond}).RetryAfterSeconds(); got != 1 {
		t.Errorf("1ms: %d, want at least 1", got)
	}
}
