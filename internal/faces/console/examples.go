package console

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/seed0cff8200/cardex/cards"
	"github.com/seed0cff8200/cardex/internal/access/audittrail"
	"github.com/seed0cff8200/cardex/internal/sources/enrich"
)

// examplesData is the search-examples section of a card's page.
type examplesData struct {
	Source *cards.ExamplesSource
	Stale  bool
	Person bool
	// Text is the examples one per line, for the edit box.
	Text string
	// CanEnrich: the server runs an enrichment worker (serve --enrich-url)
	// and the examples are not a person's.
	CanEnrich bool
	Model     string
}

func (c *Console) examplesOf(cd *cards.Card) examplesData {
	d := examplesData{Source: cd.ExamplesSource, Stale: cd.ExamplesStale(), Text: strings.Join(cd.SearchExamples, "\n")}
	d.Person = cd.ExamplesSource != nil && cd.ExamplesSource.Author == cards.AuthorPerson && len(cd.SearchExamples) > 0
	if c.cfg.Enrichment != nil {
		d.Model = c.cfg.Enrichment.Status().Model
		d.CanEnrich = !d.Person && cd.Status != cards.StatusRevoked
	}
	return d
}

// writeExamples replaces a card's search examples with the ones typed
// (one per line), as a person's, or removes them (action=remove). A
// person's examples are never replaced by a model's.
func (c *Console) writeExamples(w http.ResponseWriter, r *http.Request, s *session) {
	remove := r.PostFormValue("action") == "remove"
	var typed []string
	for _, line := range strings.Split(r.PostFormValue("examples"), "\n") {
		if line = strings.TrimSpace(line); line != "" {
			typed = append(typed, line)
		}
	}
	what := "search examples"
	if remove {
		what = "search examples removed:"
	}
	c.write(w, r, s, what, func(cd *cards.Card) error {
		if !remove && len(typed) == 0 {
			return cards.Invalid("search_examples", "is empty: write one request per line, or remove them")
		}
		if remove {
			typed = nil // a source with no examples clears them
		}
		cd.SearchExamples = typed
		cd.ExamplesSource = &cards.ExamplesSource{Author: cards.AuthorPerson}
		return nil
	})
}

// enrichCard asks the server's enrichment worker for a fresh set of a
// card's search examples and writes them (with the card's version, like
// every write of the worker).
func (c *Console) enrichCard(w http.ResponseWriter, r *http.Request, s *session) {
	k, err := keyOf(r)
	if err != nil {
		c.writeFailed(w, r, s, err)
		return
	}
	if c.cfg.Enrichment == nil {
		c.writeFailed(w, r, s, cards.Invalid("enrichment", "this server has no enrichment endpoint (start it with --enrich-url and --enrich-model)"))
		return
	}
	principal := s.Catalog.Name
	release, err := c.limitWrite(principal)
	if err != nil {
		c.writeFailed(w, r, s, err)
		return
	}
	defer release()
	model := c.cfg.Enrichment.Status().Model
	entry := audittrail.Entry{Type: audittrail.TypeCatalogWrite, Method: "PutCards", Principal: principal, Tenant: k.Tenant, Server: k.Server, Name: k.Name,
		Detail: fmt.Sprintf("console: search examples by model %s (prompt %s)", model, enrich.PromptVersion)}
	it, err := c.cfg.Enrichment.EnrichNow(r.Context(), k)
	if err != nil {
		entry.Outcome, entry.Detail = "failed", entry.Detail+": nothing written: "+err.Error()
		c.audit(entry)
		if !errors.Is(err, cards.ErrInvalid) && !errors.Is(err, cards.ErrNotFound) && !errors.Is(err, cards.ErrConflict) {
			// The model's failure is not the console's: say it as it is.
			err = cards.Invalid("enrichment", "%s", strings.TrimPrefix(err.Error(), "enrich "+k.String()+": "))
		}
		c.writeFailed(w, r, s, err)
		return
	}
	entry.Outcome, entry.AfterVersion = it.Outcome, it.Version
	c.audit(entry)
	c.written(w, r, k, fmt.Sprintf("search examples by %s: %s, version %s", model, strings.ReplaceAll(it.Outcome, "_", " "), strconv.FormatInt(it.Version, 10)))
}
