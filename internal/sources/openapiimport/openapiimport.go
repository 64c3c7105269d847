// Package openapiimport turns an OpenAPI 3.x document into capability cards
// of kind rest_operation: one card per operation, named by its operationId,
// with the path, query and body parameters folded into one input schema.
package openapiimport

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/seed0cff8200/cardex/cards"
	"github.com/seed0cff8200/cardex/internal/execution/rest"
	"github.com/seed0cff8200/cardex/internal/execution/upstream"
	"github.com/seed0cff8200/cardex/internal/sources/mcpimport"
)

// The schema keywords the importer writes are the REST executor's contract.
const (
	LocationKey = rest.LocationKey
	HTTPKey     = rest.HTTPKey
)

// Load reads and validates an OpenAPI 3.x document (YAML or JSON) from a
// file path or an http(s) URL. External references are not followed.
func Load(ctx context.Context, spec string) (*openapi3.T, error) {
	loader := openapi3.NewLoader()
	loader.Context = ctx
	var doc *openapi3.T
	var err error
	if u, perr := url.Parse(spec); perr == nil && (u.Scheme == "http" || u.Scheme == "https") {
		doc, err = loader.LoadFromURI(u)
	} else {
		doc, err = loader.LoadFromFile(spec)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", spec, err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.") {
		return nil, fmt.Errorf("%s: openapi %q: only OpenAPI 3.x is supported", spec, doc.OpenAPI)
	}
	if err := doc.Validate(ctx, openapi3.DisableExamplesValidation()); err != nil {
		return nil, fmt.Errorf("%s: not a valid OpenAPI document: %w", spec, err)
	}
	return doc, nil
}

// Skipped is an operation that could not become a card.
type Skipped = mcpimport.Skipped

// methods are the operations an OpenAPI path item may hold.
var methods = []string{"GET", "PUT", "POST", "DELETE", "OPTIONS", "HEAD", "PATCH", "TRACE"}

// ToCards maps every operation of the document to a normalised card of
// (tenant, server), in path then method order. OAuth 2 and OpenID Connect
// scopes of the operation's security requirement (or the document's) become
// required scopes; when an operation accepts several alternative
// requirements, the card requires the scopes of all of them, so that it is
// never easier to reach through cardex than through the API.
func ToCards(doc *openapi3.T, tenant, server string) ([]cards.Card, []Skipped, error) {
	raw, err := json.Marshal(doc)
	if err != nil {
		return nil, nil, err
	}
	var root map[string]any
	if err := json.Unmarshal(raw, &root); err != nil {
		return nil, nil, err
	}
	r := &resolver{root: root}
	var out []cards.Card
	var skipped []Skipped
	seen := map[string]string{}
	paths := doc.Paths.Map()
	keys := make([]string, 0, len(paths))
	for p := range paths {
		keys = append(keys, p)
	}
	slices.Sort(keys)
	for _, path := range keys {
		item := paths[path]
		ops := item.Operations()
		for _, m := range methods {
			op := ops[m]
			if op == nil {
				continue
			}
			ref := m + " " + path
			if !slices.Contains(rest.Methods, m) {
				skipped = append(skipped, Skipped{Name: ref, Reason: m + " " + rest.NotForwarded})
				continue
			}
			c, err := r.card(doc, tenant, server, path, m, item, op)
			if err != nil {
				skipped = append(skipped, Skipped{Name: ref, Reason: err.Error()})
				continue
			}
			if prev, dup := seen[c.Name]; dup {
				skipped = append(skipped, Skipped{Name: ref, Reason: fmt.Sprintf("name %q is already used by %s", c.Name, prev)})
				continue
			}
			seen[c.Name] = ref
			out = append(out, c)
		}
	}
	return out, skipped, nil
}

// DeprecatedNotice is what a deprecated operation's card says when its
// description gives no notice of its own.
const DeprecatedNotice = "Deprecated: the API marks this operation deprecated."

var notName = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)

// Name is the card name of an operation: its operationId, or method and
// path when it has none; characters outside the MCP tool-name rule become
// '_'.
func Name(method, path, operationID string) string {
	n := operationID
	if n == "" {
		n = strings.ToLower(method) + "_" + strings.NewReplacer("{", "", "}", "").Replace(strings.Trim(path, "/"))
	}
	n = strings.Trim(notName.ReplaceAllString(n, "_"), "_")
	if len(n) > cards.MaxNameLen {
		n = n[:cards.MaxNameLen]
	}
	return n
}

func (r *resolver) card(doc *openapi3.T, tenant, server, path, method string, item *openapi3.PathItem, op *openapi3.Operation) (cards.Card, error) {
	c := cards.Card{
		Tenant: tenant,
		Server: server,
		Name:   Name(method, path, op.OperationID),
		Kind:   cards.KindRESTOperation,
		Status: cards.StatusActive,
	}
	summary := cards.Sanitize(op.Summary)
	if summary == "" {
		summary = mcpimport.Summary(op.Description)
	}
	if summary == "" {
		summary = method + " " + path
	}
	// A deprecated operation says so where a model reads first (the
	// summary) and in when_not_to_use, and is tagged (ranked lower).
	notice := mcpimport.Deprecation(op.Description)
	if notice == "" && op.Deprecated {
		notice = DeprecatedNotice
	}
	c.Summary = mcpimport.WithNotice(summary, notice)
	if d := cards.Sanitize(op.Description); d != "" && d != c.Summary {
		c.Description = cards.CutAtWord(d, cards.MaxDescriptionLen)
	}
	for _, t := range op.Tags {
		if t = strings.ToLower(cards.Sanitize(t)); t != "" && len([]rune(t)) <= cards.MaxTagLen {
			c.Tags = append(c.Tags, t)
		}
	}
	if notice != "" {
		c.Tags = append(c.Tags, cards.TagDeprecated)
		c.WhenNotToUse = cards.CutAtWord(notice, cards.MaxWhenNotToUseLen)
	}
	c.Annotations = annotations(method)

	in, err := r.inputSchema(path, method, item, op)
	if err != nil {
		return cards.Card{}, err
	}
	if c.InputSchema, err = json.Marshal(in); err != nil {
		return cards.Card{}, err
	}
	if out := r.outputSchema(op); out != nil {
		if c.OutputSchema, err = json.Marshal(out); err != nil {
			return cards.Card{}, err
		}
	}
	c.RequiredScopes = scopes(doc, op)
	if err := cards.Normalize(&c); err != nil {
		return cards.Card{}, err
	}
	return c, nil
}

func annotations(method string) cards.Annotations {
	t, f := true, false
	switch method {
	case "GET", "HEAD", "OPTIONS", "TRACE":
		return cards.Annotations{ReadOnly: &t, Destructive: &f, Idempotent: &t}
	case "DELETE":
		return cards.Annotations{ReadOnly: &f, Destructive: &t, Idempotent: &t}
	case "PUT":
		return cards.Annotations{ReadOnly: &f, Idempotent: &t}
	default: // POST, PATCH
		return cards.Annotations{ReadOnly: &f, Idempotent: &f}
	}
}

// scopes are the OAuth 2 / OpenID Connect scopes of every alternative
// security requirement of the operation (or of the document).
func scopes(doc *openapi3.T, op *openapi3.Operation) []string {
	reqs := doc.Security
	if op.Security != nil {
		reqs = *op.Security
	}
	var out []string
	for _, req := range reqs {
		for scheme, ss := range req {
			if doc.Components == nil || doc.Components.SecuritySchemes[scheme] == nil || doc.Components.SecuritySchemes[scheme].Value == nil {
				continue
			}
			switch doc.Components.SecuritySchemes[scheme].Value.Type {
			case "oauth2", "openIdConnect":
				out = append(out, ss...)
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// inputSchema folds path and query parameters and the request body into one
// object schema; every property records its location under LocationKey.
// Header and cookie parameters are left out: they carry credentials and
// transport details that cardex, not the model, supplies.
func (r *resolver) inputSchema(path, method string, item *openapi3.PathItem, op *openapi3.Operation) (map[string]any, error) {
	props := map[string]any{}
	var required []string
	// add folds one parameter in; a name already taken by another location
	// is prefixed with the location, and the real name kept under x-cardex-name.
	add := func(name, in string, schema map[string]any, req bool) string {
		key := name
		if _, clash := props[key]; clash {
			key = in + "_" + name
			schema["x-cardex-name"] = name
		}
		schema[LocationKey] = in
		props[key] = schema
		if req {
			required = append(required, key)
		}
		return key
	}
	params := map[string]*openapi3.Parameter{}
	var order []string
	for _, list := range []openapi3.Parameters{item.Parameters, op.Parameters} {
		for _, pr := range list {
			if pr == nil || pr.Value == nil {
				continue
			}
			k := pr.Value.In + ":" + pr.Value.Name
			if _, ok := params[k]; !ok {
				order = append(order, k)
			}
			params[k] = pr.Value // operation-level parameters override path-level ones
		}
	}
	for _, k := range order {
		p := params[k]
		if p.In != "path" && p.In != "query" {
			continue
		}
		s := map[string]any{}
		if p.Schema != nil {
			v, err := r.schema(p.Schema)
			if err != nil {
				return nil, fmt.Errorf("parameter %s: %w", p.Name, err)
			}
			s = v
		} else if mt := firstMedia(p.Content); mt != nil && mt.Schema != nil {
			v, err := r.schema(mt.Schema)
			if err != nil {
				return nil, fmt.Errorf("parameter %s: %w", p.Name, err)
			}
			s = v
		}
		if d := cards.Sanitize(p.Description); d != "" {
			if _, has := s["description"]; !has {
				s["description"] = d
			}
		}
		add(p.Name, p.In, s, p.Required || p.In == "path")
	}
	contentType := ""
	if op.RequestBody != nil && op.RequestBody.Value != nil {
		rb := op.RequestBody.Value
		ct, mt := pickMedia(rb.Content)
		contentType = ct
		if mt != nil && mt.Schema != nil {
			body, err := r.schema(mt.Schema)
			if err != nil {
				return nil, fmt.Errorf("request body: %w", err)
			}
			bodyProps, isObj := body["properties"].(map[string]any)
			if isObj && body["type"] == "object" && len(bodyProps) > 0 && onlyObjectKeywords(body) {
				// An object body: its properties become top-level properties.
				var bodyReq []string
				if rq, ok := body["required"].([]any); ok {
					for _, x := range rq {
						if s, ok := x.(string); ok {
							bodyReq = append(bodyReq, s)
						}
					}
				}
				names := make([]string, 0, len(bodyProps))
				for n := range bodyProps {
					names = append(names, n)
				}
				slices.Sort(names)
				for _, n := range names {
					ps, _ := bodyProps[n].(map[string]any)
					if ps == nil {
						ps = map[string]any{}
					}
					add(n, "body", ps, rb.Required && slices.Contains(bodyReq, n))
				}
			} else {
				if d := cards.Sanitize(rb.Description); d != "" {
					if _, has := body["description"]; !has {
						body["description"] = d
					}
				}
				// Any other body is one property holding the whole body.
				body["x-cardex-whole-body"] = true
				add("body", "body", body, rb.Required)
			}
		}
	}
	schema := map[string]any{
		"type":                 "object",
		"properties":           props,
		"additionalProperties": false,
	}
	if len(required) > 0 {
		schema["required"] = required
	}
	h := map[string]any{"method": method, "path": path}
	if contentType != "" {
		h["body_content_type"] = contentType
	}
	schema[HTTPKey] = h
	return schema, nil
}

// onlyObjectKeywords: the body schema is a plain object whose properties can
// be lifted without losing a constraint.
func onlyObjectKeywords(s map[string]any) bool {
	for k := range s {
		switch k {
		case "type", "properties", "required", "description", "title", "additionalProperties":
		default:
			return false
		}
	}
	return true
}

// pickMedia prefers JSON, then form encodings, then whatever comes first.
func pickMedia(c openapi3.Content) (string, *openapi3.MediaType) {
	for _, ct := range []string{"application/json", "application/x-www-form-urlencoded", "multipart/form-data"} {
		if mt := c.Get(ct); mt != nil {
			return ct, mt
		}
	}
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if strings.HasSuffix(k, "+json") {
			return k, c[k]
		}
	}
	if len(keys) > 0 {
		return keys[0], c[keys[0]]
	}
	return "", nil
}

func firstMedia(c openapi3.Content) *openapi3.MediaType {
	_, mt := pickMedia(c)
	return mt
}

// outputSchema is the JSON schema of the first 2xx response (200 first).
func (r *resolver) outputSchema(op *openapi3.Operation) map[string]any {
	if op.Responses == nil {
		return nil
	}
	m := op.Responses.Map()
	codes := make([]string, 0, len(m))
	for code := range m {
		if strings.HasPrefix(code, "2") {
			codes = append(codes, code)
		}
	}
	slices.Sort(codes)
	for _, code := range codes {
		resp := m[code]
		if resp == nil || resp.Value == nil {
			continue
		}
		ct, mt := pickMedia(resp.Value.Content)
		if mt == nil || mt.Schema == nil || !(ct == "application/json" || strings.HasSuffix(ct, "+json")) {
			continue
		}
		s, err := r.schema(mt.Schema)
		if err != nil {
			return nil
		}
		return s
	}
	return nil
}

// resolver inlines local $refs of the document and rewrites OpenAPI 3.0
// schema dialect into JSON Schema 2020-12.
type resolver struct {
	root map[string]any
}

// maxDepth bounds inlining: deeper schemas become {} (anything).
const maxDepth = 12

func (r *resolver) schema(s *openapi3.SchemaRef) (map[string]any, error) {
	raw, err := json.Marshal(s)
	if err != nil {
		return nil, err
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, err
	}
	out, err := r.inline(v, nil, 0)
	if err != nil {
		return nil, err
	}
	m, ok := out.(map[string]any)
	if !ok {
		return map[string]any{}, nil
	}
	return m, nil
}

func (r *resolver) inline(v any, stack []string, depth int) (any, error) {
	switch x := v.(type) {
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			y, err := r.inline(e, stack, depth)
			if err != nil {
				return nil, err
			}
			out[i] = y
		}
		return out, nil
	case map[string]any:
		if depth > maxDepth {
			return map[string]any{}, nil
		}
		if ref, ok := x["$ref"].(string); ok {
			if slices.Contains(stack, ref) {
				return map[string]any{"description": "recursive: see " + strings.TrimPrefix(ref, "#/components/schemas/")}, nil
			}
			target, err := r.lookup(ref)
			if err != nil {
				return nil, err
			}
			return r.inline(target, append(stack, ref), depth+1)
		}
		out := make(map[string]any, len(x))
		for k, e := range x {
			switch {
			case k == "xml" || k == "example" || k == "externalDocs" || k == "discriminator" || strings.HasPrefix(k, "x-"):
				continue
			case k == "properties" || k == "patternProperties" || k == "$defs" || k == "definitions":
				// Maps of schemas: their keys are names, not keywords.
				pm, _ := e.(map[string]any)
				np := make(map[string]any, len(pm))
				for name, ps := range pm {
					y, err := r.inline(ps, stack, depth+1)
					if err != nil {
						return nil, err
					}
					np[name] = y
				}
				out[k] = np
				continue
			}
			y, err := r.inline(e, stack, depth+1)
			if err != nil {
				return nil, err
			}
			out[k] = y
		}
		dialect(out)
		return out, nil
	default:
		return v, nil
	}
}

// dialect rewrites OpenAPI 3.0 keywords that JSON Schema 2020-12 reads
// differently: nullable, and boolean exclusiveMinimum/exclusiveMaximum.
func dialect(s map[string]any) {
	if n, ok := s["nullable"].(bool); ok {
		delete(s, "nullable")
		if t, ok := s["type"].(string); ok && n {
			s["type"] = []any{t, "null"}
		}
	}
	for _, pair := range [][2]string{{"exclusiveMinimum", "minimum"}, {"exclusiveMaximum", "maximum"}} {
		if b, ok := s[pair[0]].(bool); ok {
			delete(s, pair[0])
			if b {
				if v, ok := s[pair[1]]; ok {
					s[pair[0]] = v
					delete(s, pair[1])
				}
			}
		}
	}
}

// lookup resolves a local JSON pointer ("#/components/schemas/Pet").
func (r *resolver) lookup(ref string) (any, error) {
	if !strings.HasPrefix(ref, "#/") {
		return nil, fmt.Errorf("reference %q: only references inside the document are followed", ref)
	}
	var cur any = r.root
	for _, tok := range strings.Split(ref[2:], "/") {
		tok = strings.NewReplacer("~1", "/", "~0", "~").Replace(tok)
		if u, err := url.PathUnescape(tok); err == nil {
			tok = u
		}
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("reference %q does not resolve", ref)
		}
		if cur, ok = m[tok]; !ok {
			return nil, fmt.Errorf("reference %q does not resolve", ref)
		}
	}
	return cur, nil
}

// ServerInfo is the server entry an OpenAPI document describes in its info
// object: the title, and the description (often Markdown, kept as text),
// sanitised and cut to the limits. ok is false when both are empty.
func ServerInfo(doc *openapi3.T, tenant, server string) (cards.ServerInfo, bool) {
	si := cards.ServerInfo{Tenant: tenant, Name: server}
	if doc == nil || doc.Info == nil {
		return si, false
	}
	si.Title = cards.CutAtWord(cards.Sanitize(doc.Info.Title), cards.MaxSummaryLen)
	si.Description = cards.CutAtWord(cards.Sanitize(doc.Info.Description), cards.MaxDescriptionLen)
	return si, si.Title != "" || si.Description != ""
}

// Upstream is the upstreams-file entry (kind rest) that lets call_tool reach
// the document's operations: the first server's URL as base_url (resolved
// against spec when it is relative and spec is a URL), and a header with a
// ${VAR} reference for each credential the document's security schemes send
// in a header. relative reports a base URL that is still relative (a spec
// read from a file naming a server such as /v3): the operator must write
// the API's scheme and host.
func Upstream(doc *openapi3.T, spec, server string) (u upstream.Upstream, relative bool) {
	u = upstream.Upstream{Server: server, Kind: upstream.REST}
	if len(doc.Servers) > 0 && doc.Servers[0] != nil {
		base := doc.Servers[0].URL
		for name, v := range doc.Servers[0].Variables {
			if v != nil {
				base = strings.ReplaceAll(base, "{"+name+"}", v.Default)
			}
		}
		u.BaseURL = base
		if b, err := url.Parse(base); err == nil && !b.IsAbs() {
			relative = true
			if s, err := url.Parse(spec); err == nil && (s.Scheme == "http" || s.Scheme == "https") {
				u.BaseURL, relative = s.ResolveReference(b).String(), false
			}
		}
	}
	env := strings.ToUpper(notName.ReplaceAllString(strings.ReplaceAll(server, ".", "_"), "_"))
	env = strings.ReplaceAll(env, "-", "_")
	if doc.Components != nil {
		names := make([]string, 0, len(doc.Components.SecuritySchemes))
		for n := range doc.Components.SecuritySchemes {
			names = append(names, n)
		}
		slices.Sort(names)
		for _, n := range names {
			ref := doc.Components.SecuritySchemes[n]
			if ref == nil || ref.Value == nil {
				continue
			}
			s := ref.Value
			if u.Headers == nil {
				u.Headers = map[string]string{}
			}
			switch {
			case s.Type == "apiKey" && s.In == "header" && s.Name != "":
				u.Headers[s.Name] = "${" + env + "_API_KEY}"
			case s.Type == "http" && strings.EqualFold(s.Scheme, "basic"):
				u.Headers["Authorization"] = "Basic ${" + env + "_BASIC_AUTH}"
			case s.Type == "http" || s.Type == "oauth2" || s.Type == "openIdConnect":
				if _, set := u.Headers["Authorization"]; !set {
					u.Headers["Authorization"] = "Bearer ${" + env + "_TOKEN}"
				}
			}
			if len(u.Headers) == 0 {
				u.Headers = nil
			}
		}
	}
	return u, relative
}
