package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/seed0cff8200/cardex/cards"
	"github.com/seed0cff8200/cardex/internal/access/audittrail"
	"github.com/seed0cff8200/cardex/internal/access/auth"
	"github.com/seed0cff8200/cardex/internal/codec/apiconv"
	pb "github.com/seed0cff8200/cardex/proto/cardex/v1"
	"github.com/seed0cff8200/cardex/retriever"
)

// MaxBatch bounds PutCards and PutServers.
const MaxBatch = 1000

type catalog struct {
	pb.UnimplementedCatalogServiceServer
	store cards.Store
	ret   *retriever.Retriever
	trail *audittrail.Trail
	log   *slog.Logger
}

// refresh brings the retriever's view up to date after a write, so a card
// put through this server is discoverable as soon as the call returns.
func (s *catalog) refresh(ctx context.Context) {
	if err := s.ret.Sync(context.WithoutCancel(ctx)); err != nil {
		s.log.Error("retriever sync after write failed; the periodic sync will retry", "err", err)
	}
}

func (s *catalog) PutCards(ctx context.Context, req *pb.PutCardsRequest) (*pb.PutCardsResponse, error) {
	res, err := put(ctx, s, "PutCards", batchNames{field: "cards", plural: "cards", counted: "cards"},
		req.GetCards(), apiconv.CardFromProto, s.store.Put)
	if err != nil {
		return nil, err
	}
	out := &pb.PutCardsResponse{}
	for _, r := range res {
		out.Results = append(out.Results, &pb.PutResult{Tenant: r.Key.Tenant, Server: r.Key.Server, Name: r.Key.Name, Version: r.Version, Outcome: string(r.Outcome),
			SearchExamplesKept: r.ExamplesKept})
	}
	return out, nil
}

// batchNames name a put RPC's batch in its messages: the request field,
// what it holds, and the word its count is given in.
type batchNames struct{ field, plural, counted string }

// put is PutCards and PutServers: the batch's bounds (InvalidArgument),
// one atomic store write, the retriever refreshed and every entry audited;
// a failed batch writes nothing and is audited as failed.
func put[P, T any](ctx context.Context, s *catalog, method string, names batchNames, in []P, conv func(P) T,
	write func(context.Context, []T) ([]cards.PutResult, error)) ([]cards.PutResult, error) {
	n := len(in)
	if n == 0 {
		return nil, toStatus(s.log, method, cards.Invalid(names.field, "is empty; send 1 to %d %s", MaxBatch, names.plural))
	}
	if n > MaxBatch {
		return nil, toStatus(s.log, method, cards.Invalid(names.field, "has %d %s; the limit is %d per request", n, names.counted, MaxBatch))
	}
	batch := make([]T, n)
	for i, p := range in {
		batch[i] = conv(p)
	}
	res, err := write(ctx, batch)
	if err != nil {
		err = toStatus(s.log, method, err)
		s.audit(ctx, audittrail.Entry{Method: method, Outcome: "failed",
			Detail: fmt.Sprintf("%d %s, nothing written: %v", n, names.plural, err)})
		return nil, err
	}
	s.refresh(ctx)
	s.audit(ctx, writeEntries(method, res)...)
	return res, nil
}

func keyFrom(tenant, server, name string) (cards.Key, error) {
	for _, f := range []struct{ field, v string }{{"tenant", tenant}, {"server", server}, {"name", name}} {
		if f.v == "" {
			return cards.Key{}, cards.Invalid(f.field, "is required")
		}
		if !cards.ValidName(f.v) {
			return cards.Key{}, cards.Invalid(f.field, "must match [A-Za-z0-9_.-]{1,%d}", cards.MaxNameLen)
		}
	}
	return cards.Key{Tenant: tenant, Server: server, Name: name}, nil
}

func (s *catalog) GetCard(ctx context.Context, req *pb.GetCardRequest) (*pb.GetCardResponse, error) {
	k, err := keyFrom(req.GetTenant(), req.GetServer(), req.GetName())
	if err != nil {
		return nil, toStatus(s.log, "GetCard", err)
	}
	c, err := s.store.Get(ctx, k)
	if err != nil {
		if errors.Is(err, cards.ErrNotFound) {
			err = fmt.Errorf("card %s/%s: %w", k.Server, k.Name, cards.ErrNotFound)
		}
		return nil, toStatus(s.log, "GetCard", err)
	}
	return &pb.GetCardResponse{Card: apiconv.CardToProto(&c, true)}, nil
}

func (s *catalog) ListCards(ctx context.Context, req *pb.ListCardsRequest) (*pb.ListCardsResponse, error) {
	q := cards.ListQuery{Tenant: req.GetTenant(), Server: req.GetServer(), Limit: int(req.GetPageSize()), Cursor: req.GetCursor()}
	if q.Tenant == "" {
		return nil, toStatus(s.log, "ListCards", cards.Invalid("tenant", "is required"))
	}
	if q.Limit < 0 || q.Limit > cards.MaxPageSize {
		return nil, toStatus(s.log, "ListCards", cards.Invalid("page_size", "is %d; it must be between 1 and %d (default %d)", q.Limit, cards.MaxPageSize, cards.DefaultPageSize))
	}
	for i, st := range req.GetStatus() {
		switch cards.Status(st) {
		case cards.StatusActive, cards.StatusPending, cards.StatusRevoked:
			q.Status = append(q.Status, cards.Status(st))
		default:
			return nil, toStatus(s.log, "ListCards", cards.Invalid(fmt.Sprintf("status[%d]", i), "%q is not one of active, pending, revoked", st))
		}
	}
	page, err := s.store.List(ctx, q)
	if err != nil {
		return nil, toStatus(s.log, "ListCards", err)
	}
	out := &pb.ListCardsResponse{NextCursor: page.NextCursor}
	for i := range page.Cards {
		out.Cards = append(out.Cards, apiconv.CardToProto(&page.Cards[i], req.GetIncludeSchemas()))
	}
	return out, nil
}

func (s *catalog) DeleteCard(ctx context.Context, req *pb.DeleteCardRequest) (*pb.DeleteCardResponse, error) {
	k, err := keyFrom(req.GetTenant(), req.GetServer(), req.GetName())
	if err != nil {
		return nil, toStatus(s.log, "DeleteCard", err)
	}
	if req.GetExpectedVersion() < 0 {
		return nil, toStatus(s.log, "DeleteCard", cards.Invalid("expected_version", "must be 0 (no check) or the current version"))
	}
	// The version deleted, for the audit trail: the expected one when the
	// call names it (the delete checks it), else the one read just before.
	before := req.GetExpectedVersion()
	if before == 0 {
		if c, err := s.store.Get(ctx, k); err == nil {
			before = c.Version
		}
	}
	entry := audittrail.Entry{Method: "DeleteCard", Tenant: k.Tenant, Server: k.Server, Name: k.Name, BeforeVersion: before}
	if err := s.store.Delete(ctx, k, req.GetExpectedVersion()); err != nil {
		err = toStatus(s.log, "DeleteCard", err)
		entry.Outcome, entry.Detail = "failed", err.Error()
		s.audit(ctx, entry)
		return nil, err
	}
	entry.Outcome = "deleted"
	s.audit(ctx, entry)
	s.refresh(ctx)
	return &pb.DeleteCardResponse{}, nil
}

// writeEntries are the audit entries of a batch written by method, with
// each one's version before and after.
func writeEntries(method string, res []cards.PutResult) []audittrail.Entry {
	entries := make([]audittrail.Entry, len(res))
	for i, r := range res {
		before := r.Version - 1 // an update is the next version
		switch r.Outcome {
		case cards.Created:
			before = 0
		case cards.Unchanged:
			before = r.Version
		}
		entries[i] = audittrail.Entry{Method: method, Tenant: r.Key.Tenant, Server: r.Key.Server, Name: r.Key.Name,
			Outcome: string(r.Outcome), BeforeVersion: before, AfterVersion: r.Version}
	}
	return entries
}

// audit appends catalogue writes to the trail with the call's principal.
func (s *catalog) audit(ctx context.Context, es ...audittrail.Entry) {
	if s.trail == nil {
		return
	}
	p, _ := auth.FromContext(ctx)
	for i := range es {
		es[i].Type, es[i].Principal = audittrail.TypeCatalogWrite, p.Name
	}
	if err := s.trail.Append("", es...); err != nil {
		s.log.Error("audit trail append failed", "err", err)
	}
}
