package mcpfront_test

import (
	"context"
	"strings"
	"testing"

	"github.com/seed0cff8200/cardex/cards"
)

// search_tools with intents brings companions (tools past sessions used
// with the confident matches), marked, only ones the caller may use, and
// none when asked not to.
func TestSearchToolsCompanions(t *testing.T) {
	e := setup(t, false)
	// Sessions of an admin: the file read, then the delete (files:admin),
	// the invoice and the disk usage.
	session := []cards.Key{
		{Tenant: "acme", Server: "files", Name: "read_file"},
		{Tenant: "acme", Server: "files", Name: "delete_file"},
		{Tenant: "acme", Server: "billing", Name: "get_invoice"},
		{Tenant: "acme", Server: "disk", Name: "stat"},
	}
	var uses []cards.CoUse
	for range 20 {
		uses = append(uses, cards.CoUse{Tools: session})
	}
	if _, err := e.ret.RecordCoUse(context.Background(), uses); err != nil {
		t.Fatal(err)
	}
	cs := mustConnect(t, e.url, supportToken)
	args := map[string]any{"intents": []string{"read a text file from the workspace", "check the weather forecast"}, "limit": 5}
	rows, _, text := search(t, cs, args)
	companions := 0
	for _, r := range rows {
		if r.Name == "delete_file" {
			t.Errorf("the support caller (files:read) got files/delete_file: %v", rowNames(rows))
		}
		if w := r.CompanionOf; w != nil {
			companions++
			if w.Server+"/"+w.Name != "files/read_file" {
				t.Errorf("%s/%s is a companion of %s/%s, want files/read_file", r.Server, r.Name, w.Server, w.Name)
			}
		}
	}
	if strings.Contains(text, "delete_file") {
		t.Errorf("the answer mentions delete_file: %s", text)
	}
	if companions == 0 {
		t.Fatalf("no companion in %v: the test shows nothing", rowNames(rows))
	}
	args["no_companions"] = true
	rows, _, _ = search(t, cs, args)
	for _, r := range rows {
		if r.CompanionOf != nil {
			t.Errorf("no_companions: %s/%s is still a companion", r.Server, r.Name)
		}
	}
}
