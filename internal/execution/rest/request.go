package rest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"mime"
	"net/url"
	"slices"
	"strings"

	"github.com/seed0cff8200/cardex/cards"
)

// LocationKey is the schema keyword that records where a folded parameter
// goes in the HTTP request: "path", "query" or "body".
const LocationKey = "x-cardex-in"

// HTTPKey is the input schema keyword that records the operation's method
// and path template, so the executor can rebuild the request.
const HTTPKey = "x-cardex-http"

// Methods are the HTTP methods the executor forwards. TRACE is not one: a
// server answers it by echoing the request — the credential headers cardex
// adds from the upstreams file included — back to the agent (and CONNECT
// is no API operation).
var Methods = []string{"GET", "PUT", "POST", "DELETE", "OPTIONS", "HEAD", "PATCH"}

// NotForwarded is why a method outside Methods is not forwarded.
const NotForwarded = "is not forwarded: a server answers it by echoing the request, credential headers included"

// operation is what a card says about its HTTP request.
type operation struct {
	method      string
	path        string // template, such as /pet/{petId}
	contentType string // of the body; empty: JSON
	params      map[string]param
}

// param is where one input property goes.
type param struct {
	in    string // path, query or body
	name  string // the parameter's real name
	whole bool   // the property is the whole body
}

// ConfigError is a card that cannot be turned into a request (no method or
// path, an unknown location, a path template without its parameter): the
// card's fault, not the arguments'.
type ConfigError struct{ msg string }

func (e *ConfigError) Error() string { return e.msg }

func configErr(format string, args ...any) error {
	return &ConfigError{msg: fmt.Sprintf(format, args...)}
}

// parseOperation reads x-cardex-http and each property's x-cardex-in, x-cardex-name
// (the real parameter name of a renamed property) and x-cardex-whole-body
// (the property that is the whole request body) from an input schema.
func parseOperation(schema json.RawMessage) (*operation, error) {
	var s struct {
		Properties map[string]struct {
			In        string `json:"x-cardex-in"`
			Name      string `json:"x-cardex-name"`
			WholeBody bool   `json:"x-cardex-whole-body"`
		} `json:"properties"`
		HTTP *struct {
			Method      string `json:"method"`
			Path        string `json:"path"`
			ContentType string `json:"body_content_type"`
		} `json:"x-cardex-http"`
	}
	if len(schema) == 0 {
		return nil, configErr("the card has no input schema, so no %s (method and path)", HTTPKey)
	}
	if err := json.Unmarshal(schema, &s); err != nil {
		return nil, configErr("the card's %s or %s is malformed: %v", HTTPKey, LocationKey, err)
	}
	if s.HTTP == nil {
		return nil, configErr("the card's input schema has no %s (method and path); import the API with `cardex import openapi`", HTTPKey)
	}
	op := &operation{method: strings.ToUpper(s.HTTP.Method), path: s.HTTP.Path, contentType: s.HTTP.ContentType, params: map[string]param{}}
	if op.method == "TRACE" || op.method == "CONNECT" {
		return nil, configErr("%s %s", op.method, NotForwarded)
	}
	if !slices.Contains(Methods, op.method) {
		return nil, configErr("%s.method %q is not an HTTP method (%s)", HTTPKey, s.HTTP.Method, strings.Join(Methods, ", "))
	}
	if !strings.HasPrefix(op.path, "/") || strings.ContainsAny(op.path, "?#") {
		return nil, configErr("%s.path %q must start with / and hold no query or fragment", HTTPKey, op.path)
	}
	for key, p := range s.Properties {
		in := p.In
		if in == "" {
			// A hand-written card may leave the location out.
			in = "body"
			if !hasBody(op.method) {
				in = "query"
			}
		}
		if in != "path" && in != "query" && in != "body" {
			return nil, configErr("property %q: %s %q: want path, query or body", key, LocationKey, p.In)
		}
		name := key
		if p.Name != "" {
			name = p.Name
		}
		op.params[key] = param{in: in, name: name, whole: p.WholeBody && in == "body"}
	}
	// Every placeholder of the template must be a path property, and the
	// literal parts must not climb out of the base URL.
	segs, err := splitTemplate(op.path)
	if err != nil {
		return nil, err
	}
	for _, sg := range segs {
		if sg.param == "" {
			for _, part := range strings.Split(sg.text, "/") {
				if part == "." || part == ".." {
					return nil, configErr("%s.path %q has a %q segment", HTTPKey, op.path, part)
				}
			}
			continue
		}
		if _, ok := op.pathKey(sg.param); !ok {
			return nil, configErr("%s.path %q names {%s}, which no property with %s: path is", HTTPKey, op.path, sg.param, LocationKey)
		}
	}
	return op, nil
}

func hasBody(method string) bool {
	switch method {
	case "GET", "HEAD", "DELETE", "OPTIONS":
		return false
	}
	return true
}

// idempotent: a method whose repetition has the effect of one request
// (RFC 9110, 9.2.2). A call of any other method that may have reached the
// upstream and then failed has an uncertain outcome.
func idempotent(method string) bool { return method != "POST" && method != "PATCH" }

// pathKey is the property key of the path parameter name.
func (op *operation) pathKey(name string) (string, bool) {
	for k, p := range op.params {
		if p.in == "path" && p.name == name {
			return k, true
		}
	}
	return "", false
}

type segment struct {
	text  string // literal text, when param is empty
	param string
}

// splitTemplate cuts "/pet/{petId}/photo" into literals and placeholders.
func splitTemplate(t string) ([]segment, error) {
	var out []segment
	for t != "" {
		i := strings.IndexByte(t, '{')
		if i < 0 {
			if strings.ContainsRune(t, '}') {
				return nil, configErr("%s.path has an unmatched }", HTTPKey)
			}
			out = append(out, segment{text: t})
			break
		}
		if i > 0 {
			if strings.ContainsRune(t[:i], '}') {
				return nil, configErr("%s.path has an unmatched }", HTTPKey)
			}
			out = append(out, segment{text: t[:i]})
		}
		j := strings.IndexByte(t[i:], '}')
		if j < 0 {
			return nil, configErr("%s.path has an unmatched {", HTTPKey)
		}
		name := t[i+1 : i+j]
		if name == "" || strings.ContainsAny(name, "{/") {
			return nil, configErr("%s.path has an empty or malformed {placeholder}", HTTPKey)
		}
		out = append(out, segment{param: name})
		t = t[i+j+1:]
	}
	return out, nil
}

// request is an encoded HTTP request, relative to the base URL.
type request struct {
	path        string // escaped, starting with /
	query       string // encoded
	body        []byte
	contentType string
}

// encode builds the request from the (already schema-validated) arguments.
// Errors wrap cards.ErrInvalid and name the argument: nothing is sent.
func (op *operation) encode(args json.RawMessage) (*request, error) {
	vals := map[string]json.RawMessage{}
	if len(bytes.TrimSpace(args)) > 0 {
		if err := json.Unmarshal(args, &vals); err != nil {
			return nil, cards.Invalid("arguments", "must be a JSON object: %v", err)
		}
	}
	out := &request{}
	// Path: each placeholder filled with its argument, escaped as one segment.
	segs, err := splitTemplate(op.path)
	if err != nil {
		return nil, err
	}
	var path strings.Builder
	for _, sg := range segs {
		if sg.param == "" {
			path.WriteString((&url.URL{Path: sg.text}).EscapedPath())
			continue
		}
		key, _ := op.pathKey(sg.param)
		raw, ok := vals[key]
		if !ok || isNull(raw) {
			return nil, cards.Invalid(key, "is a path parameter and is required")
		}
		parts, err := pathValue(key, raw)
		if err != nil {
			return nil, err
		}
		for i, p := range parts {
			if i > 0 {
				path.WriteByte(',')
			}
			path.WriteString(url.PathEscape(p))
		}
	}
	out.path = path.String()

	q := url.Values{}
	body := map[string]json.RawMessage{}
	var whole json.RawMessage
	keys := make([]string, 0, len(vals))
	for k := range vals {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		raw := vals[k]
		p, ok := op.params[k]
		if !ok {
			return nil, cards.Invalid(k, "is not a parameter of this operation")
		}
		switch p.in {
		case "query":
			if err := addQuery(q, k, p.name, raw); err != nil {
				return nil, err
			}
		case "body":
			if p.whole {
				whole = raw
			} else {
				body[p.name] = raw
			}
		}
	}
	out.query = q.Encode()
	if whole == nil && len(body) == 0 {
		return out, nil
	}
	if whole != nil && len(body) > 0 {
		return nil, cards.Invalid("body", "is the whole request body; give no other body properties with it")
	}
	ct := op.contentType
	mt, _, _ := mime.ParseMediaType(ct)
	switch {
	case ct == "" || mt == "application/json" || strings.HasSuffix(mt, "+json"):
		if ct == "" {
			ct = "application/json"
		}
		b := []byte(whole)
		if whole == nil {
			if b, err = json.Marshal(body); err != nil {
				return nil, err
			}
		}
		out.body, out.contentType = b, ct
	case mt == "application/x-www-form-urlencoded":
		form := url.Values{}
		if whole != nil {
			if err := json.Unmarshal(whole, &body); err != nil {
				return nil, cards.Invalid("body", "must be an object to be sent as %s", mt)
			}
		}
		for _, name := range slices.Sorted(maps.Keys(body)) {
			if err := addQuery(form, name, name, body[name]); err != nil {
				return nil, err
			}
		}
		out.body, out.contentType = []byte(form.Encode()), ct
	default:
		return nil, configErr("its request body is %s; cardex sends JSON and form (application/x-www-form-urlencoded) bodies only", ct)
	}
	return out, nil
}

func isNull(raw json.RawMessage) bool { return string(bytes.TrimSpace(raw)) == "null" }

// scalar renders a JSON string, number or boolean as text.
func scalar(raw json.RawMessage) (string, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "", false
	}
	switch raw[0] {
	case '"':
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return "", false
		}
		return s, true
	case '{', '[', 'n':
		return "", false
	}
	return string(raw), true // a number as written, true or false
}

// pathValue is the text of one path parameter: a scalar, or the elements of
// an array of scalars (joined with commas: OpenAPI's simple style). A value
// that would be a dot segment, or hold one, is refused whatever the
// escaping: some servers and proxies decode %2F before routing.
func pathValue(key string, raw json.RawMessage) ([]string, error) {
	var parts []string
	if s, ok := scalar(raw); ok {
		parts = []string{s}
	} else {
		var arr []json.RawMessage
		if json.Unmarshal(raw, &arr) != nil {
			return nil, cards.Invalid(key, "is a path parameter: give a string, number or boolean (or an array of them)")
		}
		for _, e := range arr {
			s, ok := scalar(e)
			if !ok {
				return nil, cards.Invalid(key, "is a path parameter: its array may hold strings, numbers and booleans only")
			}
			parts = append(parts, s)
		}
	}
	if strings.Join(parts, "") == "" {
		return nil, cards.Invalid(key, "is a path parameter and must not be empty")
	}
	for _, part := range strings.FieldsFunc(strings.Join(parts, ","), func(r rune) bool { return r == '/' || r == '\\' || r == ',' }) {
		if part == "." || part == ".." {
			return nil, cards.Invalid(key, "is a path parameter and must not be or contain a %q segment", part)
		}
	}
	return parts, nil
}

// addQuery adds one argument to a query string (or form body), in OpenAPI's
// default form style with explode: a scalar as name=value, an array as
// repeated name=value, an object as one key=value per property.
func addQuery(q url.Values, key, name string, raw json.RawMessage) error {
	if isNull(raw) {
		return nil
	}
	if s, ok := scalar(raw); ok {
		q.Add(name, s)
		return nil
	}
	var arr []json.RawMessage
	if json.Unmarshal(raw, &arr) == nil {
		for _, e := range arr {
			s, ok := scalar(e)
			if !ok {
				return cards.Invalid(key, "is a query parameter: its array may hold strings, numbers and booleans only")
			}
			q.Add(name, s)
		}
		return nil
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) == nil {
		for _, k := range slices.Sorted(maps.Keys(obj)) {
			s, ok := scalar(obj[k])
			if !ok {
				return cards.Invalid(key+"."+k, "is in a query parameter: nested objects and arrays cannot be sent in a query string")
			}
			q.Add(k, s)
		}
		return nil
	}
	return cards.Invalid(key, "cannot be sent in a query string")
}

// readAll reads at most limit bytes; cut reports that there was more.
func readAll(r io.Reader, limit int64) (b []byte, cut bool, err error) {
	b, err = io.ReadAll(io.LimitReader(r, limit+1))
	if int64(len(b)) > limit {
		return b[:limit], true, err
	}
	return b, false, err
}
