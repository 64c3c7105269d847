package openapiimport_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/seed0cff8200/cardex/cards"
	"github.com/seed0cff8200/cardex/internal/sources/openapiimport"
)

// FuzzImport loads an OpenAPI document as `cardex import openapi` does and
// maps it to cards: never a panic, and every card it produces is valid as
// it is (normalised, so Normalize leaves it unchanged).
func FuzzImport(f *testing.F) {
	petstore, err := os.ReadFile("../../../testdata/openapi/petstore3.yaml")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(petstore)
	f.Add([]byte(`{"openapi":"3.0.3","info":{"title":"t","version":"1"},"paths":{"/a/{id}":{"get":{"operationId":"getA","parameters":[{"name":"id","in":"path","required":true,"schema":{"type":"string","nullable":true}}],"responses":{"200":{"description":"ok","content":{"application/json":{"schema":{"$ref":"#/components/schemas/A"}}}}}}}},"components":{"schemas":{"A":{"type":"object","properties":{"next":{"$ref":"#/components/schemas/A"}}}}}}`))
	f.Add([]byte("openapi: 3.1.0\ninfo: {title: t, version: '1'}\npaths:\n  /x:\n    post:\n      requestBody: {content: {application/json: {schema: {type: object, properties: {a: {type: integer, exclusiveMinimum: 0}}}}}}\n      responses: {'201': {description: created}}\n"))
	f.Add([]byte("swagger: '2.0'\n"))
	f.Add([]byte(`{"openapi":"3.0.0","info":{"title":"t","version":"1"},"paths":{"/cardex__x":{"get":{"operationId":"cardex__evil","responses":{"200":{"description":"x"}}}}}}`))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, spec []byte) {
		if len(spec) > 1<<18 {
			return
		}
		ext := ".json"
		if len(bytes.TrimSpace(spec)) == 0 || bytes.TrimSpace(spec)[0] != '{' {
			ext = ".yaml"
		}
		p := filepath.Join(dir, "spec"+ext)
		if err := os.WriteFile(p, spec, 0o600); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		doc, err := openapiimport.Load(ctx, p)
		if err != nil {
			return
		}
		cs, _, err := openapiimport.ToCards(doc, "acme", "api")
		if err != nil {
			return
		}
		for i := range cs {
			again := cs[i].Clone()
			if err := cards.Normalize(&again); err != nil {
				t.Fatalf("card %s is not valid: %v", cs[i].Name, err)
			}
			if !cards.SameContent(&cs[i], &again) {
				t.Fatalf("card %s is not normalised", cs[i].Name)
			}
		}
	})
}
