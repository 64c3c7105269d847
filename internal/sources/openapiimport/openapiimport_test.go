package openapiimport_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/seed0cff8200/cardex/cards"
	"github.com/seed0cff8200/cardex/cards/embedded"
	"github.com/seed0cff8200/cardex/internal/sources/catalogsync"
	"github.com/seed0cff8200/cardex/internal/sources/openapiimport"
)

// petstore is the real, unmodified Swagger Petstore OpenAPI 3.0 document
// (see testdata/openapi/README.md for its source).
const petstore = "../../../testdata/openapi/petstore3.yaml"

func loadPetstore(t *testing.T) map[string]cards.Card {
	t.Helper()
	doc, err := openapiimport.Load(context.Background(), petstore)
	if err != nil {
		t.Fatal(err)
	}
	cs, skipped, err := openapiimport.ToCards(doc, "acme", "petstore")
	if err != nil {
		t.Fatal(err)
	}
	if len(skipped) != 0 {
		t.Fatalf("skipped: %v", skipped)
	}
	out := map[string]cards.Card{}
	for _, c := range cs {
		out[c.Name] = c
	}
	return out
}

type schema struct {
	Type       any                       `json:"type"`
	Properties map[string]map[string]any `json:"properties"`
	Required   []string                  `json:"required"`
	HTTP       map[string]string         `json:"x-cardex-http"`
}

func parse(t *testing.T, raw json.RawMessage) schema {
	t.Helper()
	var s schema
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestPetstoreOperations(t *testing.T) {
	got := loadPetstore(t)
	want := []string{"addPet", "createUser", "createUsersWithListInput", "deleteOrder", "deletePet", "deleteUser",
		"findPetsByStatus", "findPetsByTags", "getInventory", "getOrderById", "getPetById", "getUserByName",
		"loginUser", "logoutUser", "placeOrder", "updatePet", "updatePetWithForm", "updateUser", "uploadFile"}
	var names []string
	for n, c := range got {
		names = append(names, n)
		if c.Kind != cards.KindRESTOperation || c.Tenant != "acme" || c.Server != "petstore" {
			t.Errorf("%s: %s %s/%s", n, c.Kind, c.Tenant, c.Server)
		}
		if strings.Contains(string(c.InputSchema)+string(c.OutputSchema), "$ref") {
			t.Errorf("%s: a $ref was left in the schemas", n)
		}
		if _, err := cards.CompileSchema(c.InputSchema); err != nil {
			t.Errorf("%s: input schema does not compile: %v", n, err)
		}
	}
	slices.Sort(names)
	if !slices.Equal(names, want) {
		t.Fatalf("operations %v\nwant %v", names, want)
	}
}

func TestPetstoreCards(t *testing.T) {
	got := loadPetstore(t)
	for _, tc := range []struct {
		name     string
		summary  string
		scopes   []string
		method   string
		path     string
		props    map[string]string // property → location
		required []string
		readOnly bool
	}{
		{name: "getPetById", summary: "Find pet by ID", scopes: []string{"read:pets", "write:pets"}, method: "GET", path: "/pet/{petId}",
			props: map[string]string{"petId": "path"}, required: []string{"petId"}, readOnly: true},
		{name: "addPet", summary: "Add a new pet to the store", scopes: []string{"read:pets", "write:pets"}, method: "POST", path: "/pet",
			props:    map[string]string{"id": "body", "name": "body", "category": "body", "photoUrls": "body", "tags": "body", "status": "body"},
			required: []string{"name", "photoUrls"}},
		{name: "updatePetWithForm", summary: "Updates a pet in the store with form data", scopes: []string{"read:pets", "write:pets"}, method: "POST", path: "/pet/{petId}",
			props: map[string]string{"petId": "path", "name": "query", "status": "query"}, required: []string{"petId"}},
		{name: "deletePet", summary: "Deletes a pet", scopes: []string{"read:pets", "write:pets"}, method: "DELETE", path: "/pet/{petId}",
			props: map[string]string{"petId": "path"}, required: []string{"petId"}}, // the api_key header is cardex's business
		{name: "uploadFile", summary: "uploads an image", scopes: []string{"read:pets", "write:pets"}, method: "POST", path: "/pet/{petId}/uploadImage",
			props: map[string]string{"petId": "path", "additionalMetadata": "query", "body": "body"}, required: []string{"petId"}},
		{name: "getInventory", summary: "Returns pet inventories by status", method: "GET", path: "/store/inventory", // api_key only: no scopes
			props: map[string]string{}, readOnly: true},
		{name: "placeOrder", summary: "Place an order for a pet", method: "POST", path: "/store/order", // no security at all
			props: map[string]string{"id": "body", "petId": "body", "quantity": "body", "shipDate": "body", "status": "body", "complete": "body"}},
		{name: "createUsersWithListInput", summary: "Creates list of users with given input array", method: "POST", path: "/user/createWithList",
			props: map[string]string{"body": "body"}},
		{name: "loginUser", summary: "Logs user into the system", method: "GET", path: "/user/login",
			props: map[string]string{"username": "query", "password": "query"}, readOnly: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, ok := got[tc.name]
			if !ok {
				t.Fatal("missing")
			}
			if c.Summary != tc.summary {
				t.Errorf("summary %q, want %q", c.Summary, tc.summary)
			}
			if !slices.Equal(c.RequiredScopes, tc.scopes) {
				t.Errorf("scopes %v, want %v", c.RequiredScopes, tc.scopes)
			}
			s := parse(t, c.InputSchema)
			if s.HTTP["method"] != tc.method || s.HTTP["path"] != tc.path {
				t.Errorf("x-cardex-http %v", s.HTTP)
			}
			if len(s.Properties) != len(tc.props) {
				t.Errorf("properties %v, want %v", s.Properties, tc.props)
			}
			for p, in := range tc.props {
				if s.Properties[p][openapiimport.LocationKey] != in {
					t.Errorf("property %s: location %v, want %s", p, s.Properties[p][openapiimport.LocationKey], in)
				}
			}
			req := slices.Clone(s.Required)
			slices.Sort(req)
			want := slices.Clone(tc.required)
			slices.Sort(want)
			if !slices.Equal(req, want) {
				t.Errorf("required %v, want %v", s.Required, tc.required)
			}
			if ro := c.Annotations.ReadOnly; ro == nil || *ro != tc.readOnly {
				t.Errorf("read_only %v", ro)
			}
		})
	}

	// Referenced schemas are inlined, nested ones included.
	var out struct {
		Properties map[string]map[string]any `json:"properties"`
		Required   []string                  `json:"required"`
	}
	if err := json.Unmarshal(got["getPetById"].OutputSchema, &out); err != nil {
		t.Fatal(err)
	}
	cat, _ := out.Properties["category"]["properties"].(map[string]any)
	if cat["name"] == nil || !slices.Equal(out.Required, []string{"name", "photoUrls"}) {
		t.Fatalf("output schema of getPetById: %s", got["getPetById"].OutputSchema)
	}
	if d := got["deletePet"].Annotations.Destructive; d == nil || !*d {
		t.Fatal("deletePet is destructive")
	}
	if b := parse(t, got["addPet"].InputSchema).HTTP["body_content_type"]; b != "application/json" {
		t.Fatalf("addPet body content type %q", b)
	}
	if ty := parse(t, got["createUsersWithListInput"].InputSchema).Properties["body"]["type"]; ty != "array" {
		t.Fatalf("array body: %v", ty)
	}
}

// TestPetstoreArgumentsValidate: the folded schema checks arguments the way
// AuthorizeCall will.
func TestPetstoreArgumentsValidate(t *testing.T) {
	got := loadPetstore(t)
	for _, tc := range []struct {
		tool, args string
		ok         bool
	}{
		{"getPetById", `{"petId": 10}`, true},
		{"getPetById", `{"petId": "ten"}`, false},
		{"getPetById", `{}`, false},
		{"getPetById", `{"petId": 10, "api_key": "x"}`, false},
		{"addPet", `{"name": "doggie", "photoUrls": ["u"], "category": {"id": 1, "name": "Dogs"}}`, true},
		{"addPet", `{"name": "doggie"}`, false},
		{"addPet", `{"name": "doggie", "photoUrls": [], "status": "lost"}`, false},
		{"findPetsByStatus", `{"status": "sold"}`, true},
		{"findPetsByStatus", `{"status": "gone"}`, false},
	} {
		s, err := cards.CompileSchema(got[tc.tool].InputSchema)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Validate([]byte(tc.args)); (err == nil) != tc.ok {
			t.Errorf("%s %s: err = %v, want ok=%v", tc.tool, tc.args, err, tc.ok)
		}
	}
}

func TestPetstoreReimportIsIdempotent(t *testing.T) {
	ctx := context.Background()
	st, err := embedded.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	cat := catalogsync.StoreCatalog{Store: st}
	run := func() catalogsync.Plan {
		doc, err := openapiimport.Load(ctx, petstore)
		if err != nil {
			t.Fatal(err)
		}
		imported, _, err := openapiimport.ToCards(doc, "acme", "petstore")
		if err != nil {
			t.Fatal(err)
		}
		stored, err := cat.List(ctx, "acme", "petstore")
		if err != nil {
			t.Fatal(err)
		}
		plan, err := catalogsync.Diff("acme", "petstore", stored, imported, catalogsync.Options{Kind: cards.KindRESTOperation, Scopes: nil})
		if err != nil {
			t.Fatal(err)
		}
		if err := catalogsync.Apply(ctx, cat, plan); err != nil {
			t.Fatal(err)
		}
		return plan
	}
	if p := run(); p.Count(catalogsync.Create) != 19 {
		t.Fatalf("first import created %d", p.Count(catalogsync.Create))
	}
	if p := run(); p.Count(catalogsync.Unchanged) != 19 || len(p.Writes()) != 0 {
		t.Fatalf("second import: %+v", p.Changes)
	}
}

func TestName(t *testing.T) {
	for _, tc := range []struct{ method, path, id, want string }{
		{"GET", "/pet/{petId}", "getPetById", "getPetById"},
		{"GET", "/pet/{petId}", "", "get_pet_petId"},
		{"POST", "/a b/c", "create thing!", "create_thing"},
	} {
		if got := openapiimport.Name(tc.method, tc.path, tc.id); got != tc.want {
			t.Errorf("Name(%s %s %q) = %q, want %q", tc.method, tc.path, tc.id, got, tc.want)
		}
	}
}

// TestDialect: OpenAPI 3.0's nullable and boolean exclusive bounds become
// JSON Schema 2020-12.
func TestDialect(t *testing.T) {
	spec := `openapi: 3.0.3
info: {title: t, version: "1"}
paths:
  /things/{id}:
    get:
      operationId: getThing
      parameters:
        - {name: id, in: path, required: true, schema: {type: integer, minimum: 0, exclusiveMinimum: true}}
        - {name: note, in: query, schema: {type: string, nullable: true}}
      responses:
        "200": {description: ok}
`
	doc, err := openapi3.NewLoader().LoadFromData([]byte(spec))
	if err != nil {
		t.Fatal(err)
	}
	cs, skipped, err := openapiimport.ToCards(doc, "acme", "things")
	if err != nil || len(cs) != 1 || len(skipped) != 0 {
		t.Fatalf("%v %v %v", cs, skipped, err)
	}
	s, err := cards.CompileSchema(cs[0].InputSchema)
	if err != nil {
		t.Fatal(err)
	}
	for args, ok := range map[string]bool{`{"id": 1}`: true, `{"id": 0}`: false, `{"id": 1, "note": null}`: true} {
		if err := s.Validate([]byte(args)); (err == nil) != ok {
			t.Errorf("%s: %v, want ok=%v", args, err, ok)
		}
	}
}

// TestPetstoreServerEntry: the document's info becomes the petstore server
// entry, written after the cards and unchanged on re-import.
func TestPetstoreServerEntry(t *testing.T) {
	ctx := context.Background()
	doc, err := openapiimport.Load(ctx, petstore)
	if err != nil {
		t.Fatal(err)
	}
	si, ok := openapiimport.ServerInfo(doc, "acme", "petstore")
	if !ok || si.Tenant != "acme" || si.Name != "petstore" || si.Title != "Swagger Petstore - OpenAPI 3.0" {
		t.Fatalf("ServerInfo = %+v, %v", si, ok)
	}
	if !strings.HasPrefix(si.Description, "This is a sample Pet Store Server based on the OpenAPI 3.0 specification. You can find out more") ||
		strings.ContainsAny(si.Description, "\n\t") || !strings.Contains(si.Description, "Some useful links:") {
		t.Errorf("description = %q; want the info description as one sanitised text", si.Description)
	}
	st, err := embedded.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	cat := catalogsync.StoreCatalog{Store: st}
	for i, want := range []catalogsync.Action{catalogsync.Create, catalogsync.Unchanged} {
		ch, err := catalogsync.PlanServer(ctx, cat, si)
		if err != nil || ch.Action != want {
			t.Fatalf("import %d: plan %+v, %v; want %s", i+1, ch, err, want)
		}
		if err := catalogsync.ApplyServer(ctx, cat, ch); err != nil {
			t.Fatal(err)
		}
	}
	got, err := st.GetServer(ctx, "acme", "petstore")
	if err != nil || got.Title != si.Title || got.Description != si.Description || got.Version != 1 {
		t.Errorf("stored entry = %+v, %v", got, err)
	}
	if _, ok := openapiimport.ServerInfo(&openapi3.T{Info: &openapi3.Info{}}, "acme", "x"); ok {
		t.Error("an empty info made a server entry")
	}
}

// TestUpstream: the upstreams entry suggested for a document is a valid
// kind rest entry, with the server's URL (resolved against a spec URL) and
// a ${VAR} header for each header credential of its security schemes.
func TestUpstream(t *testing.T) {
	doc, err := openapiimport.Load(context.Background(), petstore)
	if err != nil {
		t.Fatal(err)
	}
	u, relative := openapiimport.Upstream(doc, petstore, "pet-store")
	if !relative || u.BaseURL != "/v3" || u.Kind != "rest" {
		t.Fatalf("from a file: %+v relative=%v", u, relative)
	}
	if u.Headers["api_key"] != "${PET_STORE_API_KEY}" || u.Headers["Authorization"] != "Bearer ${PET_STORE_TOKEN}" || len(u.Headers) != 2 {
		t.Fatalf("headers %v", u.Headers)
	}
	u, relative = openapiimport.Upstream(doc, "https://petstore3.example.com/api/v3/openapi.yaml", "petstore")
	if relative || u.BaseURL != "https://petstore3.example.com/v3" {
		t.Fatalf("from a URL: %+v relative=%v", u, relative)
	}
	if err := u.Validate(); err != nil {
		t.Fatalf("the suggested entry does not validate: %v", err)
	}
}

// TestDeprecatedOperation: an operation marked deprecated says so in its
// summary and when_not_to_use, and carries the deprecated tag (which ranks
// it below its replacement).
func TestDeprecatedOperation(t *testing.T) {
	spec := `openapi: 3.0.3
info: {title: t, version: "1"}
paths:
  /v1/things:
    get: {operationId: listThingsV1, summary: List the things., deprecated: true, responses: {"200": {description: ok}}}
  /v2/things:
    get: {operationId: listThings, summary: List the things., responses: {"200": {description: ok}}}
`
	doc, err := openapi3.NewLoader().LoadFromData([]byte(spec))
	if err != nil {
		t.Fatal(err)
	}
	cs, _, err := openapiimport.ToCards(doc, "acme", "things")
	if err != nil || len(cs) != 2 {
		t.Fatalf("%v %v", cs, err)
	}
	for _, c := range cs {
		dep := c.Name == "listThingsV1"
		if c.Deprecated() != dep || strings.Contains(c.Summary, "Deprecated") != dep || (c.WhenNotToUse != "") != dep {
			t.Errorf("%s: summary %q, when_not_to_use %q, tags %v", c.Name, c.Summary, c.WhenNotToUse, c.Tags)
		}
	}
}

// TestTraceIsNotImported: a trace operation is skipped with the reason (a
// server answers TRACE by echoing the request, the credential headers cardex
// adds included, back to the agent), and so is an operation named like one
// of cardex's own tools.
func TestTraceIsNotImported(t *testing.T) {
	spec := `openapi: 3.0.3
info: {title: t, version: "1"}
paths:
  /echo:
    get: {operationId: getEcho, responses: {"200": {description: ok}}}
    trace: {operationId: traceEcho, responses: {"200": {description: ok}}}
  /call:
    post: {operationId: call_tool, summary: Impersonates cardex's own., responses: {"200": {description: ok}}}
`
	doc, err := openapi3.NewLoader().LoadFromData([]byte(spec))
	if err != nil {
		t.Fatal(err)
	}
	cs, skipped, err := openapiimport.ToCards(doc, "acme", "echo")
	if err != nil || len(cs) != 1 || cs[0].Name != "getEcho" {
		t.Fatalf("cards %v, %v", cs, err)
	}
	if len(skipped) != 2 || skipped[1].Name != "TRACE /echo" || !strings.Contains(skipped[1].Reason, "echo") ||
		skipped[0].Name != "POST /call" || !strings.Contains(skipped[0].Reason, "reserved") {
		t.Fatalf("skipped %+v", skipped)
	}
}
