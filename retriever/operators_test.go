package retriever_test

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/seed0cff8200/cardex/cards"
	"github.com/seed0cff8200/cardex/retriever"
)

func TestParseOperators(t *testing.T) {
	many := make([]string, retriever.MaxSelect+1)
	for i := range many {
		many[i] = fmt.Sprintf("s/t%d", i)
	}
	for _, tc := range []struct {
		in      string
		want    retriever.Operators
		invalid bool
	}{
		{in: "refund an order", want: retriever.Operators{Text: "refund an order"}},
		{in: "", want: retriever.Operators{Text: ""}},
		{in: "+slack send", want: retriever.Operators{Required: []string{"slack"}, Text: "slack send"}},
		{in: "send  +Slack +slack +GitHub", want: retriever.Operators{Required: []string{"slack", "github"}, Text: "send Slack slack GitHub"}},
		{in: "C++ and 1+1 or a + b ++", want: retriever.Operators{Text: "C++ and 1+1 or a + b ++"}}, // no word after a leading +
		{in: "+pull-request", want: retriever.Operators{Required: []string{"pull-request"}, Text: "pull-request"}},
		{in: "select:github/create_issue", want: retriever.Operators{Select: []retriever.Ref{{"github", "create_issue"}}}},
		{in: "  SELECT:a/b, c ,a/b,,d__e  ", want: retriever.Operators{Select: []retriever.Ref{{"a", "b"}, {"", "c"}, {"", "d__e"}}}},
		{in: "select:a/b +x", invalid: true},
		{in: "select:", invalid: true},
		{in: "select: , ", invalid: true},
		{in: "select:a/b/c", invalid: true},
		{in: "select:/b", invalid: true},
		{in: "select:a/", invalid: true},
		{in: "select:" + strings.Join(many, ","), invalid: true},
		{in: "select:" + strings.Join(many[:retriever.MaxSelect], ","), want: retriever.Operators{Select: func() []retriever.Ref {
			var out []retriever.Ref
			for _, m := range many[:retriever.MaxSelect] {
				s, n, _ := strings.Cut(m, "/")
				out = append(out, retriever.Ref{Server: s, Name: n})
			}
			return out
		}()}},
		{in: "+a +b +c +d +e +f +g +h +i", invalid: true},
		{in: "+a +b +c +d +e +f +g +h +a", want: retriever.Operators{Required: []string{"a", "b", "c", "d", "e", "f", "g", "h"}, Text: "a b c d e f g h a"}},
		{in: "selection: of tools", want: retriever.Operators{Text: "selection: of tools"}},
	} {
		got, err := retriever.ParseOperators("query", tc.in)
		if tc.invalid {
			if err == nil {
				t.Errorf("ParseOperators(%q) = %+v; want an error", tc.in, got)
			} else {
				wantInvalid(t, err, "query")
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseOperators(%q): %v", tc.in, err)
			continue
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ParseOperators(%q) = %+v; want %+v", tc.in, got, tc.want)
		}
	}
}

// operatorCatalogue: two servers with a send tool, a tool that needs a
// scope, a pending one, another tenant's, and a name shared by two servers.
func operatorCatalogue() []cards.Card {
	return []cards.Card{
		card("slack", "send_message", "Post a message to a channel."),
		card("slack", "list_channels", "List the channels of the workspace."),
		card("github", "send_invite", "Invite a person to an organisation."),
		card("github", "create_issue", "Open an issue in a repository."),
		card("mail", "send_email", "Send an email; works with Slack notifications too."),
		card("payroll", "run_payroll", "Pay the salaries of the month.", "payroll:admin"),
		with(card("slack", "archive_channel", "Archive a channel."), func(c *cards.Card) { c.Status = cards.StatusPending }),
		with(card("slack", "delete_workspace", "Delete the Slack workspace."), func(c *cards.Card) { c.Tenant = "globex" }),
		card("jira", "search", "Search the issues of a project."),
		card("github", "search", "Search code and issues on GitHub."),
		with(card("crm", "lookup", "Find a customer record."), func(c *cards.Card) { c.Tags = []string{"customer-data"} }),
	}
}

func TestSelect(t *testing.T) {
	r := newRetriever(t, newStore(t, operatorCatalogue()...), nil)
	user := caller("shop:read")
	for _, tc := range []struct {
		query string
		c     retriever.Caller
		want  []string
	}{
		// In the order given, not ranked, not cut to top_k (2 here).
		{"select:github/create_issue,slack/send_message,mail/send_email", user, []string{"github/create_issue", "slack/send_message", "mail/send_email"}},
		// Unknown, unauthorized, pending and another tenant's: absent alike.
		{"select:nope/none,payroll/run_payroll,slack/archive_channel,slack/delete_workspace,slack/list_channels", user, []string{"slack/list_channels"}},
		{"select:payroll/run_payroll", caller("payroll:*"), []string{"payroll/run_payroll"}},
		// A bare name when it is one tool's; an ambiguous one is absent.
		{"select:create_issue,search", user, []string{"github/create_issue"}},
		// The MCP front's qualified name.
		{"select:jira__search", user, []string{"jira/search"}},
		{"select:payroll__run_payroll", user, nil},
		// Duplicates once.
		{"select:slack/send_message,send_message,slack__send_message", user, []string{"slack/send_message"}},
	} {
		res := discover(t, r, retriever.Request{Caller: tc.c, Query: tc.query, TopK: 2})
		if got := names(res); !slices.Equal(got, tc.want) {
			t.Errorf("%q: %v; want %v", tc.query, got, tc.want)
		}
		for _, s := range res.Tools {
			if s.Reason != retriever.SelectedReason || !s.ForQuery || s.Scores.Confidence != 1 || s.Pinned {
				t.Errorf("%q: %s: reason %q, for query %v, confidence %v, pinned %v", tc.query, s.Card.Name, s.Reason, s.ForQuery, s.Scores.Confidence, s.Pinned)
			}
			if len(s.Card.Summary) == 0 {
				t.Errorf("%q: %s: not hydrated", tc.query, s.Card.Name)
			}
		}
		if res.Abstained || res.LowConfidence {
			t.Errorf("%q: abstained %v, low confidence %v; a selection ranks nothing", tc.query, res.Abstained, res.LowConfidence)
		}
	}

	// Indistinguishable: a tool the caller may not use answers exactly like
	// one that does not exist (the accounting is the candidate set's).
	a := discover(t, r, retriever.Request{Caller: user, Query: "select:payroll/run_payroll"})
	b := discover(t, r, retriever.Request{Caller: user, Query: "select:nope/none"})
	if !reflect.DeepEqual(a, b) {
		t.Errorf("unauthorized %+v\nunknown %+v", a, b)
	}

	// Pins first; a pinned tool selected stays a pin.
	res := discover(t, r, retriever.Request{Caller: user, Query: "select:slack/send_message,jira/search",
		AlwaysLoad: []cards.Key{{Server: "jira", Name: "search"}}})
	if got := names(res); !slices.Equal(got, []string{"jira/search", "slack/send_message"}) || !res.Tools[0].Pinned || !res.Tools[0].ForQuery {
		t.Errorf("with a pin: %v (pinned %v)", got, res.Tools[0].Pinned)
	}

	// Intents: a selection in an intent, beside a ranked intent; the
	// selected tool lists its intent.
	res = discover(t, r, retriever.Request{Caller: user, Intents: []string{"select:github/create_issue", "post a message to a channel"}, TopK: 3})
	got := names(res)
	if len(got) < 2 || got[0] != "github/create_issue" || !slices.Equal(res.Tools[0].Intents, []int{0}) || res.Tools[0].ForQuery {
		t.Fatalf("intents: %v, first %+v", got, res.Tools[0])
	}
	if !slices.Contains(got, "slack/send_message") {
		t.Errorf("intents: the ranked intent's tool is missing: %v", got)
	}

	// A selected tool that another list also ranks is placed once, as
	// selected, with both lists recorded.
	res = discover(t, r, retriever.Request{Caller: user, Query: "select:slack/send_message", Intents: []string{"post a message to a channel"}})
	if got := names(res); len(got) == 0 || got[0] != "slack/send_message" || strings.Count(strings.Join(got, " "), "slack/send_message") != 1 {
		t.Fatalf("selected and ranked: %v", got)
	}
	if s := res.Tools[0]; !s.ForQuery || !slices.Equal(s.Intents, []int{0}) || !strings.HasPrefix(s.Reason, retriever.SelectedReason+"; ") {
		t.Errorf("selected and ranked: for query %v, intents %v, reason %q", s.ForQuery, s.Intents, s.Reason)
	}

	_, err := r.Discover(context.Background(), retriever.Request{Caller: user, Query: "select:a b/c/d"})
	wantInvalid(t, err, "query")
	_, err = r.Discover(context.Background(), retriever.Request{Caller: user, Intents: []string{"x", "select:"}})
	wantInvalid(t, err, "intents[1]")
}

func TestRequiredWords(t *testing.T) {
	r := newRetriever(t, newStore(t, operatorCatalogue()...), nil)
	user := caller("shop:read")
	for _, tc := range []struct {
		query string
		c     retriever.Caller
		want  []string // sorted
	}{
		// In the server or name, or as a word of the text: mail/send_email
		// mentions Slack; the pending and the other tenant's do not count.
		{"+slack", user, []string{"mail/send_email", "slack/list_channels", "slack/send_message"}},
		{"+slack send", user, []string{"mail/send_email", "slack/list_channels", "slack/send_message"}},
		{"send +slack +channel", user, []string{"slack/list_channels", "slack/send_message"}},
		// A part of a name: +git matches github; in the text only whole
		// words count ("repo" is not a word of "repository").
		{"+git", user, []string{"github/create_issue", "github/search", "github/send_invite"}},
		{"+repo", user, nil},
		{"+customer-data", user, []string{"crm/lookup"}},
		// Authorization first: the word of a card the caller may not use.
		{"+payroll", user, nil},
		{"+payroll", caller("payroll:admin"), []string{"payroll/run_payroll"}},
		{"+nothing send", user, nil},
	} {
		res := discover(t, r, retriever.Request{Caller: tc.c, Query: tc.query, TopK: 10})
		if got := sorted(names(res)); !slices.Equal(got, tc.want) && !(len(got) == 0 && len(tc.want) == 0) {
			t.Errorf("%q: %v; want %v", tc.query, got, tc.want)
		}
	}
	// Ranked by the whole text: the slack tool that sends comes first.
	res := discover(t, r, retriever.Request{Caller: user, Query: "+slack send a message", TopK: 10})
	if got := names(res); len(got) == 0 || got[0] != "slack/send_message" {
		t.Errorf("+slack send a message: %v", got)
	}
	// The same words without + reach other servers.
	res = discover(t, r, retriever.Request{Caller: user, Query: "send", TopK: 10})
	if got := names(res); !slices.Contains(got, "github/send_invite") {
		t.Errorf("send: %v", got)
	}
	// An intent's +word narrows that intent only.
	res = discover(t, r, retriever.Request{Caller: user, Intents: []string{"+github send", "post a message to a channel"}, TopK: 10})
	for _, s := range res.Tools {
		if slices.Contains(s.Intents, 0) && s.Card.Server != "github" {
			t.Errorf("intent 0 (+github) reached %s/%s", s.Card.Server, s.Card.Name)
		}
	}
	if got := names(res); !slices.Contains(got, "slack/send_message") {
		t.Errorf("intent 1 was narrowed too: %v", got)
	}
}

func TestSearchOperators(t *testing.T) {
	r := newRetriever(t, newStore(t, operatorCatalogue()...), nil)
	ctx := context.Background()
	user := caller("shop:read")
	rows, next, err := r.Search(ctx, user, "select:mail/send_email,payroll/run_payroll,jira/search,nope/x", 1, "")
	if err != nil {
		t.Fatal(err)
	}
	if got := summaryNames(rows); !slices.Equal(got, []string{"mail/send_email"}) || next == "" {
		t.Fatalf("first page: %v, next %q", got, next)
	}
	rows, next, err = r.Search(ctx, user, "select:mail/send_email,payroll/run_payroll,jira/search,nope/x", 1, next)
	if err != nil {
		t.Fatal(err)
	}
	if got := summaryNames(rows); !slices.Equal(got, []string{"jira/search"}) || next != "" {
		t.Fatalf("second page: %v, next %q", got, next)
	}
	rows, _, err = r.Search(ctx, user, "+slack", 20, "")
	if err != nil {
		t.Fatal(err)
	}
	if got := sorted(summaryNames(rows)); !slices.Equal(got, []string{"mail/send_email", "slack/list_channels", "slack/send_message"}) {
		t.Errorf("+slack: %v", got)
	}
	_, _, err = r.Search(ctx, user, "select:", 20, "")
	wantInvalid(t, err, "query")
}
