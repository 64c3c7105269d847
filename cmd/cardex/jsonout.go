package main

import (
	"encoding/json"

	"github.com/seed0cff8200/cardex/cards"
	"github.com/seed0cff8200/cardex/internal/codec/apiconv"
	"github.com/seed0cff8200/cardex/internal/codec/cardjson"
	pb "github.com/seed0cff8200/cardex/proto/cardex/v1"
)

// What -o json prints. Every command prints the same names for the same
// things (snake_case, as in card files); a card is always internal/codec/cardjson's
// shape: schemas as JSON objects, versions as numbers.

func cardJSON(p *pb.Card) *cardjson.Card {
	if p == nil {
		return nil
	}
	c := apiconv.CardFromProto(p)
	if t := p.GetUpdatedAt(); t != nil {
		c.UpdatedAt = t.AsTime()
	}
	out := cardjson.From(&c)
	return &out
}

type toolRefJSON struct {
	Server string `json:"server"`
	Name   string `json:"name"`
}

type scoresJSON struct {
	Lexical      float64 `json:"lexical"`
	Semantic     float64 `json:"semantic"`
	Fused        float64 `json:"fused"`
	LexicalRank  int32   `json:"lexical_rank,omitempty"`
	SemanticRank int32   `json:"semantic_rank,omitempty"`
}

type discoveredJSON struct {
	Card          *cardjson.Card `json:"card"`
	Scores        scoresJSON     `json:"scores"`
	Confidence    float64        `json:"confidence"`
	MatchedFields []string       `json:"matched_fields,omitempty"`
	Reason        string         `json:"reason,omitempty"`
	Pinned        bool           `json:"pinned,omitempty"`
	Tokens        int32          `json:"tokens"`
	Intents       []int32        `json:"intents,omitempty"`
	ForQuery      bool           `json:"for_query,omitempty"`
	Alternatives  []toolRefJSON  `json:"alternatives,omitempty"`
	CompanionOf   *toolRefJSON   `json:"companion_of,omitempty"`
}

type tokensJSON struct {
	ShortlistTokens int64  `json:"shortlist_tokens"`
	CatalogTokens   int64  `json:"catalog_tokens"`
	Method          string `json:"method"`
}

type discoverJSON struct {
	DiscoveryID         string           `json:"discovery_id"`
	Tools               []discoveredJSON `json:"tools"`
	CandidateCount      int32            `json:"candidate_count"`
	Tokens              tokensJSON       `json:"tokens"`
	LowConfidence       bool             `json:"low_confidence"`
	ReformulatedQuery   string           `json:"reformulated_query,omitempty"`
	Degraded            bool             `json:"degraded"`
	Abstained           bool             `json:"abstained"`
	AbstainedIntents    []int32          `json:"abstained_intents,omitempty"`
	ReformulatedIntents []string         `json:"reformulated_intents,omitempty"`
	MinConfidence       float64          `json:"min_confidence"`
}

func discoverOut(r *pb.DiscoverToolsResponse) discoverJSON {
	out := discoverJSON{DiscoveryID: r.GetDiscoveryId(), Tools: []discoveredJSON{}, CandidateCount: r.GetCandidateCount(),
		LowConfidence: r.GetLowConfidence(), ReformulatedQuery: r.GetReformulatedQuery(), Degraded: r.GetDegraded(),
		Abstained: r.GetAbstained(), AbstainedIntents: r.GetAbstainedIntents(), ReformulatedIntents: r.GetReformulatedIntents(), MinConfidence: r.GetMinConfidence(),
		Tokens: tokensJSON{ShortlistTokens: r.GetTokens().GetShortlistTokens(), CatalogTokens: r.GetTokens().GetCatalogTokens(), Method: r.GetTokens().GetMethod()}}
	for _, t := range r.GetTools() {
		s := t.GetScores()
		var alts []toolRefJSON
		for _, a := range t.GetAlternatives() {
			alts = append(alts, toolRefJSON{Server: a.GetServer(), Name: a.GetName()})
		}
		var with *toolRefJSON
		if c := t.GetCompanionOf(); c != nil {
			with = &toolRefJSON{Server: c.GetServer(), Name: c.GetName()}
		}
		out.Tools = append(out.Tools, discoveredJSON{Card: cardJSON(t.GetCard()), MatchedFields: t.GetMatchedFields(), Reason: t.GetReason(), CompanionOf: with,
			Pinned: t.GetPinned(), Tokens: t.GetTokens(), Confidence: t.GetConfidence(), Intents: t.GetIntents(), ForQuery: t.GetForQuery(), Alternatives: alts,
			Scores: scoresJSON{Lexical: s.GetLexical(), Semantic: s.GetSemantic(), Fused: s.GetFused(), LexicalRank: s.GetLexicalRank(), SemanticRank: s.GetSemanticRank()}})
	}
	return out
}

type summaryJSON struct {
	Server  string `json:"server"`
	Name    string `json:"name"`
	Summary string `json:"summary"`
	// Confidence and Intents: a search with intents (as MCP search_tools).
	Confidence float64 `json:"confidence,omitempty"`
	Intents    []int32 `json:"intents,omitempty"`
}

type searchJSON struct {
	Tools      []summaryJSON `json:"tools"`
	NextCursor string        `json:"next_cursor,omitempty"`
	Abstained  bool          `json:"abstained,omitempty"`
}

// searchOut is a search answer; matches (same order as tools) may be nil.
func searchOut(tools []*pb.ToolSummary, matches []*pb.SearchMatch, next string, abstained bool) searchJSON {
	out := searchJSON{Tools: []summaryJSON{}, NextCursor: next, Abstained: abstained}
	for i, t := range tools {
		s := summaryJSON{Server: t.GetServer(), Name: t.GetName(), Summary: t.GetSummary()}
		if i < len(matches) {
			s.Confidence, s.Intents = matches[i].GetConfidence(), matches[i].GetIntents()
		}
		out.Tools = append(out.Tools, s)
	}
	return out
}

// ambiguousJSON is the answer to a describe of a name several servers
// share, as MCP describe_tool gives it.
type ambiguousJSON struct {
	Ambiguous bool     `json:"ambiguous"`
	Servers   []string `json:"servers"`
	Message   string   `json:"message"`
}

type authorizeJSON struct {
	Allowed          bool         `json:"allowed"`
	Decision         string       `json:"decision"`
	Message          string       `json:"message,omitempty"`
	Tool             *toolRefJSON `json:"tool,omitempty"`
	CardVersion      int64        `json:"card_version,omitempty"`
	Violations       []string     `json:"violations,omitempty"`
	AmbiguousServers []string     `json:"ambiguous_servers,omitempty"`
}

func authorizeOut(r *pb.AuthorizeCallResponse) authorizeJSON {
	out := authorizeJSON{Allowed: r.GetAllowed(), Decision: r.GetDecision().String(), Message: r.GetMessage(), CardVersion: r.GetCardVersion(),
		Violations: r.GetViolations(), AmbiguousServers: r.GetAmbiguousServers()}
	if t := r.GetTool(); t != nil {
		out.Tool = &toolRefJSON{Server: t.GetServer(), Name: t.GetName()}
	}
	return out
}

type putResultJSON struct {
	Tenant  string `json:"tenant"`
	Server  string `json:"server"`
	Name    string `json:"name"`
	Version int64  `json:"version"`
	Outcome string `json:"outcome"`
}

type listJSON struct {
	Cards      []*cardjson.Card `json:"cards"`
	NextCursor string           `json:"next_cursor,omitempty"`
}

// serverJSON is a server entry: cards.ServerInfo's own JSON (snake_case).
func serverJSON(p *pb.ServerInfo) cards.ServerInfo {
	s := apiconv.ServerInfoFromProto(p)
	if t := p.GetUpdatedAt(); t != nil {
		s.UpdatedAt = t.AsTime()
	}
	return s
}

type listedJSON struct {
	Name         string             `json:"name"`
	Tool         *toolRefJSON       `json:"tool,omitempty"`
	Description  string             `json:"description,omitempty"`
	InputSchema  json.RawMessage    `json:"input_schema,omitempty"`
	OutputSchema json.RawMessage    `json:"output_schema,omitempty"`
	Annotations  *cards.Annotations `json:"annotations,omitempty"`
}

type listToolsJSON struct {
	Disclosure string       `json:"disclosure"`
	Tools      []listedJSON `json:"tools"`
}

func listToolsOut(r *pb.ExecutionServiceListToolsResponse) listToolsJSON {
	out := listToolsJSON{Disclosure: r.GetDisclosure(), Tools: []listedJSON{}}
	raw := func(s string) json.RawMessage {
		if s == "" || !json.Valid([]byte(s)) {
			return nil
		}
		return json.RawMessage(s)
	}
	for _, t := range r.GetTools() {
		l := listedJSON{Name: t.GetName(), Description: t.GetDescription(), InputSchema: raw(t.GetInputSchema()), OutputSchema: raw(t.GetOutputSchema())}
		if ref := t.GetTool(); ref != nil {
			l.Tool = &toolRefJSON{Server: ref.GetServer(), Name: ref.GetName()}
		}
		if a := t.GetAnnotations(); a != nil {
			l.Annotations = &cards.Annotations{ReadOnly: a.ReadOnly, Destructive: a.Destructive, Idempotent: a.Idempotent, OpenWorld: a.OpenWorld}
		}
		out.Tools = append(out.Tools, l)
	}
	return out
}
