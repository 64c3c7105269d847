package rest

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
)

// Page labels a response that is one page of a longer list: its next-page
// cursor exactly as the API gave it, and where it was found. cardex never
// follows it.
type Page struct {
	Note string          `json:"note"`
	Next json.RawMessage `json:"next"`
	From string          `json:"from"`
}

const onePage = "one page: cardex returned this page only and fetched no more"

// The headers and body fields recognised as a next-page cursor.
var (
	cursorHeaders = []string{"X-Next-Cursor", "X-Next-Page-Token", "X-Next-Page"}
	cursorFields  = []string{"next_cursor", "nextCursor", "next_page_token", "nextPageToken", "next_page", "nextPage", "next"}
	// cursorParents are objects of a JSON body that often hold the cursor.
	cursorParents = []string{"links", "_links", "pagination", "paging", "meta", "response_metadata"}
)

// pagination finds the response's next-page cursor: a Link header with
// rel="next" (RFC 8288), one of cursorHeaders, or one of cursorFields at the
// top of a JSON object body or in one of its cursorParents. Nil when there
// is none (or it is empty, null or false: the last page).
func pagination(h http.Header, body []byte, isJSON bool) *Page {
	if next := linkNext(h.Values("Link")); next != "" {
		b, _ := json.Marshal(next)
		return &Page{Note: onePage, Next: b, From: `Link header, rel="next"`}
	}
	for _, name := range cursorHeaders {
		if v := strings.TrimSpace(h.Get(name)); v != "" {
			b, _ := json.Marshal(v)
			return &Page{Note: onePage, Next: b, From: name + " header"}
		}
	}
	if !isJSON {
		return nil
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(body, &obj) != nil {
		return nil
	}
	if v, f, ok := cursorField(obj); ok {
		return &Page{Note: onePage, Next: v, From: "body field " + f}
	}
	for _, parent := range cursorParents {
		var inner map[string]json.RawMessage
		if raw, ok := obj[parent]; !ok || json.Unmarshal(raw, &inner) != nil {
			continue
		}
		if v, f, ok := cursorField(inner); ok {
			return &Page{Note: onePage, Next: v, From: "body field " + parent + "." + f}
		}
	}
	return nil
}

func cursorField(obj map[string]json.RawMessage) (json.RawMessage, string, bool) {
	for _, f := range cursorFields {
		v, ok := obj[f]
		if !ok {
			continue
		}
		switch t := string(bytes.TrimSpace(v)); {
		case t == "null", t == `""`, t == "false", t == "", strings.HasPrefix(t, "{"), strings.HasPrefix(t, "["):
			continue
		}
		return bytes.TrimSpace(v), f, true
	}
	return nil, "", false
}

// linkNext is the target of the first rel="next" link of Link headers.
func linkNext(values []string) string {
	for _, v := range values {
		for {
			v = strings.TrimLeft(v, " \t,")
			if !strings.HasPrefix(v, "<") {
				break
			}
			end := strings.IndexByte(v, '>')
			if end < 0 {
				break
			}
			target := v[1:end]
			v = v[end+1:]
			params := v
			if i := strings.IndexByte(v, ','); i >= 0 {
				params, v = v[:i], v[i:]
			} else {
				v = ""
			}
			for _, p := range strings.Split(params, ";") {
				k, val, _ := strings.Cut(strings.TrimSpace(p), "=")
				if !strings.EqualFold(strings.TrimSpace(k), "rel") {
					continue
				}
				for _, r := range strings.Fields(strings.Trim(strings.TrimSpace(val), `"`)) {
					if strings.EqualFold(r, "next") {
						return target
					}
				}
			}
		}
	}
	return ""
}
