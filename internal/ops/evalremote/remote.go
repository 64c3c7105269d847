// Package evalremote runs an evaluation against a running cardex server
// over gRPC: the cards are registered with CatalogService.PutCards and the
// queries asked with DiscoveryService.DiscoverTools, marked as an
// evaluation's (the server keeps them out of its discovery and feedback
// logs; it takes that mark from an admin credential only). Calls refused by
// the server's rate limits are made again after the delay it asks for.
package evalremote

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/seed0cff8200/cardex/eval"
	"github.com/seed0cff8200/cardex/internal/codec/apiconv"
	"github.com/seed0cff8200/cardex/internal/ops/ratewait"
	pb "github.com/seed0cff8200/cardex/proto/cardex/v1"
	"github.com/seed0cff8200/cardex/retriever"
)

// Remote is an eval.Backend backed by a cardex server. The API has no mode
// switch, so it runs the server's default (hybrid) pipeline only.
type Remote struct {
	addr    string
	token   string
	timeout time.Duration
	conn    *grpc.ClientConn
	disc    pb.DiscoveryServiceClient
	cat     pb.CatalogServiceClient
	// Removed counts the stale cards Register deleted from the tenant.
	Removed int
	// Waits counts the rate-limit refusals waited out.
	Waits ratewait.Waits
}

var _ eval.Backend = (*Remote)(nil)

// Options are Dial's.
type Options struct {
	// Token is sent with every call: a credential of role admin (it
	// registers cards and discovers, marked as an evaluation), when the
	// server asks for one.
	Token string
	// Timeout bounds each call, waits for rate limits included (default
	// 30 s).
	Timeout time.Duration
	// Creds are the transport credentials (nil: plaintext).
	Creds credentials.TransportCredentials
	// Interceptors run around every call, outermost first, outside the
	// wait for rate limits.
	Interceptors []grpc.UnaryClientInterceptor
}

// Dial connects to addr.
func Dial(addr string, o Options) (*Remote, error) {
	if o.Creds == nil {
		o.Creds = insecure.NewCredentials()
	}
	if o.Timeout <= 0 {
		o.Timeout = 30 * time.Second
	}
	r := &Remote{addr: addr, token: o.Token, timeout: o.Timeout}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(o.Creds),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20), grpc.MaxCallSendMsgSize(64<<20)),
		grpc.WithChainUnaryInterceptor(append(o.Interceptors, ratewait.Interceptor(&r.Waits))...))
	if err != nil {
		return nil, err
	}
	r.conn, r.disc, r.cat = conn, pb.NewDiscoveryServiceClient(conn), pb.NewCatalogServiceClient(conn)
	return r, nil
}

// Describe implements eval.Backend.
func (r *Remote) Describe() string {
	return "server at " + r.addr + " over gRPC (its own configuration; the API has no mode switch, so hybrid only)"
}

// Modes implements eval.Backend: hybrid only.
func (r *Remote) Modes() []retriever.Mode { return []retriever.Mode{retriever.ModeHybrid} }

func (r *Remote) callCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	if r.token != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+r.token)
	}
	return ctx, cancel
}

// putBatch is the number of cards per PutCards call (the server takes at
// most 1,000).
const putBatch = 500

// Register implements eval.Backend: it puts the catalogue's cards into its
// tenant and deletes every other card of that tenant, so the tenant holds
// exactly the dataset.
func (r *Remote) Register(ctx context.Context, cat *eval.Catalog) error {
	keep := make(map[[2]string]bool, len(cat.Cards))
	for i := 0; i < len(cat.Cards); i += putBatch {
		req := &pb.PutCardsRequest{}
		for _, c := range cat.Cards[i:min(i+putBatch, len(cat.Cards))] {
			req.Cards = append(req.Cards, apiconv.CardToProto(&c, true))
			keep[[2]string{c.Server, c.Name}] = true
		}
		cctx, cancel := r.callCtx(ctx)
		_, err := r.cat.PutCards(cctx, req)
		cancel()
		if err != nil {
			return fmt.Errorf("PutCards (cards %d–%d): %w", i+1, min(i+putBatch, len(cat.Cards)), err)
		}
	}
	var stale [][2]string
	cursor := ""
	for {
		cctx, cancel := r.callCtx(ctx)
		page, err := r.cat.ListCards(cctx, &pb.ListCardsRequest{Tenant: cat.Tenant, PageSize: 100, Cursor: cursor})
		cancel()
		if err != nil {
			return fmt.Errorf("ListCards: %w", err)
		}
		for _, c := range page.Cards {
			if k := [2]string{c.Server, c.Name}; !keep[k] {
				stale = append(stale, k)
			}
		}
		if cursor = page.NextCursor; cursor == "" {
			break
		}
	}
	for _, k := range stale {
		cctx, cancel := r.callCtx(ctx)
		_, err := r.cat.DeleteCard(cctx, &pb.DeleteCardRequest{Tenant: cat.Tenant, Server: k[0], Name: k[1]})
		cancel()
		if err != nil {
			return fmt.Errorf("DeleteCard %s/%s: %w", k[0], k[1], err)
		}
	}
	r.Removed = len(stale)
	return nil
}

// Discover implements eval.Backend.
func (r *Remote) Discover(ctx context.Context, s eval.Search) ([]eval.Found, error) {
	req := &pb.DiscoverToolsRequest{
		Caller:  &pb.Caller{Tenant: s.Tenant, Subject: "eval"},
		Query:   s.Query,
		Intents: s.Intents,
		TopK:    int32(s.TopK),
		Fusion:  s.Fusion,
		// Kept out of the server's discovery and feedback logs.
		Evaluation: true,
	}
	if s.AlphaSet {
		alpha := s.Alpha
		req.Alpha = &alpha
	}
	cctx, cancel := r.callCtx(ctx)
	defer cancel()
	resp, err := r.disc.DiscoverTools(cctx, req)
	if err != nil {
		return nil, err
	}
	out := make([]eval.Found, 0, len(resp.Tools))
	for _, t := range resp.Tools {
		f := eval.Found{Key: [2]string{t.GetCard().GetServer(), t.GetCard().GetName()}}
		for _, a := range t.GetAlternatives() {
			f.Alternatives = append(f.Alternatives, [2]string{a.GetServer(), a.GetName()})
		}
		out = append(out, f)
	}
	return out, nil
}

// Close implements eval.Backend.
func (r *Remote) Close() error { return r.conn.Close() }
