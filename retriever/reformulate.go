package retriever

import (
	"strings"
	"unicode"
)

// Confidence thresholds: a ranking is low-confidence when its best match
// covers less than MinCoverage of the query's terms lexically AND its
// semantic similarity is under MinCosine. The cosine threshold suits the
// built-in hashed embedder, where unrelated texts score about 0–0.1 and
// related ones 0.25 and more; set another with WithConfidence for another
// embedder.
const (
	DefaultMinCoverage = 0.5
	DefaultMinCosine   = 0.2
)

// WithConfidence sets the low-confidence thresholds.
func WithConfidence(minCoverage, minCosine float64) Option {
	return func(r *Retriever) { r.minCoverage, r.minCosine = minCoverage, minCosine }
}

func (r *Retriever) lowConfidence(fused []Fused) bool {
	if len(fused) == 0 {
		return true
	}
	best := fused[0]
	return best.Coverage < r.minCoverage && best.Semantic < r.minCosine
}

// intentSynonyms groups the words people and tool authors use for the same
// operation or object. It is generic English about tools, not about any
// catalogue, and is used only to reformulate low-confidence queries once.
var intentSynonyms = [][]string{
	{"get", "fetch", "retrieve", "read", "show", "view", "lookup", "look"},
	{"list", "enumerate", "browse", "all"},
	{"search", "find", "query", "lookup", "locate"},
	{"create", "add", "new", "make", "open", "register", "start"},
	{"update", "edit", "modify", "change", "set", "rename"},
	{"delete", "remove", "drop", "erase", "destroy", "purge"},
	{"cancel", "stop", "abort", "terminate", "revoke"},
	{"send", "post", "notify", "message", "email", "mail"},
	{"run", "execute", "launch", "trigger", "invoke"},
	{"download", "export", "save", "dump"},
	{"upload", "import", "attach", "load"},
	{"summarize", "summary", "digest", "overview", "recap"},
	{"translate", "translation", "language"},
	{"weather", "forecast", "temperature"},
	{"price", "cost", "quote", "rate", "fee"},
	{"money", "payment", "pay", "refund", "charge"},
	{"buy", "purchase", "order", "shop", "checkout"},
	{"package", "parcel", "shipment", "delivery", "track"},
	{"picture", "image", "photo", "graphic"},
	{"movie", "film", "video"},
	{"song", "music", "track", "audio"},
	{"job", "position", "vacancy", "career"},
	{"trip", "travel", "flight", "hotel", "booking"},
	{"bug", "issue", "ticket", "defect", "problem"},
	{"file", "document", "doc"},
	{"directory", "folder"},
	{"calendar", "meeting", "event", "schedule", "appointment"},
	{"user", "account", "profile", "member"},
	{"error", "exception", "failure", "crash"},
	{"stock", "share", "ticker", "market"},
	{"news", "headline", "article"},
	{"recipe", "cooking", "meal", "food"},
}

var synonymIndex = func() map[string][]string {
	idx := map[string][]string{}
	for _, group := range intentSynonyms {
		for _, w := range group {
			for _, o := range group {
				if o != w {
					idx[w] = append(idx[w], o)
				}
			}
		}
	}
	return idx
}()

// Reformulate expands a query with the intent synonyms of its words, once:
// the original words stay first, each synonym is added at most once. A
// query with nothing to expand is returned unchanged.
func Reformulate(q string) string {
	words := strings.FieldsFunc(strings.ToLower(SplitIdentifiers(q)), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	})
	seen := map[string]bool{}
	for _, w := range words {
		seen[w] = true
	}
	var extra []string
	for _, w := range words {
		for _, syn := range synonymIndex[w] {
			if !seen[syn] {
				seen[syn] = true
				extra = append(extra, syn)
			}
		}
	}
	if len(extra) == 0 {
		return q
	}
	return q + " " + strings.Join(extra, " ")
}
