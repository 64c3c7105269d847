package evalremote

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/seed0cff8200/cardex/cards"
	"github.com/seed0cff8200/cardex/cards/embedded"
	"github.com/seed0cff8200/cardex/embed"
	"github.com/seed0cff8200/cardex/eval"
	"github.com/seed0cff8200/cardex/internal/faces/server"
	"github.com/seed0cff8200/cardex/retriever"
)

// TestRemoteMatchesInProcess runs the eval fixture against a real gRPC
// server on loopback (with a catalog token) and checks that it measures
// exactly what the in-process hybrid run measures, and that registering
// removes the tenant's stale cards.
func TestRemoteMatchesInProcess(t *testing.T) {
	ctx := context.Background()
	store, err := embedded.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	// A stale card from an earlier run, and another tenant's card that
	// must survive.
	if _, err := store.Put(ctx, []cards.Card{
		{Tenant: "eval-tiny", Server: "old", Name: "gone", Summary: "weather forecast leftovers"},
		{Tenant: "other", Server: "keep", Name: "me", Summary: "weather forecast of another tenant"},
	}); err != nil {
		t.Fatal(err)
	}
	ret, err := retriever.New(ctx, store, embed.MustBuiltin(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ret.Close()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs, _ := server.New(server.Config{Store: store, Retriever: ret, CatalogToken: "s3cret"})
	go gs.Serve(lis)
	defer gs.Stop()

	d, err := eval.Load("../../../eval/testdata/tiny")
	if err != nil {
		t.Fatal(err)
	}
	if bad, err := Dial(lis.Addr().String(), Options{Token: "wrong", Timeout: 5 * time.Second}); err != nil {
		t.Fatal(err)
	} else {
		if _, _, err := eval.Run(ctx, d, bad, eval.Options{}); err == nil {
			t.Error("a wrong catalog token was accepted")
		}
		bad.Close()
	}

	r, err := Dial(lis.Addr().String(), Options{Token: "s3cret", Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	rep, misses, err := eval.Run(ctx, d, r, eval.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Modes) != 1 || rep.Modes[0] != "hybrid" || r.Removed != 1 {
		t.Errorf("modes %v, removed %d; want [hybrid], 1", rep.Modes, r.Removed)
	}
	if _, err := store.Get(ctx, cards.Key{Tenant: "other", Server: "keep", Name: "me"}); err != nil {
		t.Errorf("another tenant's card: %v", err)
	}
	if _, _, err := eval.Run(ctx, d, r, eval.Options{Modes: []retriever.Mode{retriever.ModeLexical}}); err == nil {
		t.Error("the remote backend accepted the lexical mode")
	}

	local := eval.NewInProcess(nil)
	defer local.Close()
	lrep, lmisses, err := eval.Run(ctx, d, local, eval.Options{Modes: []retriever.Mode{retriever.ModeHybrid}})
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range rep.Subsets {
		if got, want := s.Modes[0].Metrics, lrep.Subsets[i].Modes[0].Metrics; got != want {
			t.Errorf("subset %s: remote %+v, in-process %+v", s.Name, got, want)
		}
	}
	if len(misses) != len(lmisses) {
		t.Errorf("remote %d misses, in-process %d", len(misses), len(lmisses))
	}
}
