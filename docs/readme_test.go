package docs_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// MaxReadmeLines keeps README.md to a few screens (issue 18): what cardex
// is, the two set-up commands, the tour and the map of the guides.
const MaxReadmeLines = 400

// TestReadmeMapsEveryGuide: README.md fits its budget and links every guide
// in docs/, so a new guide cannot be missed from the map.
func TestReadmeMapsEveryGuide(t *testing.T) {
	body, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(body)
	if n := strings.Count(readme, "\n"); n > MaxReadmeLines {
		t.Errorf("README.md has %d lines; the limit is %d: move the detail into a guide in docs/", n, MaxReadmeLines)
	}
	guides, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range guides {
		if !strings.Contains(readme, "](docs/"+g+")") {
			t.Errorf("README.md's map of the docs does not link docs/%s", g)
		}
	}
}
