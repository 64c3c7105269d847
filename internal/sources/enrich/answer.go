package enrich

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/seed0cff8200/cardex/cards"
)

// Limits of one phrase. The count and length match the card's own limits
// on search examples.
const (
	MaxPhrases   = 32  // cards.MaxSearchExamples
	MaxPhraseLen = 200 // cards.MaxSearchExampleLen, code points
	minPhraseLen = 3
	// maxParsed bounds the work on one answer: the text after any <think>
	// block is read up to this many bytes, and at most maxCandidates
	// phrases of it are checked. An honest answer is a small fraction.
	maxParsed     = 64 << 10
	maxCandidates = 4 * MaxPhrases
	// minLatinShare is the least share of a phrase's letters that must be
	// Latin: the prompt asks for English, and phrases in another script
	// would not match English requests anyway.
	minLatinShare = 0.8
)

// ErrNoPhrases is returned (wrapped) when an answer holds no acceptable
// phrase.
var ErrNoPhrases = errors.New("the answer holds no acceptable phrase")

// Rejected is a phrase of the answer that was refused, and why.
type Rejected struct {
	Phrase string `json:"phrase"`
	Reason string `json:"reason"`
}

var (
	// quotedRE finds JSON string literals, for answers cut short.
	quotedRE = regexp.MustCompile(`"((?:[^"\\]|\\.)*)"`)
	listRE   = regexp.MustCompile(`^\s*(?:[-*•]|\(?\d{1,2}[.):])\s+`)
	urlRE    = regexp.MustCompile(`(?i)[a-z][a-z0-9+.-]*://|\bwww\.|\b[a-z0-9-]+\.(?:com|org|net|io|ai|dev|app|xyz|ru|cn|info|biz|co)\b|[^\s@]+@[^\s@]+\.[a-z]{2,}`)
	// injectionRE matches what a search phrase never needs and an attempt
	// to steer the reader of the index does: instructions to a model, role
	// markers and chat-template tokens, and tool-selection commands.
	injectionRE = regexp.MustCompile(`(?i)` + strings.Join([]string{
		`\b(?:ignore|disregard|forget|override|bypass)\b.{0,40}\b(?:instructions?|prompts?|rules|guidelines|context|messages?|above|previous|prior)\b`,
		`\b(?:system|developer)\s+(?:prompt|message|instructions?)\b`,
		`\bnew\s+instructions?\b`,
		`\byou\s+(?:are|must|should|will)\s+(?:now|always|never)\b`,
		`\b(?:always|must|only)\s+(?:call|use|choose|select|pick|prefer|invoke|run)\b`,
		`\b(?:call|use|choose|select|pick|prefer|invoke)\s+this\s+(?:tool|function|api)\b`,
		`\bthis\s+(?:tool|function)\b`,
		`\b(?:jailbreak|prompt\s+injection|developer\s+mode|do\s+anything\s+now)\b`,
		`(?:^|\s)(?:system|assistant|user|tool)\s*:`,
		`<\|[^|]*\|>|\[/?INST\]|<</?SYS>>|###`,
	}, "|"))
	markupRE = regexp.MustCompile("[<>{}`\\\\]|\\[\\[|\\]\\]")
)

// ParsePhrases reads the phrases of a model's answer and keeps those that
// pass every rule, at most want (itself at most MaxPhrases). It reads
// {"phrases": [...]} (or an object with one list of strings, or a bare
// list), in a code fence or after a <think> block; an answer cut short
// keeps its complete strings; an answer in lines keeps its lines. Each
// phrase is sanitised like card text (control, zero-width and bidirectional
// characters removed, white space collapsed) and refused if it is too short
// or too long, holds a URL or an e-mail address, markup or code, an
// instruction to a model, or is mostly in a script other than Latin; a
// repeated phrase is dropped. It fails with ErrNoPhrases when none is left.
func ParsePhrases(content string, want int) ([]string, []Rejected, error) {
	want = min(max(want, 1), MaxPhrases)
	raw := extract(content)
	var out []string
	var rejected []Rejected
	if len(raw) > maxCandidates {
		rejected = append(rejected, Rejected{Phrase: fmt.Sprintf("(%d more)", len(raw)-maxCandidates),
			Reason: fmt.Sprintf("are past the first %d phrases of the answer, which are all that is read", maxCandidates)})
		raw = raw[:maxCandidates]
	}
	seen := map[string]bool{}
	for _, p := range raw {
		clean, reason := checkPhrase(p)
		if reason != "" {
			rejected = append(rejected, Rejected{Phrase: cards.Cut(cards.Sanitize(p), MaxPhraseLen), Reason: reason})
			continue
		}
		k := foldKey(clean)
		if seen[k] {
			rejected = append(rejected, Rejected{Phrase: clean, Reason: "repeats an earlier phrase"})
			continue
		}
		if len(out) == want {
			rejected = append(rejected, Rejected{Phrase: clean, Reason: fmt.Sprintf("more than the %d phrases asked for", want)})
			continue
		}
		seen[k] = true
		out = append(out, clean)
	}
	if len(out) == 0 {
		why := "the answer is empty"
		if len(rejected) > 0 {
			why = fmt.Sprintf("%d refused, the first because it %s", len(rejected), rejected[0].Reason)
		} else if strings.TrimSpace(content) != "" {
			why = "no phrase found in " + cards.Cut(strings.Join(strings.Fields(content), " "), 120)
		}
		return nil, rejected, fmt.Errorf("%w (%s)", ErrNoPhrases, why)
	}
	return out, rejected, nil
}

// extract finds the candidate phrases of an answer.
func extract(content string) []string {
	s := dropThinking(content)
	if len(s) > maxParsed {
		s = strings.ToValidUTF8(s[:maxParsed], "")
	}
	s = strings.TrimSpace(s)
	if i := strings.IndexAny(s, "{["); i >= 0 {
		dec := json.NewDecoder(strings.NewReader(s[i:]))
		var v any
		if dec.Decode(&v) == nil {
			if list, ok := stringList(v); ok {
				return list
			}
		}
		// Cut short or not quite JSON: the complete string literals after
		// the opening bracket of the list.
		body := s[i:]
		if j := strings.Index(body, "["); j >= 0 {
			body = body[j+1:]
		}
		var out []string
		for _, m := range quotedRE.FindAllStringSubmatch(body, -1) {
			var str string
			if json.Unmarshal([]byte(`"`+m[1]+`"`), &str) == nil {
				out = append(out, str)
			}
		}
		if len(out) > 0 {
			return out
		}
	}
	// Lines, without fences, numbering or bullets.
	var out []string
	for _, line := range strings.Split(s, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "```") {
			continue
		}
		out = append(out, listRE.ReplaceAllString(line, ""))
	}
	return out
}

// dropThinking removes the <think>…</think> blocks that reasoning models
// put before their answer (an unclosed one runs to the end).
func dropThinking(s string) string {
	for {
		i := strings.Index(s, "<think>")
		if i < 0 {
			return s
		}
		j := strings.Index(s[i:], "</think>")
		if j < 0 {
			return s[:i]
		}
		s = s[:i] + s[i+j+len("</think>"):]
	}
}

// stringList reads {"phrases": [...]}, an object whose one list value is a
// list of strings, or a bare list of strings.
func stringList(v any) ([]string, bool) {
	switch t := v.(type) {
	case []any:
		out := make([]string, 0, len(t))
		for _, x := range t {
			s, ok := x.(string)
			if !ok {
				return nil, false
			}
			out = append(out, s)
		}
		return out, true
	case map[string]any:
		if p, ok := t["phrases"]; ok {
			return stringList(p)
		}
		var found []string
		n := 0
		for _, x := range t {
			if l, ok := stringList(x); ok {
				found, n = l, n+1
			}
		}
		return found, n == 1
	}
	return nil, false
}

// checkPhrase sanitises a phrase and says why it is refused ("" if it is
// not).
func checkPhrase(p string) (string, string) {
	if len(p) > 8*MaxPhraseLen {
		return cards.Cut(p, MaxPhraseLen), fmt.Sprintf("is %d bytes; the limit is %d characters", len(p), MaxPhraseLen)
	}
	p = cards.Sanitize(p)
	for {
		q := strings.Trim(listRE.ReplaceAllString(p, ""), `"'“”‘’«» `)
		if q == p {
			break
		}
		p = q
	}
	n := utf8.RuneCountInString(p)
	switch {
	case n < minPhraseLen:
		return p, "is too short"
	case n > MaxPhraseLen:
		return p, fmt.Sprintf("is %d characters; the limit is %d", n, MaxPhraseLen)
	case len(strings.Fields(p)) > maxPhraseWordsCap:
		return p, fmt.Sprintf("has %d words; the limit is %d", len(strings.Fields(p)), maxPhraseWordsCap)
	case urlRE.MatchString(p):
		return p, "holds a URL or an e-mail address"
	case injectionRE.MatchString(p):
		return p, "reads as an instruction to a model, not as a request"
	case markupRE.MatchString(p):
		return p, "holds markup or code"
	}
	letters, latin := 0, 0
	for _, r := range p {
		if unicode.IsLetter(r) {
			letters++
			if unicode.Is(unicode.Latin, r) {
				latin++
			}
		}
	}
	switch {
	case letters == 0:
		return p, "has no letters"
	case float64(latin) < minLatinShare*float64(letters):
		return p, "is not in English"
	}
	return p, ""
}

// foldKey is what two phrases that differ only in case, punctuation or
// spacing share.
func foldKey(p string) string {
	return strings.Join(strings.FieldsFunc(strings.ToLower(p), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	}), " ")
}
