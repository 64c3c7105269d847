// Package ratewait waits out a server's rate limits on the client's side: a
// unary call refused with ResourceExhausted and a retry delay
// (google.rpc.RetryInfo, which a cardex server sends) is made again after
// that delay, with jitter and a backoff that grows while the refusals go
// on, until it gets another answer or its context ends. A refusal without a
// retry delay (a result too large, say) is returned as it is.
package ratewait

import (
	"context"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"

	"github.com/seed0cff8200/cardex/internal/access/ratelimit"
)

// MaxWait bounds one wait, whatever the server asks for.
const MaxWait = 5 * time.Second

// Waits counts the refusals waited out and the time spent waiting. The
// zero value is ready; it is safe for concurrent use.
type Waits struct {
	n     atomic.Int64
	total atomic.Int64 // nanoseconds
	last  atomic.Pointer[ratelimit.Denial]
}

// Count is how many refusals were waited out, and for how long in all.
func (w *Waits) Count() (int64, time.Duration) {
	return w.n.Load(), time.Duration(w.total.Load())
}

// Last is the last refusal waited out (its scope, class and limit say which
// limit refused), or nil.
func (w *Waits) Last() *ratelimit.Denial { return w.last.Load() }

// Interceptor makes every unary call wait out rate limits; w, when not nil,
// counts the waits.
func Interceptor(w *Waits) grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		return Call(ctx, w, func() error { return invoker(ctx, method, req, reply, cc, opts...) })
	}
}

// Backoff is the wait before trying again after the attempt-th refusal in
// a row (from 0) that asked for delay: delay doubled at each further
// refusal, at most MaxWait, plus up to half of it at random so that callers
// refused together do not come back together.
func Backoff(delay time.Duration, attempt int) time.Duration {
	wait := min(delay<<min(attempt, 6), MaxWait)
	return wait + time.Duration(rand.Int64N(int64(wait)/2+1))
}

// Call makes call, and again after every rate-limit refusal, waiting the
// delay the server asked for (doubled at each further refusal in a row, at
// most MaxWait, plus up to half of it at random so that callers refused
// together do not come back together). It stops when call gets another
// answer, or when the wait would outlast ctx (then the refusal is
// returned).
func Call(ctx context.Context, w *Waits, call func() error) error {
	for attempt := 0; ; attempt++ {
		err := call()
		d, limited := ratelimit.FromError(err)
		if !limited {
			return err
		}
		wait := Backoff(d.RetryAfter, attempt)
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
			return err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		if w != nil {
			w.n.Add(1)
			w.total.Add(int64(wait))
			w.last.Store(&d)
		}
	}
}
