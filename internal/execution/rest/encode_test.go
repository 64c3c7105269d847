package rest

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/seed0cff8200/cardex/cards"
)

func TestEncode(t *testing.T) {
	schema := func(method, path, ct, props string) json.RawMessage {
		h := map[string]string{"method": method, "path": path}
		if ct != "" {
			h["body_content_type"] = ct
		}
		hb, _ := json.Marshal(h)
		return json.RawMessage(`{"type":"object","properties":{` + props + `},"x-cardex-http":` + string(hb) + `}`)
	}
	for _, tc := range []struct {
		name              string
		schema            json.RawMessage
		args              string
		path, query, body string
		contentType       string
		wantErr           string
		wantConfig        bool
	}{
		{name: "array in path, simple style", schema: schema("GET", "/items/{ids}", "", `"ids":{"x-cardex-in":"path"}`),
			args: `{"ids":[1,"b c",true]}`, path: "/items/1,b%20c,true"},
		{name: "placeholder inside a segment", schema: schema("GET", "/files/{name}.json", "", `"name":{"x-cardex-in":"path"}`),
			args: `{"name":"report 1"}`, path: "/files/report%201.json"},
		{name: "query: array repeated, object exploded, null left out", schema: schema("GET", "/search", "",
			`"tag":{"x-cardex-in":"query"},"filter":{"x-cardex-in":"query"},"q":{"x-cardex-in":"query"},"none":{"x-cardex-in":"query"}`),
			args: `{"tag":["a","b"],"filter":{"color":"red","size":2},"q":"x&y=z","none":null}`, path: "/search",
			query: "color=red&q=x%26y%3Dz&size=2&tag=a&tag=b"},
		{name: "renamed parameter", schema: schema("POST", "/pets/{id}", "", `"id":{"x-cardex-in":"path"},"query_id":{"x-cardex-in":"query","x-cardex-name":"id"}`),
			args: `{"id":"p1","query_id":"q1"}`, path: "/pets/p1", query: "id=q1"},
		{name: "whole body", schema: schema("POST", "/users", "application/json", `"body":{"x-cardex-in":"body","x-cardex-whole-body":true}`),
			args: `{"body":[{"username":"ada"}]}`, path: "/users", body: `[{"username":"ada"}]`, contentType: "application/json"},
		{name: "form body", schema: schema("POST", "/login", "application/x-www-form-urlencoded", `"user":{"x-cardex-in":"body"},"roles":{"x-cardex-in":"body"}`),
			args: `{"user":"ada lovelace","roles":["a","b"]}`, path: "/login", body: "roles=a&roles=b&user=ada+lovelace", contentType: "application/x-www-form-urlencoded"},
		{name: "no location: query for GET", schema: schema("GET", "/x", "", `"q":{}`), args: `{"q":"1"}`, path: "/x", query: "q=1"},
		{name: "no location: body for POST", schema: schema("POST", "/x", "", `"q":{}`), args: `{"q":1.50}`, path: "/x", body: `{"q":1.50}`, contentType: "application/json"},
		{name: "no body arguments, no body", schema: schema("POST", "/x", "application/json", `"q":{"x-cardex-in":"body"}`), args: `{}`, path: "/x"},
		{name: "object in path", schema: schema("GET", "/x/{id}", "", `"id":{"x-cardex-in":"path"}`), args: `{"id":{"a":1}}`, wantErr: "id: is a path parameter"},
		{name: "nested object in query", schema: schema("GET", "/x", "", `"f":{"x-cardex-in":"query"}`), args: `{"f":{"a":{"b":1}}}`, wantErr: "f.a: is in a query parameter"},
		{name: "missing path parameter", schema: schema("GET", "/x/{id}", "", `"id":{"x-cardex-in":"path"}`), args: `{}`, wantErr: "id: is a path parameter and is required"},
		{name: "backslash traversal", schema: schema("GET", "/x/{id}", "", `"id":{"x-cardex-in":"path"}`), args: `{"id":"..\\secret"}`, wantErr: `".." segment`},
		{name: "multipart body", schema: schema("POST", "/up", "multipart/form-data", `"f":{"x-cardex-in":"body"}`), args: `{"f":"x"}`, wantConfig: true},
		{name: "no x-cardex-http", schema: json.RawMessage(`{"type":"object"}`), wantConfig: true},
		{name: "bad method", schema: schema("FETCH", "/x", "", ``), wantConfig: true},
		{name: "relative path", schema: schema("GET", "x", "", ``), wantConfig: true},
		{name: "dot segment in the template", schema: schema("GET", "/a/../admin", "", ``), wantConfig: true},
		{name: "placeholder without a property", schema: schema("GET", "/a/{id}", "", ``), wantConfig: true},
		{name: "unmatched brace", schema: schema("GET", "/a/{id", "", `"id":{"x-cardex-in":"path"}`), wantConfig: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			op, err := parseOperation(tc.schema)
			var req *request
			if err == nil {
				req, err = op.encode(json.RawMessage(tc.args))
			}
			var ce *ConfigError
			switch {
			case tc.wantConfig:
				if !errors.As(err, &ce) {
					t.Fatalf("err %v, want a card configuration error", err)
				}
				return
			case tc.wantErr != "":
				if !errors.Is(err, cards.ErrInvalid) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want an invalid argument with %q", err, tc.wantErr)
				}
				return
			case err != nil:
				t.Fatal(err)
			}
			if req.path != tc.path || req.query != tc.query || string(req.body) != tc.body || req.contentType != tc.contentType {
				t.Fatalf("got path %q query %q body %q (%s)", req.path, req.query, req.body, req.contentType)
			}
		})
	}
}

func TestPagination(t *testing.T) {
	for _, tc := range []struct {
		name     string
		header   http.Header
		body     string
		next     string
		from     string
		isJSON   bool
		wantNone bool
	}{
		{name: "Link rel=next among others", header: http.Header{"Link": {`<https://a/x?p=1>; rel="prev", <https://a/x?p=3>; rel="next last"`}},
			next: `"https://a/x?p=3"`, from: `Link header, rel="next"`},
		{name: "Link without next", header: http.Header{"Link": {`<https://a/x?p=1>; rel="prev"`}}, wantNone: true},
		{name: "cursor header", header: http.Header{"X-Next-Cursor": {"abc=="}}, next: `"abc=="`, from: "X-Next-Cursor header"},
		{name: "top-level field", body: `{"items":[],"next_cursor":"c2"}`, isJSON: true, next: `"c2"`, from: "body field next_cursor"},
		{name: "numeric page", body: `{"items":[],"next_page":3}`, isJSON: true, next: `3`, from: "body field next_page"},
		{name: "nested", body: `{"data":[],"response_metadata":{"next_cursor":"dXNlcg=="}}`, isJSON: true, next: `"dXNlcg=="`, from: "body field response_metadata.next_cursor"},
		{name: "last page", body: `{"items":[],"next":null,"links":{"next":""}}`, isJSON: true, wantNone: true},
		{name: "array body", body: `[1,2]`, isJSON: true, wantNone: true},
		{name: "text body is not searched", body: `{"next":"x"}`, isJSON: false, wantNone: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := tc.header
			if h == nil {
				h = http.Header{}
			}
			p := pagination(h, []byte(tc.body), tc.isJSON)
			if tc.wantNone {
				if p != nil {
					t.Fatalf("found %+v", p)
				}
				return
			}
			if p == nil || string(p.Next) != tc.next || p.From != tc.from || !strings.HasPrefix(p.Note, "one page") {
				t.Fatalf("got %+v, want next %s from %s", p, tc.next, tc.from)
			}
		})
	}
}
