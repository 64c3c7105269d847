package server_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/seed0cff8200/cardex/internal/telemetry/discoverylog"
	pb "github.com/seed0cff8200/cardex/proto/cardex/v1"
)

// readLog parses the discovery log, one entry per line, strictly, once
// everything queued is written.
func readLog(t *testing.T, l *discoverylog.Log, path string) ([]discoverylog.Entry, []byte) {
	t.Helper()
	if err := l.Flush(); err != nil {
		t.Fatalf("flush discovery log: %v", err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read discovery log: %v", err)
	}
	var out []discoverylog.Entry
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		dec.DisallowUnknownFields()
		var e discoverylog.Entry
		if err := dec.Decode(&e); err != nil {
			t.Fatalf("log line %d is not an entry: %v\n%s", len(out)+1, err, sc.Bytes())
		}
		out = append(out, e)
	}
	if len(raw) > 0 && raw[len(raw)-1] != '\n' {
		t.Errorf("log does not end with a newline")
	}
	return out, raw
}

func TestDiscoveryLog(t *testing.T) {
	const subject = "agent-7@acme.example"
	queries := []string{
		"customer wants their money back for order 1234",
		"give the customer their money back right away",
		"where is my package",
	}
	allCards := acmeCards(t)
	w := &twoWorlds{visible: supportVisible(allCards)}
	for _, n := range names(allCards) {
		if !slices.Contains(names(w.visible), n) {
			w.forbidden = append(w.forbidden, n)
		}
	}
	for _, mode := range []discoverylog.QueryMode{discoverylog.QueryRaw, discoverylog.QueryHash, discoverylog.QueryOff} {
		t.Run(string(mode), func(t *testing.T) {
			e := newEnv(t, envOptions{logMode: mode, cards: allCards})
			caller := &pb.Caller{Tenant: "acme", Subject: subject, Scopes: supportScopes, SessionId: "sess-42"}
			start := time.Now().UTC().Add(-time.Second)
			var responses []*pb.DiscoverToolsResponse
			var reqs []*pb.DiscoverToolsRequest
			for i, q := range queries {
				req := &pb.DiscoverToolsRequest{Caller: caller, Query: q, TopK: int32(i * 3)} // 0 → default 5
				if i == 1 {
					// A forbidden pin: silently dropped, and never logged.
					req.AlwaysLoad = []*pb.ToolRef{{Server: "billing", Name: "issue_refund"}, {Server: "orders", Name: "get_order"}}
				}
				reqs = append(reqs, req)
				responses = append(responses, e.discover(t, req))
			}
			// Failed discoveries and the other RPCs are not logged.
			if _, err := e.disc.DiscoverTools(rpcCtx(t), &pb.DiscoverToolsRequest{Caller: caller, Query: "x", TopK: 99}); err == nil {
				t.Fatal("top_k 99 accepted")
			}
			e.searchAll(t, caller, queries[0], 100)
			_, _ = e.disc.DescribeTool(rpcCtx(t), &pb.DescribeToolRequest{Caller: caller, Name: "issue_refund"})
			_, _ = e.disc.AuthorizeCall(rpcCtx(t), &pb.AuthorizeCallRequest{Caller: caller, Name: "issue_refund"})

			entries, raw := readLog(t, e.dlog, e.logPath)
			if len(entries) != len(queries) {
				t.Fatalf("%d log lines, want %d (one per successful discovery)", len(entries), len(queries))
			}
			if bytes.Contains(raw, []byte(subject)) {
				t.Errorf("the raw subject is in the log")
			}
			for _, f := range w.forbidden {
				_, name, _ := strings.Cut(f, "/")
				// Bare names that are not part of a visible name
				// ("search" is in support/search and search_orders).
				if !strings.Contains(strings.Join(names(w.visible), " "), name) && bytes.Contains(raw, []byte(name)) {
					t.Errorf("the log mentions the forbidden tool %s", f)
				}
			}
			for _, en := range entries {
				for _, r := range en.Returned {
					if slices.Contains(w.forbidden, r.Server+"/"+r.Name) {
						t.Errorf("the log records the forbidden tool %s/%s", r.Server, r.Name)
					}
				}
			}
			for i, got := range entries {
				res, q := responses[i], queries[i]
				if got.ID != res.GetDiscoveryId() || got.ID == "" {
					t.Errorf("line %d: id %q, discovery_id %q", i+1, got.ID, res.GetDiscoveryId())
				}
				if got.Tenant != "acme" || got.SessionID != "sess-42" {
					t.Errorf("line %d: tenant %q session %q", i+1, got.Tenant, got.SessionID)
				}
				if got.SubjectHash != e.dlog.Hash(subject) || got.SubjectHash == "" {
					t.Errorf("line %d: subject_hash %q, want %q", i+1, got.SubjectHash, e.dlog.Hash(subject))
				}
				switch mode {
				case discoverylog.QueryRaw:
					if got.Query != q || got.QueryHash != "" {
						t.Errorf("line %d: query %q hash %q, want the raw query", i+1, got.Query, got.QueryHash)
					}
				case discoverylog.QueryHash:
					if got.Query != "" || got.QueryHash != e.dlog.Hash(q) {
						t.Errorf("line %d: query %q hash %q, want only the hash %q", i+1, got.Query, got.QueryHash, e.dlog.Hash(q))
					}
				case discoverylog.QueryOff:
					if got.Query != "" || got.QueryHash != "" {
						t.Errorf("line %d: query %q hash %q, want neither", i+1, got.Query, got.QueryHash)
					}
				}
				if mode != discoverylog.QueryRaw && bytes.Contains(raw, []byte(q)) {
					t.Errorf("mode %s: the raw query %q is in the log", mode, q)
				}
				if got.CandidateCount != int(res.GetCandidateCount()) || got.CandidateCount != 18 {
					t.Errorf("line %d: candidate_count %d, response %d, want 18", i+1, got.CandidateCount, res.GetCandidateCount())
				}
				wantTopK := int(reqs[i].GetTopK())
				if wantTopK == 0 {
					wantTopK = 5
				}
				if got.TopK != wantTopK {
					t.Errorf("line %d: top_k %d, want %d", i+1, got.TopK, wantTopK)
				}
				var gotNames []string
				for j, r := range got.Returned {
					gotNames = append(gotNames, r.Server+"/"+r.Name)
					tool := res.GetTools()[min(j, len(res.GetTools())-1)]
					if r.Score != tool.GetScores().GetFused() || r.Pinned != tool.GetPinned() {
						t.Errorf("line %d #%d: score %v pinned %v, response %s pinned %v", i+1, j+1, r.Score, r.Pinned, fmtTool(tool), tool.GetPinned())
					}
				}
				mustEqualStrings(t, "returned names", gotNames, toolNames(res.GetTools()))
				if got.Time.Before(start) || got.Time.After(time.Now().UTC().Add(time.Second)) || got.LatencyMS < 0 {
					t.Errorf("line %d: time %v latency %v", i+1, got.Time, got.LatencyMS)
				}
			}
		})
	}
}
