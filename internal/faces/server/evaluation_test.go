package server_test

// DiscoverToolsRequest.evaluation: who may keep a discovery out of the
// discovery log, through the real gRPC server with real credentials.

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"

	"github.com/seed0cff8200/cardex/internal/access/audittrail"
	"github.com/seed0cff8200/cardex/internal/access/auth"
	"github.com/seed0cff8200/cardex/internal/telemetry/discoverylog"
	pb "github.com/seed0cff8200/cardex/proto/cardex/v1"
)

func TestEvaluationMark(t *testing.T) {
	const (
		admin   = "admin-token-0123456789"
		catalog = "catalog-token-0123456789"
		discov  = "discover-token-0123456789"
		bound   = "bound-token-0123456789ab"
	)
	tokens := func(names ...string) *auth.Authenticator {
		f := auth.TokenFile{}
		for _, n := range names {
			sum := sha256.Sum256([]byte(n))
			e := auth.TokenEntry{Name: n, TokenSHA256: hex.EncodeToString(sum[:])}
			switch n {
			case admin:
				e.Role = auth.RoleAdmin
			case catalog:
				e.Role = auth.RoleCatalog
			case discov:
				e.Role = auth.RoleDiscover
			case bound:
				e.Role, e.Caller = auth.RoleDiscover, &auth.Binding{Tenant: "acme", Scopes: []string{"*"}}
			}
			f.Tokens = append(f.Tokens, e)
		}
		a, err := auth.NewTokens(f)
		if err != nil {
			t.Fatal(err)
		}
		return &auth.Authenticator{Tokens: a}
	}
	for _, tc := range []struct {
		name        string
		auth        *auth.Authenticator
		put, bearer string // put writes the cards
		ok          bool
		refusal     string
	}{
		{"no credentials anywhere", nil, "", "", true, ""},
		{"admin token", tokens(admin, discov), admin, admin, true, ""},
		{"catalog token, discovery open", tokens(catalog), catalog, catalog, true, ""},
		{"no token, discovery open, catalogue closed", tokens(catalog), catalog, "", false, "evaluation"},
		{"discover token", tokens(admin, discov), admin, discov, false, "needs a credential that may also write the catalogue (role admin)"},
		{"bound discover token", tokens(admin, bound), admin, bound, false, "evaluation"},
		{"catalog token, discovery closed", tokens(catalog, discov), catalog, catalog, false, "this service needs discover"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, envOptions{auth: tc.auth, logMode: discoverylog.QueryRaw, trail: true, cards: acmeCards(t), bearer: tc.put})
			ctx := rpcCtx(t)
			if tc.bearer != "" {
				ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+tc.bearer)
			}
			before, _ := os.ReadFile(e.logPath)
			res, err := e.disc.DiscoverTools(ctx, &pb.DiscoverToolsRequest{Caller: &pb.Caller{Tenant: "acme", Subject: "eval", Scopes: []string{"*"}},
				Query: "where is my package", Evaluation: true})
			after, _ := os.ReadFile(e.logPath)
			if string(after) != string(before) {
				t.Errorf("the discovery log changed: %q", after[len(before):])
			}
			var evals []audittrail.Entry
			for _, x := range readTrail(t, e.trail) {
				if x.Type == audittrail.TypeEvaluation {
					evals = append(evals, x)
				}
			}
			if !tc.ok {
				wantCode(t, err, codes.PermissionDenied, tc.refusal)
				if len(evals) != 0 {
					t.Errorf("a refused evaluation in the trail: %+v", evals)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(evals) != 1 || evals[0].Method != "DiscoverTools" || evals[0].Tenant != "acme" || evals[0].Outcome != "answered" || len(res.GetTools()) == 0 {
				t.Errorf("trail %+v, %d tools", evals, len(res.GetTools()))
			}
		})
	}
}
