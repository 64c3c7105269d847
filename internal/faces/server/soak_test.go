package server_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/seed0cff8200/cardex/cards"
	pb "github.com/seed0cff8200/cardex/proto/cardex/v1"
)

// The soak's catalogue: each card's tenant and required scopes are fixed by
// its number, so what a caller may see never changes while a writer keeps
// rewriting, revoking, reactivating, deleting and re-creating cards.
const soakCards = 40

func soakCard(i int, rev int) cards.Card {
	tenant := "acme"
	if i%5 == 0 {
		tenant = "globex"
	}
	scopes := [][]string{nil, {"a:read"}, {"b:read"}, {"a:read", "b:admin"}}[i%4]
	words := []string{"refund", "invoice", "order", "ticket", "deploy", "restart", "report", "customer", "package", "payment"}
	return cards.Card{Tenant: tenant, Server: fmt.Sprintf("s%d", i%3), Name: fmt.Sprintf("tool_%d", i),
		Summary:        fmt.Sprintf("%s the %s for revision %d.", words[(i+rev)%len(words)], words[(i*7+rev)%len(words)], rev),
		Aliases:        []string{words[(i+2*rev)%len(words)] + " " + words[i%len(words)]},
		RequiredScopes: scopes,
		InputSchema:    []byte(`{"type":"object","properties":{"id":{"type":"string"}},"additionalProperties":false}`)}
}

type soakCaller struct {
	tenant string
	scopes []string
}

// may is the rule, written out independently of the retriever: same
// tenant, every required scope held literally, by "*", or by "p:*".
func (c soakCaller) may(i int) bool {
	k := soakCard(i, 0)
	if k.Tenant != c.tenant {
		return false
	}
	for _, need := range k.RequiredScopes {
		ok := false
		for _, h := range c.scopes {
			if h == "*" || h == need || (strings.HasSuffix(h, ":*") && strings.HasPrefix(need, strings.TrimSuffix(h, "*"))) {
				ok = true
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

func cardNumber(name string) int {
	var i int
	if _, err := fmt.Sscanf(name, "tool_%d", &i); err != nil {
		return -1
	}
	return i
}

// TestSoak runs readers of every kind against a writer for a bounded time
// (under -race in CI) and checks that no answer ever holds a card its
// caller may not see, counts one, or authorizes one.
func TestSoak(t *testing.T) {
	if testing.Short() {
		t.Skip("soak")
	}
	var initial []cards.Card
	for i := range soakCards {
		initial = append(initial, soakCard(i, 0))
	}
	e := newEnv(t, envOptions{cards: initial})
	callers := []soakCaller{
		{"acme", nil}, {"acme", []string{"a:read"}}, {"acme", []string{"b:*"}}, {"acme", []string{"a:read", "b:read"}},
		{"acme", []string{"*"}}, {"globex", []string{"a:read"}}, {"globex", []string{"*"}}, {"initech", []string{"*"}},
	}
	allowedCount := func(c soakCaller) int32 {
		n := int32(0)
		for i := range soakCards {
			if c.may(i) {
				n++
			}
		}
		return n
	}
	queries := []string{"refund the invoice", "tool_3", "restart deploy", "customer package", "payment report", "ticket", "tool_19 b admin", "order"}

	const duration, maxOps = 8 * time.Second, 4000
	// Stopped by cancellation, not a deadline: gRPC's own deadline timer
	// could fire before the context reports it, and look like a failure.
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	stop := time.AfterFunc(duration, cancel)
	defer stop.Stop()
	var ops, writes atomic.Int64
	var mu sync.Mutex
	var violations []string
	violate := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		if len(violations) < 20 {
			violations = append(violations, fmt.Sprintf(format, args...))
		}
	}
	check := func(c soakCaller, what, name string) {
		if i := cardNumber(name); i < 0 || !c.may(i) {
			violate("%v: %s returned %s", c, what, name)
		}
	}
	var wg sync.WaitGroup
	// The writer.
	wg.Add(1)
	go func() {
		defer wg.Done()
		r := rand.New(rand.NewPCG(1, 2))
		for rev := 1; ctx.Err() == nil; rev++ {
			i := r.IntN(soakCards)
			c := soakCard(i, rev)
			var err error
			switch r.IntN(4) {
			case 0:
				c.Status = cards.StatusRevoked
				_, err = e.cat.PutCards(ctx, cardsReq(c))
			case 1:
				_, err = e.cat.DeleteCard(ctx, &pb.DeleteCardRequest{Tenant: c.Tenant, Server: c.Server, Name: c.Name})
				if status.Code(err) == codes.NotFound {
					err = nil
				}
			default:
				_, err = e.cat.PutCards(ctx, cardsReq(c))
			}
			if err != nil && ctx.Err() == nil {
				violate("write: %v", err)
			}
			writes.Add(1)
		}
	}()
	// The readers.
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 99))
			for ctx.Err() == nil && ops.Add(1) <= maxOps {
				c := callers[r.IntN(len(callers))]
				pc := &pb.Caller{Tenant: c.tenant, Subject: fmt.Sprintf("reader-%d", w), Scopes: c.scopes}
				q := queries[r.IntN(len(queries))]
				var err error
				switch r.IntN(4) {
				case 0:
					var res *pb.DiscoverToolsResponse
					res, err = e.disc.DiscoverTools(ctx, &pb.DiscoverToolsRequest{Caller: pc, Query: q, TopK: 10,
						AlwaysLoad: []*pb.ToolRef{{Server: "s0", Name: fmt.Sprintf("tool_%d", r.IntN(soakCards))}}})
					if err == nil {
						if res.GetCandidateCount() > allowedCount(c) {
							violate("%v: candidate_count %d > %d it may see", c, res.GetCandidateCount(), allowedCount(c))
						}
						for _, tl := range res.GetTools() {
							check(c, "DiscoverTools", tl.GetCard().GetName())
						}
					}
				case 1:
					cursor, query := "", q
					if r.IntN(2) == 0 {
						query = "" // every authorized tool, in order
					}
					for page := 0; page < 10 && ctx.Err() == nil; page++ {
						var res *pb.SearchToolsResponse
						res, err = e.disc.SearchTools(ctx, &pb.SearchToolsRequest{Caller: pc, Query: query, PageSize: 7, Cursor: cursor})
						if err != nil {
							break
						}
						for _, s := range res.GetTools() {
							check(c, "SearchTools", s.GetName())
						}
						if cursor = res.GetNextCursor(); cursor == "" {
							break
						}
					}
				case 2:
					i := r.IntN(soakCards)
					var res *pb.DescribeToolResponse
					res, err = e.disc.DescribeTool(ctx, &pb.DescribeToolRequest{Caller: pc, Name: fmt.Sprintf("tool_%d", i)})
					if status.Code(err) == codes.NotFound {
						err = nil
					} else if err == nil {
						check(c, "DescribeTool", res.GetCard().GetName())
					}
				case 3:
					i := r.IntN(soakCards)
					var res *pb.AuthorizeCallResponse
					res, err = e.disc.AuthorizeCall(ctx, &pb.AuthorizeCallRequest{Caller: pc, Name: fmt.Sprintf("tool_%d", i), ArgumentsJson: `{"id":"x"}`})
					if err == nil && res.GetAllowed() {
						check(c, "AuthorizeCall", res.GetTool().GetName())
					}
				}
				if err != nil && ctx.Err() == nil {
					violate("%v: %v", c, err)
				}
			}
		}()
	}
	wg.Wait()
	t.Logf("soak: %d reads, %d writes", min(ops.Load(), maxOps), writes.Load())
	for _, v := range violations {
		t.Error(v)
	}
	if writes.Load() < 10 || ops.Load() < 100 {
		t.Errorf("soak too small to mean anything: %d reads, %d writes", ops.Load(), writes.Load())
	}
}
