package retriever

import "github.com/seed0cff8200/cardex/cards"

// copyCards replaces the cards of an answer's tools by deep copies, each
// equal to what cards.Card.Clone makes, so that no caller can reach into
// the view through an answer. The copies' slices are cut from one
// allocation per element type for the whole answer (strings, bytes, flags),
// each with its capacity at its length, so an append to one cannot reach
// another: a few allocations an answer instead of about four a card.
func copyCards(tools []Scored) {
	var nStr, nByte, nFlag, nSrc int
	for i := range tools {
		c := &tools[i].Card
		nStr += len(c.Aliases) + len(c.Tags) + len(c.RequiredScopes) + len(c.SearchExamples)
		nByte += len(c.InputSchema) + len(c.OutputSchema)
		for _, f := range flags(&c.Annotations) {
			if *f != nil {
				nFlag++
			}
		}
		if c.ExamplesSource != nil {
			nSrc++
		}
	}
	strs := make([]string, 0, nStr)
	bytes := make([]byte, 0, nByte)
	bools := make([]bool, 0, nFlag)
	srcs := make([]cards.ExamplesSource, 0, nSrc)
	// As Clone: nil and empty give nil.
	strList := func(s []string) []string {
		if len(s) == 0 {
			return nil
		}
		at := len(strs)
		strs = append(strs, s...)
		return strs[at:len(strs):len(strs)]
	}
	raw := func(b []byte) []byte {
		if len(b) == 0 {
			return nil
		}
		at := len(bytes)
		bytes = append(bytes, b...)
		return bytes[at:len(bytes):len(bytes)]
	}
	for i := range tools {
		c := &tools[i].Card
		c.Aliases, c.Tags, c.RequiredScopes = strList(c.Aliases), strList(c.Tags), strList(c.RequiredScopes)
		c.SearchExamples = strList(c.SearchExamples)
		c.InputSchema, c.OutputSchema = raw(c.InputSchema), raw(c.OutputSchema)
		for _, f := range flags(&c.Annotations) {
			if *f != nil {
				bools = append(bools, **f)
				*f = &bools[len(bools)-1]
			}
		}
		if c.ExamplesSource != nil {
			srcs = append(srcs, *c.ExamplesSource)
			c.ExamplesSource = &srcs[len(srcs)-1]
		}
	}
}

// flags are the annotations' fields.
func flags(a *cards.Annotations) [4]**bool {
	return [4]**bool{&a.ReadOnly, &a.Destructive, &a.Idempotent, &a.OpenWorld}
}
