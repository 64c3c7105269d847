// Package evalremote runs an evaluation against a running cardex server
// over gRPC: the cards are registered with CatalogService.PutCards and the
// queries asked with DiscoveryService.DiscoverTools.
package evalremote

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/seed0cff8200/cardex/eval"
	"github.com/seed0cff8200/cardex/internal/codec/apiconv"
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
}

var _ eval.Backend = (*Remote)(nil)

// Dial connects to addr. token, if set, is sent as the catalog token;
// timeout bounds each call.
func Dial(addr, token string, timeout time.Duration) (*Remote, error) {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20), grpc.MaxCallSendMsgSize(64<<20)))
	if err != nil {
		return nil, err
	}
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	return &Remote{addr: addr, token: token, timeout: timeout, conn: conn,
		disc: pb.NewDiscoveryServiceClient(conn), cat: pb.NewCatalogServiceClient(conn)}, nil
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
