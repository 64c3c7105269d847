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

// KindServer is the kind of a card-file entry that is a server entry, not
// a card: tenant, name, title, description (and optionally version).
const KindServer = "server"

// serverEntry is a server entry as written in a card file.
type serverEntry struct {
	Kind        string `json:"kind"`
	Tenant      string `json:"tenant"`
	Name        string `json:"name"`
	Title       string `json:"title,omitempty"`
	Description string `json:"description,omitempty"`
	Version     int64  `json:"version,omitempty"`
}

// ParseEntries decodes card data in YAML or JSON: one entry, or a list.
// An entry whose kind is "server" is a server entry (tenant, name, title,
// description); every other one is a card. name is used in error messages
// ("file.yaml#2" names the second entry) and to pick the format (.json is
// JSON, anything else YAML, which is a superset of JSON). Unknown fields
// are errors.
func ParseEntries(name string, data []byte) ([]Card, []ServerInfo, error) {
	items, err := fileItems(name, data)
	if err != nil {
		return nil, nil, err
	}
	var cs []Card
	var ss []ServerInfo
	for i, raw := range items {
		c, si, err := decodeEntry(fmt.Sprintf("%s#%d", name, i+1), raw)
		if err != nil {
			return nil, nil, err
		}
		if si != nil {
			ss = append(ss, *si)
		} else {
			cs = append(cs, *c)
		}
	}
	return cs, ss, nil
}

// decodeEntry decodes one entry of a card file: a server entry when its
// kind is "server", else a card. src names it in errors.
func decodeEntry(src string, raw json.RawMessage) (*Card, *ServerInfo, error) {
	var probe struct {
		Kind string `json:"kind"`
	}
	if json.Unmarshal(raw, &probe) == nil && probe.Kind == KindServer {
		var se serverEntry
		if err := strictDecode(raw, &se); err != nil {
			return nil, nil, fmt.Errorf("%s: server entry: %v", src, err)
		}
		return nil, &ServerInfo{Tenant: se.Tenant, Name: se.Name, Title: se.Title, Description: se.Description, Version: se.Version}, nil
	}
	var c Card
	if err := strictDecode(raw, &c); err != nil {
		return nil, nil, fmt.Errorf("%s: %v", src, err)
	}
	return &c, nil, nil
}

// ParseFile decodes the cards of card data (see ParseEntries); server
// entries are left out.
func ParseFile(name string, data []byte) ([]Card, error) {
	cs, _, err := ParseEntries(name, data)
	return cs, err
}

// fileItems splits card data into its entries, as JSON.
func fileItems(name string, data []byte) ([]json.RawMessage, error) {
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
	var items []json.RawMessage
	if err := json.Unmarshal(js, &items); err != nil {
		return nil, fmt.Errorf("%s: %v", name, err)
	}
	return items, nil
}

func strictDecode(raw []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// Entries are the cards and server entries of card files, each with its
// source ("file.yaml#2").
type Entries struct {
	Cards         []Card
	CardSources   []string
	Servers       []ServerInfo
	ServerSources []string
}

// LoadPath reads the cards of one card file, or of every .yaml, .yml and
// .json file under a directory (recursively, in lexical order); server
// entries are left out (LoadEntries has them). Each returned card's source
// is reported in sources at the same index ("file.yaml#2").
func LoadPath(path string) (cs []Card, sources []string, err error) {
	e, err := LoadEntries(path)
	return e.Cards, e.CardSources, err
}

// LoadEntries reads one card file, or every .yaml, .yml and .json file
// under a directory (recursively, in lexical order): cards and server
// entries, each with its source.
func LoadEntries(path string) (Entries, error) {
	var out Entries
	info, err := os.Stat(path)
	if err != nil {
		return out, err
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
			return out, err
		}
		slices.Sort(files)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return Entries{}, err
		}
		items, err := fileItems(f, data)
		if err != nil {
			return Entries{}, err
		}
		for i, raw := range items {
			src := fmt.Sprintf("%s#%d", f, i+1)
			c, si, err := decodeEntry(src, raw)
			if err != nil {
				return Entries{}, err
			}
			if si != nil {
				out.Servers, out.ServerSources = append(out.Servers, *si), append(out.ServerSources, src)
			} else {
				out.Cards, out.CardSources = append(out.Cards, *c), append(out.CardSources, src)
			}
		}
	}
	return out, nil
}
