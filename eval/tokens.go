package eval

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/tiktoken-go/tokenizer"

	"github.com/seed0cff8200/cardex/cards"
)

// Tokenizer counts the tokens of a text.
type Tokenizer interface {
	// Encoding names the vocabulary, e.g. "o200k_base".
	Encoding() string
	Count(text string) (int, error)
}

// DefaultEncoding is the BPE vocabulary token savings are counted with:
// o200k_base, the encoding of OpenAI's current models (GPT-4o, GPT-4.1,
// o-series, GPT-5).
const DefaultEncoding = "o200k_base"

// Encodings lists the vocabularies NewBPE accepts.
var Encodings = []string{"o200k_base", "cl100k_base"}

// NewBPE returns a byte-pair-encoding tokenizer for an encoding name
// (o200k_base or cl100k_base). The vocabulary is compiled into the binary
// (github.com/tiktoken-go/tokenizer), so nothing is downloaded at run time;
// counts equal those of OpenAI's tiktoken for the same encoding.
func NewBPE(encoding string) (Tokenizer, error) {
	var enc tokenizer.Encoding
	switch encoding {
	case "", "o200k_base":
		enc = tokenizer.O200kBase
	case "cl100k_base":
		enc = tokenizer.Cl100kBase
	default:
		return nil, fmt.Errorf("token encoding %q: use o200k_base or cl100k_base", encoding)
	}
	c, err := tokenizer.Get(enc)
	if err != nil {
		return nil, fmt.Errorf("token encoding %s: %w", enc, err)
	}
	c.SetErrorMode(tokenizer.ErrorModeReplace)
	return bpe{c}, nil
}

type bpe struct{ c tokenizer.Codec }

func (b bpe) Encoding() string { return b.c.GetName() }

func (b bpe) Count(text string) (int, error) { return b.c.Count(text) }

// DefinitionMethod says what is counted for one tool.
const DefinitionMethod = `BPE tokens of the tool definition a model receives: compact JSON {"name", "description", "input_schema"} (bare tool name, the dataset's full description, the input schema in canonical form; input_schema left out where the tool has none)`

// Definition returns the JSON a model receives for one tool:
// {"name", "description", "input_schema"}, compact, HTML characters not
// escaped, the schema in canonical form (keys sorted), and input_schema
// left out when the tool has none.
func Definition(t *Tool) ([]byte, error) {
	def := struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		InputSchema json.RawMessage `json:"input_schema,omitempty"`
	}{Name: t.BareName(), Description: t.Description}
	if t.HasSchema() {
		s, err := cards.CanonicalJSON(t.InputSchema)
		if err != nil {
			return nil, fmt.Errorf("tool %s: input_schema: %w", t.Name, err)
		}
		def.InputSchema = s
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(def); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// TokenReport compares what a shortlist costs with shipping every tool
// definition of the catalogue up front.
type TokenReport struct {
	Encoding        string  `json:"encoding"`
	Method          string  `json:"method"`
	Tools           int     `json:"tools"`
	ToolsWithSchema int     `json:"tools_with_schema"`
	CatalogTokens   int     `json:"catalog_tokens"`
	MeanToolTokens  float64 `json:"mean_tool_tokens"`
	// ApproxCatalogTokens is the service's own estimate, ceil(bytes/4) per
	// definition, for comparison with the real count.
	ApproxCatalogTokens int             `json:"approx_catalog_tokens"`
	Shortlists          []ShortlistCost `json:"shortlists"`
	perTool             map[string]int  // label → tokens
}

// ShortlistCost is the cost of a K-tool shortlist.
type ShortlistCost struct {
	K int `json:"k"`
	// Tokens is the mean over queries of the tokens of the first K tools of
	// the hybrid shortlist (the service's default), or K × MeanToolTokens when the dataset has
	// no queries (Source says which).
	Tokens float64 `json:"tokens"`
	Source string  `json:"source"`
	// Saved is 1 − Tokens/CatalogTokens; Factor is CatalogTokens/Tokens.
	Saved  float64 `json:"saved"`
	Factor float64 `json:"factor"`
}

// CountCatalog counts every tool definition of a dataset.
func CountCatalog(d *Dataset, tk Tokenizer) (*TokenReport, error) {
	r := &TokenReport{Encoding: tk.Encoding(), Method: DefinitionMethod, Tools: len(d.Tools), perTool: make(map[string]int, len(d.Tools))}
	for i := range d.Tools {
		t := &d.Tools[i]
		def, err := Definition(t)
		if err != nil {
			return nil, err
		}
		n, err := tk.Count(string(def))
		if err != nil {
			return nil, fmt.Errorf("tool %s: count tokens: %w", t.Name, err)
		}
		if t.HasSchema() {
			r.ToolsWithSchema++
		}
		r.perTool[t.Name] = n
		r.CatalogTokens += n
		r.ApproxCatalogTokens += (len(def) + 3) / 4
	}
	r.MeanToolTokens = float64(r.CatalogTokens) / float64(len(d.Tools))
	return r, nil
}

// ShortlistKs are the shortlist sizes token savings are reported for.
var ShortlistKs = []int{3, 5, 10}

// addShortlists fills Shortlists from ranked label lists (one per query),
// or from the mean tool cost when there are none.
func (r *TokenReport) addShortlists(ranked [][]string, mode string) {
	r.Shortlists = r.Shortlists[:0]
	for _, k := range ShortlistKs {
		c := ShortlistCost{K: k}
		if len(ranked) == 0 {
			c.Tokens = float64(min(k, r.Tools)) * r.MeanToolTokens
			c.Source = fmt.Sprintf("%d × mean tool (no queries)", k)
		} else {
			total := 0
			for _, list := range ranked {
				for _, name := range list[:min(k, len(list))] {
					total += r.perTool[name]
				}
			}
			c.Tokens = float64(total) / float64(len(ranked))
			c.Source = fmt.Sprintf("mean of %d %s shortlists", len(ranked), mode)
		}
		if r.CatalogTokens > 0 {
			c.Saved = 1 - c.Tokens/float64(r.CatalogTokens)
		}
		if c.Tokens > 0 {
			c.Factor = float64(r.CatalogTokens) / c.Tokens
		}
		r.Shortlists = append(r.Shortlists, c)
	}
}
