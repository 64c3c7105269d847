package server_test

// Regression tests for the findings of the second outside review (issue
// 20). Each failed on the code before its fix.

import (
	"strings"
	"testing"

	pb "github.com/seed0cff8200/cardex/proto/cardex/v1"
)

// hugeExponents are arguments whose numbers the schema validator would read
// as million-digit rationals: 22 KB that cost about 17 ms of CPU per call.
func hugeExponents() string {
	return `{"order_id":"ORD-1","n":[` + strings.TrimSuffix(strings.Repeat("1e999999,", 2500), ",") + `]}`
}

// Finding 4: huge-exponent numbers were validated, at a cost per call that
// 2,500 calls turned into 40 s of CPU. Now they are refused before the
// validator runs, naming the path and the limit.
func TestFinding2NumbersBoundedBeforeValidation(t *testing.T) {
	e := newEnv(t, envOptions{cards: acmeCards(t)})
	c := &pb.Caller{Tenant: "acme", Scopes: []string{"orders:read"}}
	for _, tc := range []struct{ args, want string }{
		{hugeExponents(), "at '/n/0': the number's exponent is 999999; the limit is ±400"},
		{`{"order_id":"ORD-1","n":1e-999999}`, "at '/n': the number's exponent is -999999; the limit is ±400"},
		{`{"order_id":"ORD-1","n":` + strings.Repeat("9", 310) + `}`, "at '/n': a number of 310 characters; the limit is 100"},
		{`{"order_id":"ORD-1","n":1e309}`, "at '/n': number 1e309 is out of the range of a float64 (±1.8e308)"},
	} {
		a, err := e.disc.AuthorizeCall(rpcCtx(t), &pb.AuthorizeCallRequest{Caller: c, Server: "orders", Name: "get_order", ArgumentsJson: tc.args})
		if err != nil {
			t.Fatal(err)
		}
		if a.GetAllowed() || a.GetDecision() != pb.AuthorizeCallResponse_DECISION_DENY_INVALID_ARGUMENTS || strings.Join(a.GetViolations(), "; ") != tc.want {
			t.Errorf("%.40s…: %v; want DENY_INVALID_ARGUMENTS with [%s]", tc.args, a, tc.want)
		}
	}
}
