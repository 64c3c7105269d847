package ratewait_test

import (
	"context"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/seed0cff8200/cardex/internal/access/ratelimit"
	"github.com/seed0cff8200/cardex/internal/ops/ratewait"
)

// limitedServer serves the health service behind a real limiter of 20
// calls a second for one caller, refusing the rest as a cardex server does
// (and, for one method, with a ResourceExhausted that carries no delay).
func limitedServer(t *testing.T) *grpc.ClientConn {
	t.Helper()
	lim := ratelimit.New(ratelimit.Config{CallRate: 20})
	gs := grpc.NewServer(grpc.UnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, next grpc.UnaryHandler) (any, error) {
		if d := lim.Allow(ratelimit.Call, "caller:t/s", "t"); d != nil {
			return nil, d.Status().Err()
		}
		if req.(*healthpb.HealthCheckRequest).GetService() == "too-big" {
			return nil, status.Error(codes.ResourceExhausted, "the answer is too large")
		}
		return next(ctx, req)
	}))
	healthpb.RegisterHealthServer(gs, health.NewServer())
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go gs.Serve(lis)
	t.Cleanup(gs.Stop)
	return dial(t, lis.Addr().String())
}

func dial(t *testing.T, addr string, opts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr, append(opts, grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func TestWaitsOutRateLimits(t *testing.T) {
	conn := limitedServer(t)
	plain := healthpb.NewHealthClient(conn)
	var w ratewait.Waits
	waiting := healthpb.NewHealthClient(dial(t, conn.Target(), grpc.WithUnaryInterceptor(ratewait.Interceptor(&w))))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// Without waiting, the burst is used up and then calls are refused
	// with the limit named.
	var refused error
	for range 40 {
		if _, err := plain.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
			refused = err
			break
		}
	}
	d, ok := ratelimit.FromError(refused)
	if !ok || d.Scope != "caller" || d.Class != ratelimit.Call || d.Limit != 20 || d.RetryAfter <= 0 {
		t.Fatalf("refusal %v read back as %+v, %v", refused, d, ok)
	}

	// Waiting, 60 calls at 20 a second all succeed, in about 3 s.
	start := time.Now()
	for i := range 60 {
		if _, err := waiting.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	n, total := w.Count()
	if n == 0 || total <= 0 || w.Last() == nil || w.Last().Scope != "caller" {
		t.Errorf("%d waits, %s, last %+v; want some", n, total, w.Last())
	}
	if took := time.Since(start); took < time.Second {
		t.Errorf("60 calls at 20/s took %s: the limit was not in force", took)
	}

	// A ResourceExhausted without a delay is not waited for.
	time.Sleep(200 * time.Millisecond)
	_, err := waiting.Check(ctx, &healthpb.HealthCheckRequest{Service: "too-big"})
	if _, limited := ratelimit.FromError(err); status.Code(err) != codes.ResourceExhausted || limited {
		t.Errorf("too-big: %v", err)
	}

	// A wait that would outlast the call's deadline is not begun: the
	// refusal is the answer. The bucket is drained to a refusal right
	// before; a token that came back in between (a slow machine: one
	// every 50 ms) answers the call, so that attempt is made again.
	for attempt := 1; ; attempt++ {
		for range 40 {
			if _, err := plain.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
				break
			}
		}
		short, cancelShort := context.WithTimeout(ctx, time.Millisecond)
		_, err := waiting.Check(short, &healthpb.HealthCheckRequest{})
		cancelShort()
		if err == nil && attempt < 5 {
			continue
		}
		if status.Code(err) != codes.ResourceExhausted && status.Code(err) != codes.DeadlineExceeded {
			t.Errorf("short deadline, attempt %d: %v", attempt, err)
		}
		break
	}
}
