package console

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/seed0cff8200/cardex/cards"
	"github.com/seed0cff8200/cardex/internal/access/auth"
	"github.com/seed0cff8200/cardex/internal/access/ratelimit"
	"github.com/seed0cff8200/cardex/internal/codec/apiconv"
	pb "github.com/seed0cff8200/cardex/proto/cardex/v1"
	"github.com/seed0cff8200/cardex/retriever"
)

// playForm is the playground's form, as submitted (a GET, so a discovery
// is a link that can be shared and needs no JavaScript).
type playForm struct {
	Query         string
	Intents       string // one a line
	Tenant        string
	Subject       string
	Scopes        string // comma- or space-separated
	TopK          string
	MinConfidence string
	Fusion        string
	Alpha         string
	Pins          string // SERVER/NAME, comma- or space-separated
	NoCompanions  bool
}

type playRow struct {
	Rank         int
	Key          cards.Key
	Summary      string
	Kind         cards.Kind
	ForQuery     bool
	Intents      []int // 1-based
	Lexical      float64
	LexicalRank  int
	Semantic     float64
	SemanticRank int
	Fused        float64
	Confidence   float64
	Tokens       int
	Fields       []string
	Reason       string
	Pinned       bool
	Alternatives []cards.Key
	CompanionOf  *cards.Key
	Input        string
}

type playData struct {
	Form    playForm
	Binding *auth.Binding
	// Ran: a discovery was run (the form held a query or intents).
	Ran                 bool
	Caller              retriever.Caller
	Intents             []string
	Rows                []playRow
	CandidateCount      int
	ShortlistTokens     int64
	CatalogTokens       int64
	TokenMethod         string
	TokenBar            string
	LowConfidence       bool
	Reformulated        string
	ReformulatedIntents []string
	Abstained           bool
	AbstainedIntents    []int // 1-based
	MinConfidence       float64
	Degraded            bool
	Grpcurl             string
	CLI                 string
	Fusions             []string
}

func splitList(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\n' || r == '\r' || r == '\t' })
}

func lines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// request turns the form into the DiscoverTools request a gRPC client
// would send.
func (f *playForm) request() (*pb.DiscoverToolsRequest, error) {
	req := &pb.DiscoverToolsRequest{
		Caller:  &pb.Caller{Tenant: strings.TrimSpace(f.Tenant), Subject: strings.TrimSpace(f.Subject), Scopes: splitList(f.Scopes)},
		Query:   strings.TrimSpace(f.Query),
		Intents: lines(f.Intents),
		Fusion:  strings.TrimSpace(f.Fusion),

		NoCompanions: f.NoCompanions,
	}
	if v := strings.TrimSpace(f.TopK); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			return nil, cards.Invalid("top_k", "%q is not a whole number", v)
		}
		req.TopK = int32(max(min(n, 1<<30), -1<<30))
	}
	for _, x := range []struct {
		field, v string
		into     **float64
	}{{"min_confidence", f.MinConfidence, &req.MinConfidence}, {"alpha", f.Alpha, &req.Alpha}} {
		if v := strings.TrimSpace(x.v); v != "" {
			n, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return nil, cards.Invalid(x.field, "%q is not a number", v)
			}
			*x.into = proto.Float64(n)
		}
	}
	for _, p := range splitList(f.Pins) {
		server, name, ok := strings.Cut(p, "/")
		if !ok || server == "" || name == "" {
			return nil, cards.Invalid("always_load", "%q: name a pin as SERVER/NAME", p)
		}
		req.AlwaysLoad = append(req.AlwaysLoad, &pb.ToolRef{Server: server, Name: name})
	}
	return req, nil
}

func (c *Console) playground(w http.ResponseWriter, r *http.Request, s *session) {
	q := r.URL.Query()
	f := playForm{Query: q.Get("query"), Intents: q.Get("intents"), Tenant: q.Get("tenant"), Subject: q.Get("subject"), Scopes: q.Get("scopes"),
		TopK: q.Get("top_k"), MinConfidence: q.Get("min_confidence"), Fusion: q.Get("fusion"), Alpha: q.Get("alpha"), Pins: q.Get("pins"),
		NoCompanions: q.Get("no_companions") != ""}
	d := playData{Form: f, Binding: s.Binding(), TokenMethod: retriever.TokenMethod, Fusions: []string{retriever.FusionRelative, retriever.FusionRRF}}
	if b := d.Binding; b != nil && f.Tenant == "" && f.Subject == "" && f.Scopes == "" {
		// A bound credential's caller, as the form starts.
		d.Form.Tenant, d.Form.Subject, d.Form.Scopes = b.Tenant, b.Subject, strings.Join(b.Scopes, ",")
	}
	if d.Form.TopK == "" {
		d.Form.TopK = strconv.Itoa(retriever.DefaultTopK)
	}
	p := page{Title: "Discovery playground", Nav: "playground", Session: s, Data: &d}
	if strings.TrimSpace(f.Query) == "" && len(lines(f.Intents)) == 0 {
		c.render(w, r, 0, "playground", p)
		return
	}
	d.Ran = true
	req, err := f.request()
	if err == nil {
		d.Grpcurl, d.CLI = c.commands(req, s)
		err = c.discover(r, s, req, &d)
	}
	if err != nil {
		st, msg := httpStatus(w, c.log, err)
		p.Error = msg
		c.render(w, r, st, "playground", p)
		return
	}
	c.render(w, r, 0, "playground", p)
}

// discover runs the request as DiscoverTools would for this credential:
// the caller resolved against the credential's binding and checked, the
// caller's rate limit, then the retriever. The playground's discoveries are
// not logged: they are a person's experiments, not an agent's turns, and
// would read as misses.
func (c *Console) discover(r *http.Request, s *session, req *pb.DiscoverToolsRequest, d *playData) error {
	caller := retriever.Caller{Tenant: req.Caller.GetTenant(), Subject: req.Caller.GetSubject(), Scopes: req.Caller.GetScopes()}
	caller, err := auth.Resolve(*s.Discover, caller)
	if err != nil {
		return err
	}
	if err := retriever.ValidateCaller(caller); err != nil {
		return err
	}
	key := ratelimit.CallerKey(caller.Tenant, caller.Subject)
	credential := ""
	if s.Discover.Binding == nil && s.Discover.Name != auth.Unauthenticated.Name {
		credential = "credential:" + s.Discover.Name // the same bucket as the credential's gRPC calls
	}
	if dn := c.cfg.Limiter.AllowFor(ratelimit.Discovery, credential, key, caller.Tenant); dn != nil {
		return dn
	}
	release, dn := c.cfg.Limiter.Acquire(key)
	if dn != nil {
		return dn
	}
	defer release()
	rr := apiconv.DiscoverRequestFromProto(req, caller)
	res, err := c.cfg.Retriever.Discover(r.Context(), rr)
	if err != nil {
		return err
	}
	d.Caller, d.Intents = caller, rr.Intents
	d.CandidateCount, d.ShortlistTokens, d.CatalogTokens = res.CandidateCount, res.ShortlistTokens, res.CatalogTokens
	d.LowConfidence, d.Reformulated, d.ReformulatedIntents = res.LowConfidence, res.Reformulated, res.ReformulatedIntents
	d.Abstained, d.MinConfidence, d.Degraded = res.Abstained, res.MinConfidence, res.Degraded
	for _, i := range res.AbstainedIntents {
		d.AbstainedIntents = append(d.AbstainedIntents, i+1)
	}
	for i, t := range res.Tools {
		row := playRow{Rank: i + 1, Key: t.Card.Key(), Summary: t.Card.Summary, Kind: t.Card.Kind, ForQuery: t.ForQuery,
			Lexical: t.Scores.Lexical, LexicalRank: t.Scores.LexicalRank, Semantic: t.Scores.Semantic, SemanticRank: t.Scores.SemanticRank,
			Fused: t.Scores.Score, Confidence: t.Scores.Confidence, Tokens: t.Tokens, Fields: t.Scores.Fields, Reason: t.Reason,
			Pinned: t.Pinned, Alternatives: t.Alternatives, CompanionOf: t.CompanionOf, Input: indent(t.Card.InputSchema)}
		for _, in := range t.Intents {
			row.Intents = append(row.Intents, in+1)
		}
		d.Rows = append(d.Rows, row)
	}
	d.TokenBar = tokenBar(res.ShortlistTokens, res.CatalogTokens)
	return nil
}

// commands are the request as a grpcurl command and as a cardex discover
// command. The credential itself is never shown: both read it from
// $CARDEX_TOKEN.
func (c *Console) commands(req *pb.DiscoverToolsRequest, s *session) (grpcurl, cli string) {
	addr := c.cfg.GRPCAddr
	if addr == "" {
		addr = "127.0.0.1:50051"
	}
	js, _ := protojson.MarshalOptions{UseProtoNames: true}.Marshal(req)
	var compact bytes.Buffer
	_ = json.Compact(&compact, js)
	g := []string{"grpcurl"}
	if !c.cfg.GRPCTLS {
		g = append(g, "-plaintext")
	}
	if s.SignedIn() {
		g = append(g, "-H", `"authorization: Bearer $CARDEX_TOKEN"`)
	}
	g = append(g, "-d", shellQuote(compact.String()), addr, "cardex.v1.DiscoveryService/DiscoverTools")

	a := []string{"cardex", "discover"}
	if req.Query != "" {
		a = append(a, shellQuote(req.Query))
	}
	for _, in := range req.Intents {
		a = append(a, "--intent", shellQuote(in))
	}
	if t := req.Caller.GetTenant(); t != "" {
		a = append(a, "--tenant", shellQuote(t))
	}
	if sc := req.Caller.GetScopes(); len(sc) > 0 {
		a = append(a, "--scopes", shellQuote(strings.Join(sc, ",")))
	}
	if sub := req.Caller.GetSubject(); sub != "" {
		a = append(a, "--subject", shellQuote(sub))
	}
	if req.TopK != 0 {
		a = append(a, "--top-k", strconv.Itoa(int(req.TopK)))
	}
	if req.MinConfidence != nil {
		a = append(a, "--min-confidence", strconv.FormatFloat(req.GetMinConfidence(), 'g', -1, 64))
	}
	if req.Fusion != "" {
		a = append(a, "--fusion", shellQuote(req.Fusion))
	}
	if req.Alpha != nil {
		a = append(a, "--alpha", strconv.FormatFloat(req.GetAlpha(), 'g', -1, 64))
	}
	for _, p := range req.AlwaysLoad {
		a = append(a, "--pin", shellQuote(p.GetServer()+"/"+p.GetName()))
	}
	if req.NoCompanions {
		a = append(a, "--no-companions")
	}
	if addr != "127.0.0.1:50051" {
		a = append(a, "--addr", shellQuote(addr))
	}
	if c.cfg.GRPCTLS {
		a = append(a, "--tls")
	}
	if s.SignedIn() {
		a = append(a, `--token "$CARDEX_TOKEN"`)
	}
	return strings.Join(g, " "), strings.Join(a, " ")
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.,:/@=+%") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// playURL is the playground link for a query (used by the misses page).
func playURL(tenant, query string) string {
	return Path + "playground?" + url.Values{"tenant": {tenant}, "query": {query}}.Encode()
}
