package retriever

import (
	"encoding/json"

	"github.com/seed0cff8200/cardex/cards"
)

// TokenMethod names how token estimates are counted.
const TokenMethod = "approx: ceil(bytes/4) of the tool definition JSON {name, description, input_schema}"

// definitionTokens estimates what shipping one tool definition to a model
// costs: the JSON an orchestrator would put in the prompt, at about four
// bytes a token.
func definitionTokens(c *cards.Card) int {
	def := struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		InputSchema json.RawMessage `json:"input_schema,omitempty"`
	}{c.Name, c.Summary, c.InputSchema}
	b, _ := json.Marshal(def)
	return (len(b) + 3) / 4
}
