package cards

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"
)

// MaxFileBytes bounds one card file.
const MaxFileBytes = 8 << 20

// ParseFile decodes card data in YAML or JSON: one card, or a list of cards.
// name is used in error messages and to pick the format (.json is JSON,
// anything else YAML, which is a superset of JSON). Unknown fields are errors.
func ParseFile(name string, data []byte) ([]Card, error) {
	if len(data) > MaxFileBytes {
		return nil, fmt.Errorf("%s: %d bytes; the limit is %d", name, len(data), MaxFileBytes)
	}
	js := data
	if !strings.EqualFold(filepath.Ext(name), ".json") {
		var err error
		if js, err = yaml.YAMLToJSON(data); err != nil {
			return nil, fmt.Errorf("%s: %v", name, err)
		}
	}
	js = bytes.TrimSpace(js)
	if len(js) == 0 || string(js) == "null" {
		return nil, nil
	}
	if js[0] != '[' {
		js = append(append([]byte{'['}, js...), ']')
	}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	var out []Card
	if err := dec.Decode(&out); err != nil {
		return nil, fmt.Errorf("%s: %v", name, err)
	}
	return out, nil
}

// LoadPath reads one card file, or every .yaml, .yml and .json file under a
// directory (recursively, in lexical order). Each returned card's source is
// reported in sources at the same index ("file.yaml#2").
func LoadPath(path string) (cs []Card, sources []string, err error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, nil, err
	}
	var files []string
	if !info.IsDir() {
		files = []string{path}
	} else {
		err = filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			switch strings.ToLower(filepath.Ext(p)) {
			case ".yaml", ".yml", ".json":
				if !d.IsDir() {
					files = append(files, p)
				}
			}
			return nil
		})
		if err != nil {
			return nil, nil, err
		}
		slices.Sort(files)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, nil, err
		}
		got, err := ParseFile(f, data)
		if err != nil {
			return nil, nil, err
		}
		for i := range got {
			cs = append(cs, got[i])
			sources = append(sources, fmt.Sprintf("%s#%d", f, i+1))
		}
	}
	return cs, sources, nil
}
