package evalremote

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/seed0cff8200/cardex/cards/embedded"
	"github.com/seed0cff8200/cardex/embed"
	"github.com/seed0cff8200/cardex/eval"
	"github.com/seed0cff8200/cardex/internal/access/audittrail"
	"github.com/seed0cff8200/cardex/internal/access/auth"
	"github.com/seed0cff8200/cardex/internal/access/ratelimit"
	"github.com/seed0cff8200/cardex/internal/faces/server"
	"github.com/seed0cff8200/cardex/internal/telemetry/discoverylog"
	"github.com/seed0cff8200/cardex/internal/telemetry/feedback"
	pb "github.com/seed0cff8200/cardex/proto/cardex/v1"
	"github.com/seed0cff8200/cardex/retriever"
)

// logServer is a real gRPC server with a discovery log, a feedback log, an
// audit trail, service tokens (admin and discover) and tight rate limits.
type logServer struct {
	addr, dlog, fb, trail string
	dl                    *discoverylog.Log
}

// logged flushes the discovery log (its writer runs off the request path)
// and returns the file's size.
func (s logServer) logged(t *testing.T) int64 {
	t.Helper()
	if err := s.dl.Flush(); err != nil {
		t.Fatalf("flush discovery log: %v", err)
	}
	return size(t, s.dlog)
}

func startLogServer(t *testing.T, lim ratelimit.Config) logServer {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	s := logServer{dlog: filepath.Join(dir, "discoveries.jsonl"), fb: filepath.Join(dir, "feedback.jsonl"), trail: filepath.Join(dir, "audit.jsonl")}
	store, err := embedded.Open(filepath.Join(dir, "store"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	ret, err := retriever.New(ctx, store, embed.MustBuiltin(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ret.Close() })
	dl, err := discoverylog.Open(s.dlog, discoverylog.QueryRaw, []byte("eval-test-key"))
	if err != nil {
		t.Fatal(err)
	}
	s.dl = dl
	t.Cleanup(func() { dl.Close() })
	fb, err := feedback.New(ctx, feedback.Config{Path: s.fb, Hash: func(s string) string { return fmt.Sprint(len(s)) }, RawQueries: true, Learner: ret})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fb.Close() })
	tr, err := audittrail.Open(s.trail, []byte("eval-test-trail"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	toks := &auth.Tokens{}
	toks.AddToken("eval-admin", auth.RoleAdmin, "admin-secret")
	toks.AddToken("orchestrator", auth.RoleDiscover, "discover-secret")
	gs, _ := server.New(server.Config{Store: store, Retriever: ret, DiscoveryLog: dl, Feedback: fb, Trail: tr,
		Auth: &auth.Authenticator{Tokens: toks}, Limiter: ratelimit.New(lim)})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go gs.Serve(lis)
	t.Cleanup(gs.Stop)
	s.addr = lis.Addr().String()
	return s
}

func size(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if os.IsNotExist(err) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// trailEntries reads the audit trail's entries of a type.
func trailEntries(t *testing.T, path, typ string) []audittrail.Entry {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []audittrail.Entry
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var e audittrail.Entry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatal(err)
		}
		if e.Type == typ {
			out = append(out, e)
		}
	}
	return out
}

// TestEvaluationLeavesTheLogsAlone: an evaluation against a server with
// logs and tight rate limits finishes (the refusals are waited out) and
// writes nothing into the discovery or feedback log; the audit trail holds
// one entry per discovery, with the principal and no query. A discover
// credential may not mark its traffic so.
func TestEvaluationLeavesTheLogsAlone(t *testing.T) {
	ctx := context.Background()
	// 2 calls a second (discovery 4) for one caller, 2 in flight.
	s := startLogServer(t, ratelimit.Config{CallRate: 2, InFlight: 2})
	d, err := eval.Load("../../../eval/testdata/tiny")
	if err != nil {
		t.Fatal(err)
	}

	// An orchestrator's own traffic is logged, and it cannot hide it.
	conn, err := grpc.NewClient(s.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	disc := pb.NewDiscoveryServiceClient(conn)
	octx := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer discover-secret")
	req := &pb.DiscoverToolsRequest{Caller: &pb.Caller{Tenant: "acme", Subject: "bot"}, Query: "send an email"}
	if _, err := disc.DiscoverTools(octx, req); err != nil {
		t.Fatal(err)
	}
	logged := s.logged(t)
	if logged == 0 {
		t.Fatal("an ordinary discovery was not logged")
	}
	req.Evaluation = true
	_, err = disc.DiscoverTools(octx, req)
	if st := status.Convert(err); st.Code() != codes.PermissionDenied || !strings.Contains(st.Message(), "evaluation") || !strings.Contains(st.Message(), "role admin") {
		t.Errorf("a discover token marking its traffic: %v", err)
	}
	if s.logged(t) != logged {
		t.Error("the refused call was logged as a discovery")
	}
	if refused := trailEntries(t, s.trail, audittrail.TypeAuthentication); len(refused) != 1 || refused[0].Principal != "orchestrator" {
		t.Errorf("the refusal in the trail: %+v", refused)
	}

	fbSize := size(t, s.fb)
	r, err := Dial(s.addr, Options{Token: "admin-secret", Timeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	start := time.Now()
	rep, _, err := eval.Run(ctx, d, r, eval.Options{})
	if err != nil {
		t.Fatalf("eval: %v", err)
	}
	n, waited := r.Waits.Count()
	if n == 0 || waited <= 0 {
		t.Errorf("no rate-limit refusal was waited out in %s; the limits are meant to bite", time.Since(start))
	}
	if s.logged(t) != logged || size(t, s.fb) != fbSize {
		t.Errorf("after the evaluation: discovery log %d bytes (was %d), feedback log %d bytes (was %d)", size(t, s.dlog), logged, size(t, s.fb), fbSize)
	}
	evals := trailEntries(t, s.trail, audittrail.TypeEvaluation)
	if len(evals) != rep.Queries {
		t.Errorf("%d evaluation entries in the trail for %d queries", len(evals), rep.Queries)
	}
	raw, _ := os.ReadFile(s.trail)
	for _, q := range d.Queries {
		if strings.Contains(string(raw), q.Query) {
			t.Errorf("the trail holds the query %q", q.Query)
		}
	}
	for _, e := range evals {
		if e.Principal != "eval-admin" || e.Tenant != rep.Tenant || e.Method != "DiscoverTools" || e.SubjectHash == "" || e.Peer == "" {
			t.Errorf("trail entry %+v", e)
			break
		}
	}
}
