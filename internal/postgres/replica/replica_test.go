package replica_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/seed0cff8200/cardex/cards"
	"github.com/seed0cff8200/cardex/cards/postgres"
	"github.com/seed0cff8200/cardex/embed"
	"github.com/seed0cff8200/cardex/internal/faces/server"
	"github.com/seed0cff8200/cardex/internal/postgres/pgvec"
	"github.com/seed0cff8200/cardex/internal/postgres/replica"
	"github.com/seed0cff8200/cardex/internal/testkit/pgtest"
	pb "github.com/seed0cff8200/cardex/proto/cardex/v1"
	"github.com/seed0cff8200/cardex/retriever"
)

// node is one cardex replica: a retriever with the pgvector semantic leg,
// the gRPC server on loopback and a follower, over its own connection pool.
type node struct {
	store *postgres.Store
	ret   *retriever.Retriever
	disc  pb.DiscoveryServiceClient
	cat   pb.CatalogServiceClient
}

func startNode(t *testing.T, store *postgres.Store, listen bool) *node {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	emb := embed.NewHashed(embed.DefaultDim)
	ret, err := retriever.New(ctx, store, emb, nil, retriever.WithVectors(pgvec.New(store, emb.Model(), emb.Dim())))
	if err != nil {
		t.Fatalf("retriever.New: %v", err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs, _ := server.New(server.Config{Store: store, Retriever: ret})
	go func() { _ = gs.Serve(lis) }()
	done := make(chan struct{})
	go func() {
		defer close(done)
		(&replica.Follower{Store: store, View: ret, Poll: 100 * time.Millisecond, NoListen: !listen}).Run(ctx)
	}()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		<-done
		_ = conn.Close()
		gs.Stop()
		_ = ret.Close()
	})
	return &node{store: store, ret: ret, disc: pb.NewDiscoveryServiceClient(conn), cat: pb.NewCatalogServiceClient(conn)}
}

func rpcCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func card(name, summary string) *pb.Card {
	return &pb.Card{Tenant: "acme", Server: "ops", Name: name, Summary: summary, Kind: "mcp_tool"}
}

func (n *node) put(t *testing.T, cs ...*pb.Card) {
	t.Helper()
	if _, err := n.cat.PutCards(rpcCtx(t), &pb.PutCardsRequest{Cards: cs}); err != nil {
		t.Fatalf("PutCards: %v", err)
	}
}

// discover returns the names found and whether the answer was degraded.
func (n *node) discover(t *testing.T, query string) ([]string, bool) {
	t.Helper()
	res, err := n.disc.DiscoverTools(rpcCtx(t), &pb.DiscoverToolsRequest{
		Caller: &pb.Caller{Tenant: "acme", Scopes: []string{"*"}}, Query: query, TopK: 10})
	if err != nil {
		t.Fatalf("DiscoverTools: %v", err)
	}
	var names []string
	for _, tl := range res.GetTools() {
		names = append(names, tl.GetCard().GetName())
	}
	return names, res.GetDegraded()
}

// waitFor polls until cond holds, and returns how long that took.
func waitFor(t *testing.T, limit time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > limit {
			t.Fatalf("%s: not within %s", what, limit)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return time.Since(start)
}

// TestTwoReplicas: two servers on one database. A card put through one is
// discoverable through the other within a second, a deleted card
// disappears from both, and a replica cut off from the database catches up
// when it is back. (On PGlite, which does not carry notifications across
// connections, this exercises the change-sequence check.)
func TestTwoReplicas(t *testing.T) {
	url := pgtest.URL(t)
	schema := pgtest.NewSchemaName()
	storeA := pgtest.Open(t, pgtest.Options{URL: url, Schema: schema})
	proxy, proxied := pgtest.NewProxy(t, url)
	storeB := pgtest.Open(t, pgtest.Options{URL: proxied, Schema: schema, NoMigrate: true, KeepSchema: true})
	a, b := startNode(t, storeA, true), startNode(t, storeB, true)

	a.put(t, card("restart_service", "Restart a service on a host"), card("tail_logs", "Show the latest log lines of a service"))
	var worst time.Duration
	for _, n := range []*node{a, b} {
		d := waitFor(t, time.Second, "cards put through A discoverable through B", func() bool {
			names, _ := n.discover(t, "restart the payment service")
			return slices.Contains(names, "restart_service")
		})
		worst = max(worst, d)
	}
	t.Logf("put through A, discoverable through B after %s", worst.Round(time.Millisecond))

	// Delete through B: gone from both.
	if _, err := b.cat.DeleteCard(rpcCtx(t), &pb.DeleteCardRequest{Tenant: "acme", Server: "ops", Name: "tail_logs"}); err != nil {
		t.Fatal(err)
	}
	for name, n := range map[string]*node{"A": a, "B": b} {
		d := waitFor(t, time.Second, "deleted card gone from "+name, func() bool {
			names, _ := n.discover(t, "show the latest log lines")
			return !slices.Contains(names, "tail_logs")
		})
		t.Logf("deleted through B, gone from %s after %s", name, d.Round(time.Millisecond))
	}

	// B loses the database; A goes on writing; B still answers (from its
	// lexical index, degraded) and catches up when the database is back.
	proxy.Cut()
	a.put(t, card("scale_deployment", "Scale a deployment to more replicas"))
	if _, err := a.cat.DeleteCard(rpcCtx(t), &pb.DeleteCardRequest{Tenant: "acme", Server: "ops", Name: "restart_service"}); err != nil {
		t.Fatal(err)
	}
	names, degraded := b.discover(t, "restart the payment service")
	if !degraded || !slices.Contains(names, "restart_service") {
		t.Errorf("cut-off B: %v degraded=%v; want its last view (restart_service), degraded", names, degraded)
	}
	proxy.Restore()
	d := waitFor(t, 10*time.Second, "B catches up after reconnecting", func() bool {
		names, degraded := b.discover(t, "scale a deployment")
		return !degraded && slices.Contains(names, "scale_deployment") && !slices.Contains(names, "restart_service")
	})
	t.Logf("B caught up %s after the database came back", d.Round(time.Millisecond))
	if sa, sb := a.ret.Seq(), b.ret.Seq(); sa != sb {
		t.Errorf("sequences differ: A %d, B %d", sa, sb)
	}
}

// TestDatabaseOutage: with the database unreachable, writes fail with
// Unavailable and write nothing, discovery answers from the lexical index
// flagged degraded, and both recover by themselves when it is back.
func TestDatabaseOutage(t *testing.T) {
	url := pgtest.URL(t)
	schema := pgtest.NewSchemaName()
	direct := pgtest.Open(t, pgtest.Options{URL: url, Schema: schema})
	proxy, proxied := pgtest.NewProxy(t, url)
	store := pgtest.Open(t, pgtest.Options{URL: proxied, Schema: schema, NoMigrate: true, KeepSchema: true})
	n := startNode(t, store, true)
	n.put(t, card("restart_service", "Restart a service on a host"), card("tail_logs", "Show the latest log lines of a service"))
	if names, degraded := n.discover(t, "restart a service"); degraded || len(names) == 0 || names[0] != "restart_service" {
		t.Fatalf("before the outage: %v degraded=%v", names, degraded)
	}
	seq0, err := direct.Seq(t.Context())
	if err != nil {
		t.Fatal(err)
	}

	proxy.Cut()
	start := time.Now()
	_, err = n.cat.PutCards(rpcCtx(t), &pb.PutCardsRequest{Cards: []*pb.Card{card("new_one", "A new tool"), card("tail_logs", "changed")}})
	if status.Code(err) != codes.Unavailable {
		t.Errorf("PutCards during the outage: %v, want Unavailable", err)
	}
	_, err = n.cat.DeleteCard(rpcCtx(t), &pb.DeleteCardRequest{Tenant: "acme", Server: "ops", Name: "tail_logs"})
	if status.Code(err) != codes.Unavailable {
		t.Errorf("DeleteCard during the outage: %v, want Unavailable", err)
	}
	names, degraded := n.discover(t, "restart a service")
	if !degraded || len(names) == 0 || names[0] != "restart_service" {
		t.Errorf("discovery during the outage: %v degraded=%v; want restart_service from the lexical index, degraded", names, degraded)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("the outage calls took %s", d)
	}
	// Nothing was half written.
	if seq, err := direct.Seq(t.Context()); err != nil || seq != seq0 {
		t.Errorf("Seq after failed writes = %d, %v; want %d", seq, err, seq0)
	}
	if _, err := direct.Get(t.Context(), cards.Key{Tenant: "acme", Server: "ops", Name: "new_one"}); !errors.Is(err, cards.ErrNotFound) {
		t.Errorf("new_one after a failed put: %v", err)
	}

	proxy.Restore()
	d := waitFor(t, 10*time.Second, "discovery no longer degraded", func() bool {
		_, degraded := n.discover(t, "restart a service")
		return !degraded
	})
	t.Logf("recovered %s after the database came back", d.Round(time.Millisecond))
	n.put(t, card("new_one", "A new tool"))
	if names, _ := n.discover(t, "a new tool"); !slices.Contains(names, "new_one") {
		t.Errorf("after recovery: %v, want new_one", names)
	}
}

// TestListenNotify (native PostgreSQL, real sessions): with the sequence
// check slowed to a minute, a write through one store reaches the other
// replica's view through LISTEN/NOTIFY alone, well within a second.
func TestListenNotify(t *testing.T) {
	url := pgtest.NativeURL(t)
	schema := pgtest.NewSchemaName()
	writer := pgtest.Open(t, pgtest.Options{URL: url, Schema: schema, MigrateTo: 1})
	reader := pgtest.Open(t, pgtest.Options{URL: url, Schema: schema, NoMigrate: true, KeepSchema: true})
	// Native PostgreSQL here has no pgvector: vectors stay in memory.
	ret, err := retriever.New(t.Context(), pgtest.WithoutVectors(reader), embed.NewHashed(embed.DefaultDim), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ret.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); (&replica.Follower{Store: reader, View: ret, Poll: time.Minute}).Run(ctx) }()
	defer func() { cancel(); <-done }()
	time.Sleep(300 * time.Millisecond) // let the listener connect

	for i := range 3 {
		name := fmt.Sprintf("tool_%d", i)
		if _, err := writer.Put(t.Context(), []cards.Card{{Tenant: "acme", Server: "ops", Name: name, Summary: "A tool"}}); err != nil {
			t.Fatal(err)
		}
		want, _ := writer.Seq(t.Context())
		d := waitFor(t, time.Second, "notification reaches the other replica", func() bool { return ret.Seq() == want })
		t.Logf("write %d seen through LISTEN/NOTIFY after %s", i, d.Round(time.Microsecond))
	}
	if err := writer.Delete(t.Context(), cards.Key{Tenant: "acme", Server: "ops", Name: "tool_0"}, 0); err != nil {
		t.Fatal(err)
	}
	want, _ := writer.Seq(t.Context())
	waitFor(t, time.Second, "deletion notified", func() bool { return ret.Seq() == want && ret.Len() == 2 })

	// A learned phrasing and a server entry are notified the same way.
	k := cards.Key{Tenant: "acme", Server: "ops", Name: "tool_1"}
	if _, err := writer.AddLearned(t.Context(), k, "bounce the web tier"); err != nil {
		t.Fatal(err)
	}
	want, _ = writer.Seq(t.Context())
	waitFor(t, time.Second, "learned phrasing notified", func() bool {
		return ret.Seq() == want && slices.Equal(ret.Learned()[k], []string{"bounce the web tier"})
	})
	if _, err := writer.PutServers(t.Context(), []cards.ServerInfo{{Tenant: "acme", Name: "ops", Title: "Operations"}}); err != nil {
		t.Fatal(err)
	}
	want, _ = writer.Seq(t.Context())
	waitFor(t, time.Second, "server entry notified", func() bool { return ret.Seq() == want })
}

// TestReplicasShareLearning: two replicas on one database (PGlite, real
// pgvector). After one learns a phrasing from use, the other replica has
// it too and both answer the same query with the same ranking, scores
// included; a replica started afterwards has it from the start; deleting
// the card removes it everywhere.
func TestReplicasShareLearning(t *testing.T) {
	url := pgtest.URL(t)
	schema := pgtest.NewSchemaName()
	storeA := pgtest.Open(t, pgtest.Options{URL: url, Schema: schema})
	storeB := pgtest.Open(t, pgtest.Options{URL: url, Schema: schema, NoMigrate: true, KeepSchema: true})
	a, b := startNode(t, storeA, false), startNode(t, storeB, false)
	a.put(t, card("restart_service", "Restart a service on a host"), card("tail_logs", "Show the latest log lines of a service"),
		card("scale_deployment", "Scale a deployment to more replicas"))
	want, _ := storeA.Seq(t.Context())
	for _, n := range []*node{a, b} {
		waitFor(t, 5*time.Second, "cards in both views", func() bool { return n.ret.Seq() == want })
	}
	const q = "the checkout pods keep crashing, kick them"
	before := rankings(t, a, q)
	if len(before) > 0 && strings.HasPrefix(before[0], "restart_service ") {
		t.Fatalf("precondition: restart_service already first for %q: %v", q, before)
	}

	k := cards.Key{Tenant: "acme", Server: "ops", Name: "restart_service"}
	if changed, err := a.ret.Learn(t.Context(), k, "the checkout pods keep crashing, kick them"); err != nil || !changed {
		t.Fatalf("Learn through A = %v, %v", changed, err)
	}
	want, _ = storeA.Seq(t.Context())
	d := waitFor(t, 5*time.Second, "B has A's learned phrasing", func() bool {
		return b.ret.Seq() == want && slices.Equal(b.ret.Learned()[k], []string{q})
	})
	t.Logf("learned through A, in B's view after %s", d.Round(time.Millisecond))
	ra, rb := rankings(t, a, q), rankings(t, b, q)
	if !slices.Equal(ra, rb) {
		t.Errorf("the replicas rank differently after A learned:\n A %v\n B %v", ra, rb)
	}
	if len(ra) == 0 || !strings.HasPrefix(ra[0], "restart_service ") {
		t.Errorf("after learning, %q ranks %v; want restart_service first", q, ra)
	}
	// A replica that starts now has the phrasing from the start.
	c := startNode(t, pgtest.Open(t, pgtest.Options{URL: url, Schema: schema, NoMigrate: true, KeepSchema: true}), false)
	if rc := rankings(t, c, q); !slices.Equal(rc, ra) {
		t.Errorf("a new replica ranks %v, A ranks %v", rc, ra)
	}

	// Deleting the card through B takes its phrasings everywhere.
	if _, err := b.cat.DeleteCard(rpcCtx(t), &pb.DeleteCardRequest{Tenant: "acme", Server: "ops", Name: "restart_service"}); err != nil {
		t.Fatal(err)
	}
	a.put(t, card("restart_service", "Restart a service on a host"))
	want, _ = storeA.Seq(t.Context())
	for name, n := range map[string]*node{"A": a, "B": b, "C": c} {
		waitFor(t, 5*time.Second, "re-created card in "+name, func() bool { return n.ret.Seq() == want })
		if l := n.ret.Learned()[k]; len(l) != 0 {
			t.Errorf("%s: a deleted and re-created card kept its phrasings %q", name, l)
		}
	}
	if ra, rb := rankings(t, a, q), rankings(t, b, q); !slices.Equal(ra, rb) || !slices.Equal(ra, before) {
		t.Errorf("after the delete: A %v, B %v; want both as before learning %v", ra, rb, before)
	}
}

// rankings is a discovery's answer as "name fused-score" lines.
func rankings(t *testing.T, n *node, query string) []string {
	t.Helper()
	res, err := n.disc.DiscoverTools(rpcCtx(t), &pb.DiscoverToolsRequest{
		Caller: &pb.Caller{Tenant: "acme", Scopes: []string{"*"}}, Query: query, TopK: 10})
	if err != nil {
		t.Fatalf("DiscoverTools: %v", err)
	}
	var out []string
	for _, tl := range res.GetTools() {
		out = append(out, fmt.Sprintf("%s %.6f", tl.GetCard().GetName(), tl.GetScores().GetFused()))
	}
	return out
}

// TestDatabaseStopped stops a real PostgreSQL (a private native server;
// no pgvector, so vectors stay in memory and this is about the store and
// the follower): writes fail with Unavailable while it is down, discovery
// keeps answering, and after it starts again writes work and a write by
// another replica reaches this one, without restarting anything.
func TestDatabaseStopped(t *testing.T) {
	db := pgtest.StartNative(t)
	schema := pgtest.NewSchemaName()
	mine := pgtest.Open(t, pgtest.Options{URL: db.URL, Schema: schema, MigrateTo: 1})
	other := pgtest.Open(t, pgtest.Options{URL: db.URL, Schema: schema, NoMigrate: true, KeepSchema: true})
	ret, err := retriever.New(t.Context(), pgtest.WithoutVectors(mine), embed.NewHashed(embed.DefaultDim), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ret.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		(&replica.Follower{Store: mine, View: ret, Poll: 100 * time.Millisecond}).Run(ctx)
	}()
	defer func() { cancel(); <-done }()
	put := func(s *postgres.Store, name string) error {
		_, err := s.Put(t.Context(), []cards.Card{{Tenant: "acme", Server: "ops", Name: name, Summary: "Restart a service " + name}})
		return err
	}
	if err := put(mine, "before"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, time.Second, "own write in the view", func() bool { return ret.Len() == 1 })

	db.Stop()
	if err := put(mine, "during"); !errors.Is(err, cards.ErrUnavailable) {
		t.Errorf("Put with the database stopped = %v, want ErrUnavailable", err)
	}
	if err := mine.Delete(t.Context(), cards.Key{Tenant: "acme", Server: "ops", Name: "before"}, 0); !errors.Is(err, cards.ErrUnavailable) {
		t.Errorf("Delete with the database stopped = %v, want ErrUnavailable", err)
	}
	res, err := ret.Discover(t.Context(), retriever.Request{Caller: retriever.Caller{Tenant: "acme", Scopes: []string{"*"}}, Query: "restart a service"})
	if err != nil || len(res.Tools) != 1 {
		t.Errorf("Discover with the database stopped = %d tools, %v; want the card from memory", len(res.Tools), err)
	}

	db.Start()
	d := waitFor(t, 10*time.Second, "writes work again", func() bool { return put(mine, "after") == nil })
	t.Logf("writes work %s after the database started again", d.Round(time.Millisecond))
	if err := put(other, "from_other"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 2*time.Second, "the other replica's write reaches this one", func() bool { return ret.Len() == 3 })
	if _, err := mine.Get(t.Context(), cards.Key{Tenant: "acme", Server: "ops", Name: "during"}); !errors.Is(err, cards.ErrNotFound) {
		t.Errorf("the put that failed during the outage: %v, want ErrNotFound", err)
	}
}

// TestPGliteStopped stops the database for real: a private PGlite (real
// pgvector), stopped and started again on the same data. While it is down,
// writes fail with Unavailable and discovery answers from the lexical index
// flagged degraded; once it is back both recover by themselves.
func TestPGliteStopped(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a PGlite of its own: not in -short")
	}
	db := pgtest.StartPGlite(t)
	store := pgtest.Open(t, pgtest.Options{URL: db.URL})
	n := startNode(t, store, false)
	n.put(t, card("restart_service", "Restart a service on a host"), card("tail_logs", "Show the latest log lines of a service"))
	if names, degraded := n.discover(t, "restart a service"); degraded || len(names) == 0 || names[0] != "restart_service" {
		t.Fatalf("before the stop: %v degraded=%v", names, degraded)
	}

	db.Stop()
	_, err := n.cat.PutCards(rpcCtx(t), &pb.PutCardsRequest{Cards: []*pb.Card{card("new_one", "A new tool")}})
	if status.Code(err) != codes.Unavailable {
		t.Errorf("PutCards with the database stopped: %v, want Unavailable", err)
	}
	names, degraded := n.discover(t, "restart a service")
	if !degraded || len(names) == 0 || names[0] != "restart_service" {
		t.Errorf("discovery with the database stopped: %v degraded=%v; want restart_service, degraded", names, degraded)
	}

	start := time.Now()
	db.Start()
	t.Logf("PGlite restarted in %s", time.Since(start).Round(time.Millisecond))
	d := waitFor(t, 30*time.Second, "discovery no longer degraded", func() bool {
		_, degraded := n.discover(t, "restart a service")
		return !degraded
	})
	t.Logf("discovery recovered %s after the database was back", d.Round(time.Millisecond))
	n.put(t, card("new_one", "A new tool"))
	if names, _ := n.discover(t, "a new tool"); !slices.Contains(names, "new_one") {
		t.Errorf("after the restart: %v, want new_one", names)
	}
}
