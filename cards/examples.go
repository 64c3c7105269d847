package cards

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
)

// Search examples are requests a tool serves, written by a person or by a
// language model at registration (enrichment). They are searched and
// embedded but never shown to an agent, so they cost no prompt tokens.
//
// The put rules (PlanPut, shared by every store):
//
//   - A card that states no examples (none, and no source) keeps the stored
//     ones with their source: re-applying a card file written before
//     enrichment does not undo it. Enrichment is separate from authoring.
//   - A card that states examples (some, or a source) replaces the stored
//     ones. An empty list with a source clears them (the source goes too:
//     a card without examples has none).
//   - Except: examples whose source is a model never replace a person's.
//     The put keeps the person's examples (and their source), writes the
//     rest of the card, and says so (PutResult.ExamplesKept).

// Search-example bounds and the authors of examples.
const (
	MaxSearchExamples    = 32  // examples per card
	MaxSearchExampleLen  = 200 // code points per example
	MaxExamplesSourceLen = 128 // code points of search_examples_source.model and .prompt_version

	AuthorPerson = "person"
	AuthorModel  = "model"
)

// ExamplesSource is the provenance of a card's search examples.
type ExamplesSource struct {
	Author        string `json:"author"`                   // AuthorPerson or AuthorModel
	Model         string `json:"model,omitempty"`          // model id when Author is AuthorModel
	PromptVersion string `json:"prompt_version,omitempty"` // enrichment prompt version when Author is AuthorModel
	// CardHash is the card's ExamplesBasisHash when the examples were
	// written; filled at registration when empty.
	CardHash string `json:"card_hash,omitempty"`
}

var cardHashRule = regexp.MustCompile(`^[0-9a-f]{1,64}$`)

// ExamplesBasisHash is a stable hash of the card text examples are written
// from: server, name, summary, description, the input schema's parameter
// names and descriptions, and when_not_to_use. It ignores the examples
// themselves, aliases, tags, scopes, status and versions, so examples go
// stale exactly when what they describe changes. Hex, 32 characters.
func (c *Card) ExamplesBasisHash() string {
	basis := struct {
		Server       string     `json:"server"`
		Name         string     `json:"name"`
		Summary      string     `json:"summary"`
		Description  string     `json:"description"`
		Params       [][]string `json:"params"`
		WhenNotToUse string     `json:"when_not_to_use"`
	}{c.Server, c.Name, c.Summary, c.Description, SchemaParamTexts(c.InputSchema), c.WhenNotToUse}
	b, _ := json.Marshal(basis)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16])
}

// ExamplesStale reports whether the card has examples written from other
// card text than it has now.
func (c *Card) ExamplesStale() bool {
	return len(c.SearchExamples) > 0 && (c.ExamplesSource == nil || c.ExamplesSource.CardHash != c.ExamplesBasisHash())
}

// SchemaParamTexts lists the parameters of a JSON schema as [path,
// description] pairs: top-level and nested property names (dotted paths,
// to a bounded depth), in path order, with their sanitised descriptions.
// A schema that is not an object yields nothing.
func SchemaParamTexts(raw json.RawMessage) [][]string {
	if len(raw) == 0 {
		return nil
	}
	var root any
	if json.Unmarshal(raw, &root) != nil {
		return nil
	}
	var out [][]string
	var walk func(v any, prefix string, depth int)
	walk = func(v any, prefix string, depth int) {
		m, ok := v.(map[string]any)
		if !ok || depth > 4 || len(out) >= 256 {
			return
		}
		if props, ok := m["properties"].(map[string]any); ok {
			for _, name := range slices.Sorted(maps.Keys(props)) {
				p := prefix + name
				desc := ""
				if pm, ok := props[name].(map[string]any); ok {
					desc, _ = pm["description"].(string)
				}
				out = append(out, []string{p, Sanitize(desc)})
				walk(props[name], p+".", depth+1)
			}
		}
		if items, ok := m["items"]; ok {
			walk(items, prefix, depth+1)
		}
	}
	walk(root, "", 0)
	return out
}

// normalizeExamples sanitises and bounds the examples and their source.
// Examples without a source are a person's; a source without a card hash
// gets the card's (the examples were written from the card as it is).
func normalizeExamples(c *Card) error {
	var err error
	if c.SearchExamples, err = textList("search_examples", c.SearchExamples, MaxSearchExamples, MaxSearchExampleLen, false); err != nil {
		return err
	}
	if c.ExamplesSource == nil {
		if len(c.SearchExamples) > 0 {
			c.ExamplesSource = &ExamplesSource{Author: AuthorPerson}
		}
	} else {
		s := *c.ExamplesSource
		c.ExamplesSource = &s
	}
	s := c.ExamplesSource
	if s == nil {
		return nil
	}
	s.Author = strings.TrimSpace(s.Author)
	s.Model, s.PromptVersion = Sanitize(s.Model), Sanitize(s.PromptVersion)
	s.CardHash = strings.TrimSpace(s.CardHash)
	switch s.Author {
	case AuthorPerson:
		if s.Model != "" || s.PromptVersion != "" {
			return Invalid("search_examples_source", "a person's examples name no model or prompt_version")
		}
	case AuthorModel:
		if s.Model == "" {
			return Invalid("search_examples_source.model", "is required when the author is %q", AuthorModel)
		}
	default:
		return Invalid("search_examples_source.author", "%q is not one of %s, %s", Cut(s.Author, 40), AuthorPerson, AuthorModel)
	}
	if err := maxLen("search_examples_source.model", s.Model, MaxExamplesSourceLen); err != nil {
		return err
	}
	if err := maxLen("search_examples_source.prompt_version", s.PromptVersion, MaxExamplesSourceLen); err != nil {
		return err
	}
	if s.CardHash == "" {
		s.CardHash = c.ExamplesBasisHash()
	} else if !cardHashRule.MatchString(s.CardHash) {
		return Invalid("search_examples_source.card_hash", "%q must be lower-case hex, at most 64 characters", Cut(s.CardHash, 80))
	}
	return nil
}

// stated reports whether the card says anything about its examples.
func (c *Card) examplesStated() bool { return len(c.SearchExamples) > 0 || c.ExamplesSource != nil }

// mergeExamples applies the put rules for examples (see the top of this
// file) to c, a normalised card about to be written over stored (nil when
// there is none). It reports whether a model's examples gave way to a
// person's.
func mergeExamples(c, stored *Card) (kept bool) {
	switch {
	case !c.examplesStated():
		if stored != nil {
			c.SearchExamples = cloneStrings(stored.SearchExamples)
			c.ExamplesSource = stored.ExamplesSource.clone()
		}
	case c.ExamplesSource != nil && c.ExamplesSource.Author == AuthorModel && stored != nil &&
		len(stored.SearchExamples) > 0 && stored.ExamplesSource != nil && stored.ExamplesSource.Author == AuthorPerson:
		c.SearchExamples = cloneStrings(stored.SearchExamples)
		c.ExamplesSource = stored.ExamplesSource.clone()
		kept = true
	}
	if len(c.SearchExamples) == 0 {
		c.SearchExamples, c.ExamplesSource = nil, nil
	}
	return kept
}

func (s *ExamplesSource) clone() *ExamplesSource {
	if s == nil {
		return nil
	}
	out := *s
	return &out
}

// String renders the source for people: "person", or "model gpt-4o-mini
// (prompt v1)".
func (s *ExamplesSource) String() string {
	if s == nil {
		return ""
	}
	if s.Author != AuthorModel {
		return s.Author
	}
	out := fmt.Sprintf("%s %s", s.Author, s.Model)
	if s.PromptVersion != "" {
		out += " (prompt " + s.PromptVersion + ")"
	}
	return out
}
