package console_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/seed0cff8200/cardex/internal/faces/console"
	"github.com/seed0cff8200/cardex/internal/sources/enrich"
	"github.com/seed0cff8200/cardex/internal/testkit/chatfake"
	pb "github.com/seed0cff8200/cardex/proto/cardex/v1"
)

// withEnrichment gives the console an enrichment worker that asks a local
// OpenAI-compatible chat server (the worker does not run in the
// background: only the console's button asks it).
func withEnrichment(model *chatfake.Server) func(*harness, *console.Config) {
	return func(h *harness, cfg *console.Config) {
		chat, err := enrich.NewChat(enrich.ChatConfig{BaseURL: model.URL, Model: "fake-llm"})
		if err != nil {
			panic(err)
		}
		e, err := enrich.NewEnricher(chat, nil, 0, nil)
		if err != nil {
			panic(err)
		}
		w, err := enrich.NewWorker(enrich.WorkerConfig{Store: h.store, Enricher: e})
		if err != nil {
			panic(err)
		}
		cfg.Enrichment = w
	}
}

// TestConsoleSearchExamples: a card's page shows its search examples with
// their provenance and staleness; a catalogue writer asks the server's
// model for new ones, edits them (they become a person's, which the model
// button then leaves alone) and removes them; limits are named.
func TestConsoleSearchExamples(t *testing.T) {
	model := chatfake.New(t)
	h := newHarness(t, false, withEnrichment(model))
	u := h.user(t, newBrowser(t), catalogToken)
	const page = "/console/cards/acme/billing/issue_refund"

	if st := u.open(page); st != 200 {
		t.Fatalf("HTTP %d", st)
	}
	if u.text("#examples-none") != "None yet." || !strings.Contains(u.text("#enrich-form button"), "fake-llm") {
		t.Fatalf("a card without examples: %q / %q", u.text("#examples"), u.text("#enrich-form"))
	}

	// The model writes them.
	if st := u.click("#enrich-form button"); st != 200 {
		t.Fatalf("enrich: HTTP %d: %s", st, u.text("#error"))
	}
	c := h.getCard(t, "acme", "billing", "issue_refund")
	if len(c.SearchExamples) != enrich.DefaultPhrases || c.SearchExamplesSource.GetAuthor() != "model" || c.SearchExamplesSource.GetModel() != "fake-llm" {
		t.Fatalf("after the button GetCard says %q, %v", c.SearchExamples, c.SearchExamplesSource)
	}
	if got, want := u.text("#notice"), fmt.Sprintf("search examples by fake-llm: written, version %d", c.Version); got != want {
		t.Errorf("notice %q, want %q", got, want)
	}
	if got := u.texts("#examples-list li"); !slices.Equal(got, c.SearchExamples) {
		t.Errorf("examples shown %q, GetCard says %q", got, c.SearchExamples)
	}
	if src := u.text("#examples-source"); !strings.Contains(src, "model fake-llm with prompt "+enrich.PromptVersion) || u.text("#examples-current") != "current" {
		t.Errorf("provenance shown: %q", src)
	}
	if model.Calls() != 1 {
		t.Errorf("%d model calls", model.Calls())
	}
	u.shot("card-search-examples")

	// The card's text changes elsewhere: the examples are stale.
	c.Summary = "Refund an invoice, fully or in part."
	c.SearchExamples, c.SearchExamplesSource = nil, nil // stating none keeps them
	if _, err := h.cat.PutCards(rpc(t, catalogToken), &pb.PutCardsRequest{Cards: []*pb.Card{c}}); err != nil {
		t.Fatal(err)
	}
	u.open(page)
	if u.text("#examples-stale") != "stale" || len(u.texts("#examples-list li")) != enrich.DefaultPhrases {
		t.Errorf("after a summary change: %q", u.text("#examples"))
	}

	// A person edits them: theirs now, and the model's button is gone.
	u.fill(map[string]string{"examples-text": "give the customer their money back\n\n  reverse a double charge  \n"})
	if st := u.click(`#examples-form button[value=save]`); st != 200 {
		t.Fatalf("save: HTTP %d: %s", st, u.text("#error"))
	}
	c = h.getCard(t, "acme", "billing", "issue_refund")
	if !slices.Equal(c.SearchExamples, []string{"give the customer their money back", "reverse a double charge"}) || c.SearchExamplesSource.GetAuthor() != "person" {
		t.Fatalf("after the edit GetCard says %q, %v", c.SearchExamples, c.SearchExamplesSource)
	}
	if u.text("#examples-source") != "Written by a person. current" || u.text("#enrich-form") != "" || !strings.Contains(u.text("#enrich-person"), "remove them first") {
		t.Errorf("a person's examples shown as %q; enrich form %q", u.text("#examples-source"), u.text("#enrich-form"))
	}
	// Forged, the button is refused; the person's examples stay.
	csrf := js[string](u, `document.querySelector("input[name=csrf]").value`)
	if st := u.forge(page+"/enrich", map[string]string{"csrf": csrf, "version": fmt.Sprint(c.Version)}); st != 400 {
		t.Errorf("the model's button over a person's examples: HTTP %d, want 400", st)
	}
	if now := h.getCard(t, "acme", "billing", "issue_refund"); !slices.Equal(now.SearchExamples, c.SearchExamples) || model.Calls() != 1 {
		t.Errorf("a person's examples changed: %q (%d model calls)", now.SearchExamples, model.Calls())
	}

	// Limits are named.
	u.open(page)
	u.fill(map[string]string{"examples-text": strings.Repeat("one more request\n", 1) + strings.Join(numbered(33), "\n")})
	if st := u.click(`#examples-form button[value=save]`); st != 400 || !strings.Contains(u.text("#error"), "search_examples") || !strings.Contains(u.text("#error"), "32") {
		t.Errorf("34 examples: HTTP %d: %q", st, u.text("#error"))
	}

	// Removed: none, and the model may write some again.
	u.open(page)
	if st := u.click("#examples-remove"); st != 200 {
		t.Fatalf("remove: HTTP %d: %s", st, u.text("#error"))
	}
	if c = h.getCard(t, "acme", "billing", "issue_refund"); len(c.SearchExamples) != 0 || c.SearchExamplesSource != nil {
		t.Errorf("after removing GetCard says %q, %v", c.SearchExamples, c.SearchExamplesSource)
	}
	if u.text("#examples-none") != "None yet." || u.text("#enrich-form button") == "" {
		t.Errorf("after removing: %q", u.text("#examples"))
	}

	// The catalogue shows the worker's status.
	u.open("/console/catalog?tenant=acme")
	if st := u.text("#enrichment-status"); !strings.Contains(st, "fake-llm") || !strings.Contains(st, "1 written") || !strings.Contains(st, "1 model calls") {
		t.Errorf("enrichment status %q", st)
	}
}

func numbered(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("request number %d", i)
	}
	return out
}
