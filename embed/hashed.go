package embed

import (
	"context"
	"math"
	"strconv"
	"sync"
	"unicode"
	"unicode/utf8"
)

// DefaultDim is the dimension of the built-in hashed embedder when none is
// given.
const DefaultDim = 384

// hashedVersion names the feature set of Hashed. Bump it whenever the
// tokenizer, stemmer, stop words, feature kinds, weights or hashing change:
// it is part of Model, so a change forces a re-embedding instead of silently
// comparing vectors of two different feature spaces.
const hashedVersion = "v1"

// Per-feature-kind weights. Words carry most of the signal; bigrams reward
// shared phrases; character n-grams give partial credit to morphological
// variants and typos (there are many of them per word, hence the small
// weight).
const (
	weightUnigram = 1.0
	weightBigram  = 0.6
	weightChar    = 0.2
)

// Feature-kind tags, hashed ahead of the feature text so that the word "ing"
// and the character trigram "ing" never share a bucket by construction.
const (
	tagUnigram byte = 'u'
	tagBigram  byte = 'b'
	tagChar    byte = 'c'
)

const (
	charNGramMin = 3
	charNGramMax = 5
)

// Hashed is the built-in, deterministic, dependency-free Embedder. It needs
// no model download and is honest about what it is: a lexical-semantic
// embedding of hashed features, not a language model. Texts that share
// words, stems, phrases or word fragments end up close; synonyms with no
// surface overlap do not.
//
// Features of a text:
//   - word unigrams: the text is split on every character that is not a
//     letter or digit (so `_`, `-`, `.` and spaces separate words) and on
//     camelCase boundaries (`createIssue` → create, issue; `HTTPServer` →
//     http, server), lower-cased, and reduced by a light English stemmer
//     (plural, -ies, -es, -ed, -ing and a final -e are stripped, so
//     "create", "creates", "created" and "creating" agree). A small built-in
//     list of English stop words is dropped;
//   - word bigrams of consecutive remaining (stemmed) words;
//   - character n-grams of length 3 to 5 of each remaining (lower-cased,
//     unstemmed) word with boundary markers, as in "<issue>".
//
// If every word of a text is a stop word, the stop words are kept, so that a
// text such as "it" still has a vector.
//
// Every feature is hashed with 64-bit FNV-1a into Dim buckets with the signed
// hashing trick (the top bit of the hash chooses the sign), weighted by its
// kind and by a sublinear term frequency 1+ln(tf), and the vector is
// L2-normalised.
//
// A text with no words (the empty string, or only punctuation and spaces)
// gets the zero vector: its cosine similarity with any vector is 0, so it
// matches nothing rather than matching something arbitrary. It is the only
// vector Hashed returns that is not of unit length.
//
// A Hashed is immutable and safe for concurrent use.
type Hashed struct {
	dim   int
	model string
	// scratch is the featurizers of finished Embed calls, reused by the
	// next ones (a query's embedding is on every discovery's path).
	scratch sync.Pool // *featurizer
}

var _ Embedder = (*Hashed)(nil)

// NewHashed returns the built-in hashed embedder with dim buckets. A dim of
// zero or less means DefaultDim.
func NewHashed(dim int) *Hashed {
	if dim <= 0 {
		dim = DefaultDim
	}
	return &Hashed{
		dim:   dim,
		model: "cardex-hashed-" + hashedVersion + "-" + strconv.Itoa(dim),
	}
}

// Model returns a stable id that encodes the feature version and the
// dimension, for example "cardex-hashed-v1-384".
func (h *Hashed) Model() string { return h.model }

// Dim returns the length of every vector.
func (h *Hashed) Dim() int { return h.dim }

// Embed returns one vector per text, in order: unit length, or the zero
// vector for a text with no words. It fails only when ctx is done.
func (h *Hashed) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out := make([][]float32, len(texts))
	// One backing array for all vectors: one allocation instead of len(texts).
	flat := make([]float32, len(texts)*h.dim)
	acc := make([]float64, h.dim)
	fx, _ := h.scratch.Get().(*featurizer)
	if fx == nil {
		fx = &featurizer{}
	}
	defer func() {
		clear(fx.words) // the texts' words
		h.scratch.Put(fx)
	}()
	for i, t := range texts {
		if i > 0 && i%64 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		clear(acc)
		fx.accumulate(t, acc)
		v := flat[i*h.dim : (i+1)*h.dim : (i+1)*h.dim]
		normalizeInto(v, acc)
		out[i] = v
	}
	return out, nil
}

// normalizeInto writes acc / ‖acc‖ into v; a zero acc leaves v zero.
func normalizeInto(v []float32, acc []float64) {
	var ss float64
	for _, x := range acc {
		ss += x * x
	}
	if ss == 0 {
		return
	}
	inv := 1 / math.Sqrt(ss)
	for j, x := range acc {
		v[j] = float32(x * inv)
	}
}

// featurizer holds scratch space reused across the texts of an Embed call
// and across calls (Hashed.scratch).
type featurizer struct {
	words []string // lower-cased words in text order
	keep  []bool   // keep[i]: words[i] is used (not a dropped stop word)
	// order holds the text's feature hashes in first-seen order
	// (determinism), counts their weights and counts, index for index;
	// slots finds a hash's index by open addressing (1 + the index, 0:
	// free), its length a power of two at least twice the features.
	order  []uint64
	counts []featureCount
	slots  []int32
	marked []byte
}

type featureCount struct {
	weight float64
	tf     int
}

// accumulate adds the weighted features of text to acc.
func (f *featurizer) accumulate(text string, acc []float64) {
	f.words = splitWords(text, f.words[:0])
	f.accumulateWords(acc)
}

// accumulateWords adds the weighted features of the words in f.words (a
// text's, splitWords) to acc.
func (f *featurizer) accumulateWords(acc []float64) {
	if len(f.words) == 0 {
		return
	}
	f.order, f.counts = f.order[:0], f.counts[:0]
	clear(f.slots)

	f.keep = f.keep[:0]
	anyContent := false
	for _, w := range f.words {
		c := !stopWords[w]
		f.keep = append(f.keep, c)
		anyContent = anyContent || c
	}

	prev := ""
	for i, w := range f.words {
		if anyContent && !f.keep[i] {
			continue
		}
		s := stem(w)
		f.add(hashFeature(tagUnigram, s, ""), weightUnigram)
		if prev != "" {
			f.add(hashFeature(tagBigram, prev, s), weightBigram)
		}
		prev = s
		f.addCharNGrams(w)
	}

	dim := uint64(len(acc))
	for j, hv := range f.order {
		fc := f.counts[j]
		val := fc.weight // 1 + ln(1) is 1
		if fc.tf > 1 {
			val = fc.weight * (1 + math.Log(float64(fc.tf)))
		}
		if hv>>63 == 1 {
			val = -val
		}
		acc[hv%dim] += val
	}
}

func (f *featurizer) add(hv uint64, weight float64) {
	if 2*(len(f.order)+1) > len(f.slots) {
		f.grow()
	}
	mask := uint64(len(f.slots) - 1)
	for i := (hv ^ hv>>32) & mask; ; i = (i + 1) & mask {
		switch at := f.slots[i]; {
		case at == 0:
			f.order = append(f.order, hv)
			f.counts = append(f.counts, featureCount{weight: weight, tf: 1})
			f.slots[i] = int32(len(f.order))
			return
		case f.order[at-1] == hv:
			f.counts[at-1].tf++
			return
		}
	}
}

// grow doubles the slots (at least 256) and places the hashes held again.
func (f *featurizer) grow() {
	f.slots = make([]int32, max(256, 2*len(f.slots)))
	mask := uint64(len(f.slots) - 1)
	for x, hv := range f.order {
		i := (hv ^ hv>>32) & mask
		for f.slots[i] != 0 {
			i = (i + 1) & mask
		}
		f.slots[i] = int32(x + 1)
	}
}

// addCharNGrams adds the character n-grams (by rune) of "<w>".
func (f *featurizer) addCharNGrams(w string) {
	f.marked = append(append(append(f.marked[:0], '<'), w...), '>')
	m := f.marked
	// Byte offsets of rune starts, plus len(m) as a sentinel.
	var offBuf [64]int
	offs := offBuf[:0]
	for i := 0; i < len(m); {
		offs = append(offs, i)
		_, size := utf8.DecodeRune(m[i:])
		i += size
	}
	offs = append(offs, len(m))
	runes := len(offs) - 1
	for n := charNGramMin; n <= charNGramMax; n++ {
		if n > runes {
			break
		}
		for start := 0; start+n <= runes; start++ {
			f.add(hashBytes(tagChar, m[offs[start]:offs[start+n]]), weightChar)
		}
	}
}

const (
	fnvOffset64 = 14695981039346656037
	fnvPrime64  = 1099511628211
)

// hashFeature is FNV-1a 64 over tag, a and, when b is non-empty, a space
// and b (the bigram "a b"), without building the string.
func hashFeature(tag byte, a, b string) uint64 {
	h := uint64(fnvOffset64)
	h ^= uint64(tag)
	h *= fnvPrime64
	for i := 0; i < len(a); i++ {
		h ^= uint64(a[i])
		h *= fnvPrime64
	}
	if b != "" {
		h ^= ' '
		h *= fnvPrime64
		for i := 0; i < len(b); i++ {
			h ^= uint64(b[i])
			h *= fnvPrime64
		}
	}
	return h
}

// hashBytes is FNV-1a 64 over tag and p.
func hashBytes(tag byte, p []byte) uint64 {
	h := uint64(fnvOffset64)
	h ^= uint64(tag)
	h *= fnvPrime64
	for _, c := range p {
		h ^= uint64(c)
		h *= fnvPrime64
	}
	return h
}

// splitWords appends the lower-cased words of text to dst. Words are maximal
// runs of letters and digits, further split at camelCase boundaries: a lower
// case letter or digit followed by an upper case letter ("createIssue"), and
// the last upper case letter of an acronym that starts a new word
// ("HTTPServer" → "HTTP", "Server").
func splitWords(text string, dst []string) []string {
	var buf []byte
	var prev rune // previous rune inside the current word, 0 at word start
	flush := func() {
		if len(buf) > 0 {
			dst = append(dst, string(buf))
			buf = buf[:0]
		}
		prev = 0
	}
	for i := 0; i < len(text); {
		r, size := utf8.DecodeRuneInString(text[i:])
		i += size
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) {
			flush()
			continue
		}
		if prev != 0 && unicode.IsUpper(r) {
			if unicode.IsLower(prev) || unicode.IsDigit(prev) {
				flush()
			} else if unicode.IsUpper(prev) {
				// Acronym followed by a capitalised word: split before r.
				next, _ := utf8.DecodeRuneInString(text[i:])
				if unicode.IsLower(next) {
					flush()
				}
			}
		}
		buf = utf8.AppendRune(buf, unicode.ToLower(r))
		prev = r
	}
	flush()
	return dst
}

// stem is a light, deterministic English suffix stripper. It is far simpler
// than Porter's: it only has to map the usual inflections of one word onto
// one form, and the character n-grams catch much of what it misses.
func stem(w string) string {
	n := len(w)
	if n <= 3 || !isASCIILower(w) {
		return w
	}
	switch {
	case hasSuffix(w, "ies") && n > 4:
		w = w[:n-3] + "y" // queries → query
	case hasSuffix(w, "sses"):
		w = w[:n-2] // addresses → address
	case hasSuffix(w, "xes"), hasSuffix(w, "zes"), hasSuffix(w, "ches"), hasSuffix(w, "shes"):
		w = w[:n-2] // boxes → box, matches → match
	case hasSuffix(w, "ss"), hasSuffix(w, "us"), hasSuffix(w, "is"):
		// address, status, analysis: not plurals
	case hasSuffix(w, "s"):
		w = w[:n-1] // issues → issue
	case hasSuffix(w, "ied") && n > 4:
		w = w[:n-3] + "y" // applied → apply
	case hasSuffix(w, "eed"):
		// need, feed
	case hasSuffix(w, "ed") && hasVowel(w[:n-2]) && n-2 >= 3:
		w = undouble(w[:n-2]) // shipped → ship, created → creat
	case hasSuffix(w, "ing") && hasVowel(w[:n-3]) && n-3 >= 3:
		w = undouble(w[:n-3]) // running → run, creating → creat
	}
	// Drop a final silent e so that "create" meets "creat(ed|ing)".
	if len(w) > 4 && w[len(w)-1] == 'e' && w[len(w)-2] != 'e' {
		w = w[:len(w)-1]
	}
	return w
}

func hasSuffix(s, suf string) bool {
	return len(s) >= len(suf) && s[len(s)-len(suf):] == suf
}

func isASCIILower(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 'a' || s[i] > 'z' {
			return false
		}
	}
	return true
}

func isVowel(c byte) bool {
	return c == 'a' || c == 'e' || c == 'i' || c == 'o' || c == 'u' || c == 'y'
}

func hasVowel(s string) bool {
	for i := 0; i < len(s); i++ {
		if isVowel(s[i]) {
			return true
		}
	}
	return false
}

// undouble removes one of a doubled final consonant ("shipp" → "ship"),
// except l, s and z, which English doubles in base forms (bill, pass, buzz).
func undouble(s string) string {
	n := len(s)
	if n >= 2 && s[n-1] == s[n-2] && !isVowel(s[n-1]) {
		switch s[n-1] {
		case 'l', 's', 'z':
		default:
			return s[:n-1]
		}
	}
	return s
}

// stopWords are dropped from the features of a text unless it has nothing
// else. Deliberately short: words such as "new", "all", "get" or "not"
// carry meaning in tool descriptions and are kept.
var stopWords = map[string]bool{
	"a": true, "an": true, "and": true, "are": true, "as": true, "at": true,
	"be": true, "been": true, "but": true, "by": true, "can": true,
	"could": true, "do": true, "does": true, "for": true, "from": true,
	"had": true, "has": true, "have": true, "he": true, "her": true,
	"his": true, "how": true, "i": true, "if": true, "in": true, "into": true,
	"is": true, "it": true, "its": true, "me": true, "my": true, "of": true,
	"on": true, "or": true, "our": true, "please": true, "she": true,
	"should": true, "so": true, "some": true, "that": true, "the": true,
	"their": true, "them": true, "then": true, "there": true, "these": true,
	"they": true, "this": true, "those": true, "to": true, "us": true,
	"was": true, "we": true, "were": true, "what": true, "when": true,
	"where": true, "which": true, "while": true, "who": true, "will": true,
	"with": true, "would": true, "you": true, "your": true,
}
