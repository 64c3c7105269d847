package main

import (
	"context"
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	pb "github.com/seed0cff8200/cardex/proto/cardex/v1"
)

// TestCrashKeepsAcknowledgedWrites kills `cardex serve` with SIGKILL in the
// middle of a stream of writes, three times, restarting it on the same
// data directory each time: every write the server acknowledged is there
// afterwards, at its acknowledged version or later, and discoverable.
func TestCrashKeepsAcknowledgedWrites(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildBinary(t)
	data := t.TempDir()
	acked := map[string]int64{} // card name → highest acknowledged version
	const writers, perRound = 3, 60
	for round := range 3 {
		s := serve(t, bin, "--data-dir", data, "--listen", "127.0.0.1:0", "--http-listen", "", "--rate-limit", "0")
		if s.addr == "" {
			t.Fatalf("round %d: serve did not start:\n%s", round, s.log())
		}
		conn, err := grpc.NewClient(s.dial, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		verify(t, conn, acked, round)

		cat := pb.NewCatalogServiceClient(conn)
		var mu sync.Mutex
		var wg sync.WaitGroup
		ctx, cancel := context.WithCancel(t.Context())
		for w := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; ctx.Err() == nil; i++ {
					// New cards, and updates of earlier ones (versions move).
					name := fmt.Sprintf("w%d_%d", w, i%(perRound/writers))
					c := &pb.Card{Tenant: "crash", Server: "writes", Name: name,
						Summary: fmt.Sprintf("Write %d of writer %d in round %d.", i, w, round)}
					cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
					res, err := cat.PutCards(cctx, &pb.PutCardsRequest{Cards: []*pb.Card{c}})
					ccancel()
					if err != nil {
						continue // not acknowledged: may or may not be there
					}
					mu.Lock()
					if v := res.GetResults()[0].GetVersion(); v > acked[name] {
						acked[name] = v
					}
					mu.Unlock()
				}
			}()
		}
		// Let writes flow, then kill the server mid-stream.
		deadline := time.Now().Add(20 * time.Second)
		for {
			mu.Lock()
			n := 0
			for _, v := range acked {
				n += int(v)
			}
			mu.Unlock()
			if n >= (round+1)*perRound*2 || time.Now().After(deadline) {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		if err := s.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		<-s.exited
		cancel()
		wg.Wait()
		conn.Close()
		if len(acked) == 0 {
			t.Fatalf("round %d: no write acknowledged before the kill", round)
		}
	}
	s := serve(t, bin, "--data-dir", data, "--listen", "127.0.0.1:0", "--http-listen", "", "--rate-limit", "0")
	conn, err := grpc.NewClient(s.dial, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	verify(t, conn, acked, 3)
}

// verify checks every acknowledged write: stored at its version or later,
// and found by DescribeTool (the retriever loaded it at start).
func verify(t *testing.T, conn *grpc.ClientConn, acked map[string]int64, round int) {
	t.Helper()
	cat, disc := pb.NewCatalogServiceClient(conn), pb.NewDiscoveryServiceClient(conn)
	total := int64(0)
	for name, v := range acked {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		got, err := cat.GetCard(ctx, &pb.GetCardRequest{Tenant: "crash", Server: "writes", Name: name})
		if err != nil {
			t.Errorf("after restart %d: acknowledged %s v%d is gone: %v", round, name, v, err)
			cancel()
			continue
		}
		if got.GetCard().GetVersion() < v {
			t.Errorf("after restart %d: %s at v%d, but v%d was acknowledged", round, name, got.GetCard().GetVersion(), v)
		}
		if _, err := disc.DescribeTool(ctx, &pb.DescribeToolRequest{Caller: &pb.Caller{Tenant: "crash", Scopes: []string{"*"}}, Server: "writes", Name: name}); err != nil {
			t.Errorf("after restart %d: %s not discoverable: %v", round, name, err)
		}
		cancel()
		total += v
	}
	t.Logf("restart %d: %d cards, %d acknowledged versions, all present", round, len(acked), total)
}
