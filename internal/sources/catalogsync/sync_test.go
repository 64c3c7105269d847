package catalogsync

import (
	"slices"
	"testing"

	"github.com/seed0cff8200/cardex/cards"
)

func card(name, summary string, scopes ...string) cards.Card {
	c := cards.Card{Tenant: "acme", Server: "files", Name: name, Kind: cards.KindMCPTool, Summary: summary, RequiredScopes: scopes}
	if err := cards.Normalize(&c); err != nil {
		panic(err)
	}
	return c
}

func stored(c cards.Card, version int64, mut func(*cards.Card)) cards.Card {
	c = c.Clone()
	c.Version = version
	if mut != nil {
		mut(&c)
	}
	return c
}

func annotated(c cards.Card, readOnly, destructive bool) cards.Card {
	c.Annotations = cards.Annotations{ReadOnly: &readOnly, Destructive: &destructive}
	return c
}

func with(c cards.Card, f func(*cards.Card)) cards.Card {
	f(&c)
	return c
}

func TestDiff(t *testing.T) {
	rest := card("get_x", "Get x.")
	rest.Kind = cards.KindRESTOperation
	for _, tc := range []struct {
		name     string
		stored   []cards.Card
		imported []cards.Card
		opt      Options
		want     map[string]Action
		check    func(t *testing.T, p Plan)
	}{
		{
			name:     "new cards get the source's scopes plus the default ones",
			imported: []cards.Card{card("read", "Read.", "api:read")},
			opt:      Options{Kind: cards.KindMCPTool, Scopes: []string{"files:read"}},
			want:     map[string]Action{"read": Create},
			check: func(t *testing.T, p Plan) {
				if got := p.Changes[0].Card.RequiredScopes; !slices.Equal(got, []string{"api:read", "files:read"}) {
					t.Errorf("scopes %v", got)
				}
			},
		},
		{
			name:     "curated fields and scopes are kept; source fields updated",
			stored:   []cards.Card{stored(card("read", "Read.", "files:admin"), 4, func(c *cards.Card) { c.Aliases = []string{"open a file"}; c.WhenNotToUse = "Not for binaries." })},
			imported: []cards.Card{card("read", "Read a text file.")},
			opt:      Options{Kind: cards.KindMCPTool, Scopes: []string{"files:read"}},
			want:     map[string]Action{"read": Update},
			check: func(t *testing.T, p Plan) {
				c := p.Changes[0].Card
				if c.Summary != "Read a text file." || c.WhenNotToUse != "Not for binaries." || !slices.Equal(c.Aliases, []string{"open a file"}) ||
					!slices.Equal(c.RequiredScopes, []string{"files:admin"}) || c.Version != 4 || !slices.Equal(p.Changes[0].Fields, []string{"summary"}) {
					t.Errorf("%+v fields %v", c, p.Changes[0].Fields)
				}
			},
		},
		{
			name:     "override scopes",
			stored:   []cards.Card{stored(card("read", "Read.", "files:admin"), 1, nil)},
			imported: []cards.Card{card("read", "Read.")},
			opt:      Options{Kind: cards.KindMCPTool, Scopes: []string{"files:read"}, OverrideScopes: true},
			want:     map[string]Action{"read": Update},
		},
		{
			name:     "vanished cards of the import's kind are revoked; other kinds and skipped tools are left alone",
			stored:   []cards.Card{stored(card("gone", "Gone."), 2, nil), stored(rest, 1, nil), stored(card("weird", "Weird."), 1, nil), stored(card("old", "Old."), 3, func(c *cards.Card) { c.Status = cards.StatusRevoked })},
			imported: nil,
			opt:      Options{Kind: cards.KindMCPTool, Keep: []string{"weird"}},
			want:     map[string]Action{"gone": Revoke},
			check: func(t *testing.T, p Plan) {
				if c := p.Changes[0].Card; c.Status != cards.StatusRevoked || c.Version != 2 {
					t.Errorf("%+v", c)
				}
			},
		},
		{
			name:     "a revoked card whose tool is back stays revoked",
			stored:   []cards.Card{stored(card("back", "Back."), 5, func(c *cards.Card) { c.Status = cards.StatusRevoked })},
			imported: []cards.Card{card("back", "Back.")},
			opt:      Options{Kind: cards.KindMCPTool},
			want:     map[string]Action{"back": KeptRevoked},
		},
		{
			name:     "unless reactivation is asked for",
			stored:   []cards.Card{stored(card("back", "Back."), 5, func(c *cards.Card) { c.Status = cards.StatusRevoked })},
			imported: []cards.Card{card("back", "Back.")},
			opt:      Options{Kind: cards.KindMCPTool, Reactivate: true},
			want:     map[string]Action{"back": Reactivate},
			check: func(t *testing.T, p Plan) {
				if c := p.Changes[0].Card; c.Status != cards.StatusActive || len(p.Writes()) != 1 {
					t.Errorf("%+v", c)
				}
			},
		},
		{
			// Closed by default: a tool whose source names no scope, imported
			// without --scopes, requires its server's scope by its effect.
			name: "no scope anywhere: the server's scope by the tool's effect",
			imported: []cards.Card{
				annotated(card("read", "Read."), true, false),
				annotated(card("write", "Write."), false, false),
				annotated(card("delete", "Delete."), false, true),
				card("unknown", "Says nothing of its effects."),
				card("oauth", "Names its own.", "api:read"),
			},
			opt:  Options{Kind: cards.KindMCPTool},
			want: map[string]Action{"read": Create, "write": Create, "delete": Create, "unknown": Create, "oauth": Create},
			check: func(t *testing.T, p Plan) {
				want := map[string]string{"read": "files:read", "write": "files:write", "delete": "files:admin", "unknown": "files:write", "oauth": "api:read"}
				for _, ch := range p.Changes {
					if got := ch.Card.RequiredScopes; !slices.Equal(got, []string{want[ch.Card.Name]}) || ch.Defaulted != (ch.Card.Name != "oauth") {
						t.Errorf("%s: scopes %v, defaulted %v", ch.Card.Name, got, ch.Defaulted)
					}
				}
			},
		},
		{
			name:     "--override-scopes without --scopes closes, never opens",
			stored:   []cards.Card{stored(card("read", "Read."), 3, nil)},
			imported: []cards.Card{annotated(card("read", "Read."), true, false)},
			opt:      Options{Kind: cards.KindMCPTool, OverrideScopes: true},
			want:     map[string]Action{"read": Update},
			check: func(t *testing.T, p Plan) {
				if c := p.Changes[0]; !slices.Equal(c.Card.RequiredScopes, []string{"files:read"}) || !c.Defaulted {
					t.Errorf("%+v", c)
				}
			},
		},
		{
			name:     "a deprecation reaches a stored card's empty when_not_to_use and its tags",
			stored:   []cards.Card{stored(card("old", "Old.", "files:read"), 2, func(c *cards.Card) { c.Tags = []string{"io"} })},
			imported: []cards.Card{with(card("old", "Old. DEPRECATED: use new."), func(c *cards.Card) { c.WhenNotToUse = "DEPRECATED: use new."; c.Tags = []string{cards.TagDeprecated} })},
			opt:      Options{Kind: cards.KindMCPTool},
			want:     map[string]Action{"old": Update},
			check: func(t *testing.T, p Plan) {
				c := p.Changes[0]
				if c.Card.WhenNotToUse != "DEPRECATED: use new." || !slices.Equal(c.Card.Tags, []string{"deprecated", "io"}) ||
					!slices.Equal(c.Fields, []string{"summary", "tags", "when_not_to_use"}) {
					t.Errorf("%+v", c)
				}
			},
		},
		{
			name:     "same content is unchanged and written nowhere",
			stored:   []cards.Card{stored(card("same", "Same."), 7, nil)},
			imported: []cards.Card{card("same", "Same.")},
			opt:      Options{Kind: cards.KindMCPTool, Scopes: []string{"x:y"}},
			want:     map[string]Action{"same": Unchanged},
			check: func(t *testing.T, p Plan) {
				if len(p.Writes()) != 0 {
					t.Error("writes")
				}
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Diff("acme", "files", tc.stored, tc.imported, tc.opt)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]Action{}
			for _, c := range p.Changes {
				got[c.Card.Name] = c.Action
			}
			if len(got) != len(tc.want) {
				t.Fatalf("changes %v, want %v", got, tc.want)
			}
			for n, a := range tc.want {
				if got[n] != a {
					t.Fatalf("changes %v, want %v", got, tc.want)
				}
			}
			if tc.check != nil {
				tc.check(t, p)
			}
		})
	}
}

func TestDiffRefuses(t *testing.T) {
	other := card("x", "X.")
	other.Server = "elsewhere"
	for name, imported := range map[string][]cards.Card{
		"another namespace": {other},
		"a duplicate":       {card("x", "X."), card("x", "X.")},
	} {
		if _, err := Diff("acme", "files", nil, imported, Options{Kind: cards.KindMCPTool}); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}
