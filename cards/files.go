package cards

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"

	yaml "go.yaml.in/yaml/v4"
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

// ParseEntries decodes card data in YAML or JSON: one entry, or a list of
// entries (YAML may hold several documents). An entry whose kind is
// "server" is a server entry (tenant, name, title, description); every
// other one is a card. name is used in error messages and to pick the
// format (.json is JSON, anything else YAML). Unknown fields are errors.
// YAML is read by the YAML 1.2 core schema: yes, no, on and off are
// strings, not booleans. Every error names the file, the line and the field
// ("cards.yaml:7: tags[1]: want a string, got a boolean (true)").
func ParseEntries(name string, data []byte) ([]Card, []ServerInfo, error) {
	items, err := fileItems(name, data)
	if err != nil {
		return nil, nil, err
	}
	var cs []Card
	var ss []ServerInfo
	for _, item := range items {
		c, si, err := decodeEntry(item)
		if err != nil {
			return nil, nil, fmt.Errorf("%s:%v", name, err)
		}
		if si != nil {
			ss = append(ss, *si)
		} else {
			cs = append(cs, c)
		}
	}
	return cs, ss, nil
}

// ParseFile decodes the cards of card data (see ParseEntries); server
// entries are left out.
func ParseFile(name string, data []byte) ([]Card, error) {
	cs, _, err := ParseEntries(name, data)
	return cs, err
}

// fileItems splits card data into its entries.
func fileItems(name string, data []byte) ([]*node, error) {
	if len(data) > MaxFileBytes {
		return nil, fmt.Errorf("%s: %d bytes; the limit is %d", name, len(data), MaxFileBytes)
	}
	var docs []*node
	var err error
	if strings.EqualFold(filepath.Ext(name), ".json") {
		docs, err = parseJSON(data)
	} else {
		docs, err = parseYAML(data)
	}
	if err != nil {
		return nil, fmt.Errorf("%s:%v", name, err)
	}
	var out []*node
	for _, d := range docs {
		if d.kind == kindArray {
			out = append(out, d.items...)
		} else {
			out = append(out, d)
		}
	}
	return out, nil
}

// decodeEntry decodes one entry of a card file: a server entry when its
// kind is "server", else a card.
func decodeEntry(n *node) (Card, *ServerInfo, error) {
	if n.kind == kindObject {
		for i, k := range n.keys {
			if k == "kind" && string(n.vals[i].raw) == `"`+KindServer+`"` {
				var se serverEntry
				if err := decodeStrict(n, &se, serverFields, "a server entry is a mapping of fields (kind: server, tenant, name, title, description)"); err != nil {
					return Card{}, nil, err
				}
				return Card{}, &ServerInfo{Tenant: se.Tenant, Name: se.Name, Title: se.Title, Description: se.Description, Version: se.Version}, nil
			}
		}
	}
	c, err := decodeCard(n)
	return c, nil, err
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
// entries, each with its source ("file.yaml#2": the second entry).
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
		for i, item := range items {
			src := fmt.Sprintf("%s#%d", f, i+1)
			c, si, err := decodeEntry(item)
			if err != nil {
				return Entries{}, fmt.Errorf("%s:%v", f, err)
			}
			if si != nil {
				out.Servers, out.ServerSources = append(out.Servers, *si), append(out.ServerSources, src)
			} else {
				out.Cards, out.CardSources = append(out.Cards, c), append(out.CardSources, src)
			}
		}
	}
	return out, nil
}

// A node is a value of a card file with the line it starts on, the same
// tree for YAML and JSON.
type node struct {
	kind  int
	line  int
	keys  []string // object
	vals  []*node  // object
	items []*node  // array
	raw   []byte   // scalar, as JSON
	// start and end are the node's bytes in the JSON that encode writes.
	start, end int
}

const (
	kindScalar = iota
	kindObject
	kindArray
)

// maxDepth bounds nesting (schemas included), and maxNodes the values a
// file may expand to through YAML aliases.
const (
	maxDepth = 1000
	maxNodes = 1 << 20
)

func lineErr(line int, format string, args ...any) error {
	return fmt.Errorf("%d: %s", line, fmt.Sprintf(format, args...))
}

func parseYAML(data []byte) ([]*node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var docs []*node
	count := 0
	for {
		var doc yaml.Node
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			msg := strings.TrimPrefix(err.Error(), "yaml: ")
			if strings.HasPrefix(msg, "line ") {
				// "line 3: did not find expected key" → "3: did not find expected key"
				return nil, errors.New(strings.TrimPrefix(msg, "line "))
			}
			return nil, fmt.Errorf("1: %s", msg)
		}
		if len(doc.Content) == 0 {
			continue
		}
		n, err := fromYAML(doc.Content[0], 0, &count)
		if err != nil {
			return nil, err
		}
		if n.kind == kindScalar && string(n.raw) == "null" {
			continue // an empty document
		}
		docs = append(docs, n)
	}
}

func fromYAML(y *yaml.Node, depth int, count *int) (*node, error) {
	if depth > maxDepth {
		return nil, lineErr(y.Line, "nested more than %d levels deep", maxDepth)
	}
	if *count++; *count > maxNodes {
		return nil, lineErr(y.Line, "expands to more than %d values (YAML aliases?)", maxNodes)
	}
	n := &node{line: y.Line}
	switch y.Kind {
	case yaml.AliasNode:
		return fromYAML(y.Alias, depth+1, count)
	case yaml.MappingNode:
		n.kind = kindObject
		seen := map[string]int{}
		for i := 0; i+1 < len(y.Content); i += 2 {
			k, v := y.Content[i], y.Content[i+1]
			if k.Kind == yaml.AliasNode {
				k = k.Alias
			}
			if k.Kind != yaml.ScalarNode {
				return nil, lineErr(k.Line, "a key must be a plain name, not a list or mapping")
			}
			if k.Value == "<<" && k.ShortTag() == "!!merge" {
				return nil, lineErr(k.Line, "merge keys (<<) are not supported in card files")
			}
			if first, dup := seen[k.Value]; dup {
				return nil, lineErr(k.Line, "%s: appears twice in one mapping (first on line %d)", k.Value, first)
			}
			seen[k.Value] = k.Line
			val, err := fromYAML(v, depth+1, count)
			if err != nil {
				return nil, err
			}
			n.keys = append(n.keys, k.Value)
			n.vals = append(n.vals, val)
		}
	case yaml.SequenceNode:
		n.kind = kindArray
		for _, c := range y.Content {
			item, err := fromYAML(c, depth+1, count)
			if err != nil {
				return nil, err
			}
			n.items = append(n.items, item)
		}
	case yaml.ScalarNode:
		raw, err := yamlScalar(y)
		if err != nil {
			return nil, err
		}
		n.raw = raw
	default:
		return nil, lineErr(y.Line, "unexpected YAML node")
	}
	return n, nil
}

// yamlScalar is a YAML scalar as JSON: strings (and timestamps, binary and
// custom tags) as strings, numbers as written when they are JSON numbers.
func yamlScalar(y *yaml.Node) ([]byte, error) {
	switch y.ShortTag() {
	case "!!null":
		return []byte("null"), nil
	case "!!bool":
		if strings.EqualFold(y.Value, "true") {
			return []byte("true"), nil
		}
		return []byte("false"), nil
	case "!!int":
		if jsonNumber(y.Value) {
			return []byte(y.Value), nil
		}
		v := strings.ReplaceAll(strings.TrimPrefix(y.Value, "+"), "_", "")
		if i, err := strconv.ParseInt(v, 0, 64); err == nil {
			return []byte(strconv.FormatInt(i, 10)), nil
		}
		if u, err := strconv.ParseUint(v, 0, 64); err == nil {
			return []byte(strconv.FormatUint(u, 10)), nil
		}
		return nil, lineErr(y.Line, "%q is not a number JSON can hold", y.Value)
	case "!!float":
		if jsonNumber(y.Value) {
			return []byte(y.Value), nil
		}
		f, err := strconv.ParseFloat(strings.ReplaceAll(strings.TrimPrefix(y.Value, "+"), "_", ""), 64)
		if err != nil || f != f || f > 1.7976931348623157e308 || f < -1.7976931348623157e308 {
			return nil, lineErr(y.Line, "%q is not a number JSON can hold (write it in quotes to mean the text)", y.Value)
		}
		return []byte(strconv.FormatFloat(f, 'g', -1, 64)), nil
	}
	return marshalString(y.Value), nil
}

func jsonNumber(s string) bool {
	return s != "" && (s[0] == '-' || (s[0] >= '0' && s[0] <= '9')) && json.Valid([]byte(s))
}

func marshalString(s string) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return bytes.TrimRight(b.Bytes(), "\n")
}

// parseJSON reads a JSON file into nodes, with lines, refusing duplicate
// keys (which encoding/json would silently resolve to the last).
func parseJSON(data []byte) ([]*node, error) {
	lines := newLineIndex(data)
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var docs []*node
	for {
		n, err := fromJSON(dec, lines, 0)
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			var se *json.SyntaxError
			if errors.As(err, &se) {
				return nil, lineErr(lines.at(int(se.Offset)), "%s", strings.TrimPrefix(se.Error(), "json: "))
			}
			return nil, err
		}
		if n.kind == kindScalar && string(n.raw) == "null" {
			continue
		}
		docs = append(docs, n)
	}
}

func fromJSON(dec *json.Decoder, lines lineIndex, depth int) (*node, error) {
	tok, err := dec.Token()
	if err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, lineErr(lines.at(int(dec.InputOffset())), "unexpected end of JSON")
		}
		return nil, err
	}
	line := lines.at(int(dec.InputOffset()) - 1)
	if depth > maxDepth {
		return nil, lineErr(line, "nested more than %d levels deep", maxDepth)
	}
	n := &node{line: line}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			n.kind = kindObject
			seen := map[string]int{}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				k, _ := kt.(string)
				kl := lines.at(int(dec.InputOffset()) - 1)
				if first, dup := seen[k]; dup {
					return nil, lineErr(kl, "%s: appears twice in one object (first on line %d)", k, first)
				}
				seen[k] = kl
				v, err := fromJSON(dec, lines, depth+1)
				if err != nil {
					return nil, err
				}
				n.keys = append(n.keys, k)
				n.vals = append(n.vals, v)
			}
		case '[':
			n.kind = kindArray
			for dec.More() {
				v, err := fromJSON(dec, lines, depth+1)
				if err != nil {
					return nil, err
				}
				n.items = append(n.items, v)
			}
		}
		if _, err := dec.Token(); err != nil { // the closing delimiter
			return nil, err
		}
	case string:
		n.raw = marshalString(t)
	case json.Number:
		n.raw = []byte(t)
	case bool:
		n.raw = []byte(strconv.FormatBool(t))
	case nil:
		n.raw = []byte("null")
	}
	return n, nil
}

// lineIndex maps byte offsets to 1-based lines: the offsets at which
// lines start.
type lineIndex []int

func newLineIndex(data []byte) lineIndex {
	idx := lineIndex{0}
	for i, b := range data {
		if b == '\n' {
			idx = append(idx, i+1)
		}
	}
	return idx
}

func (li lineIndex) at(off int) int {
	i, found := slices.BinarySearch(li, off)
	if found {
		return i + 1
	}
	return i
}

// encode writes n as JSON and records where each node's bytes are.
func encode(n *node, b *bytes.Buffer) {
	n.start = b.Len()
	switch n.kind {
	case kindScalar:
		b.Write(n.raw)
	case kindObject:
		b.WriteByte('{')
		for i, k := range n.keys {
			if i > 0 {
				b.WriteByte(',')
			}
			b.Write(marshalString(k))
			b.WriteByte(':')
			encode(n.vals[i], b)
		}
		b.WriteByte('}')
	case kindArray:
		b.WriteByte('[')
		for i, it := range n.items {
			if i > 0 {
				b.WriteByte(',')
			}
			encode(it, b)
		}
		b.WriteByte(']')
	}
	n.end = b.Len()
}

// find is the innermost node that ends at off, with its path.
func find(n *node, off int, path string) (*node, string) {
	if off < n.start || off > n.end {
		return nil, ""
	}
	for i, v := range n.vals {
		if got, p := find(v, off, join(path, n.keys[i])); got != nil {
			return got, p
		}
	}
	for i, it := range n.items {
		if got, p := find(it, off, fmt.Sprintf("%s[%d]", path, i)); got != nil {
			return got, p
		}
	}
	if n.end == off {
		return n, path
	}
	return nil, ""
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

var (
	cardFields = jsonFields(reflect.TypeFor[Card]())
	// nestedFields are the fields of a card's mappings, by the card field
	// holding them.
	nestedFields = map[string][]string{
		"annotations":            jsonFields(reflect.TypeFor[Annotations]()),
		"search_examples_source": jsonFields(reflect.TypeFor[ExamplesSource]()),
	}
	serverFields = jsonFields(reflect.TypeFor[serverEntry]())
)

func jsonFields(t reflect.Type) []string {
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		if name, _, _ := strings.Cut(f.Tag.Get("json"), ","); name != "" && name != "-" {
			out = append(out, name)
		}
	}
	return out
}

// decodeCard checks the fields of one card and decodes it; errors name the
// line and the field.
func decodeCard(n *node) (Card, error) {
	var c Card
	err := decodeStrict(n, &c, cardFields, "a card is a mapping of fields (tenant, server, name, summary, ...)")
	return c, err
}

// decodeStrict checks that n is a mapping of the given fields and decodes
// it into v; errors name the line and the field. what says what n should
// be, for the error when it is not a mapping.
func decodeStrict(n *node, v any, fields []string, what string) error {
	if n.kind != kindObject {
		return lineErr(n.line, "%s, not %s", what, kindName(n))
	}
	for i, k := range n.keys {
		if !slices.Contains(fields, k) {
			return lineErr(n.vals[i].line, "unknown field %q (the fields are %s)", k, strings.Join(fields, ", "))
		}
		if v, sub := n.vals[i], nestedFields[k]; sub != nil && v.kind == kindObject {
			for j, ak := range v.keys {
				if !slices.Contains(sub, ak) {
					return lineErr(v.vals[j].line, "%s.%s: unknown field (the fields are %s)", k, ak, strings.Join(sub, ", "))
				}
			}
		}
	}
	var b bytes.Buffer
	encode(n, &b)
	dec := json.NewDecoder(bytes.NewReader(b.Bytes()))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil {
		return nil
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		at, path := find(n, int(te.Offset), "")
		if at == nil {
			at, path = n, te.Field
		}
		msg := fmt.Sprintf("want %s, got %s", typeName(te.Type), kindName(at))
		if at.kind == kindScalar {
			msg += " (" + string(at.raw) + ")"
			if te.Type.Kind() == reflect.String {
				msg += "; write it in quotes to mean the text"
			}
		}
		return lineErr(at.line, "%s: %s", path, msg)
	}
	// Any other decoding error (a time that does not parse): the entry's line.
	return lineErr(n.line, "%s", strings.TrimPrefix(err.Error(), "json: "))
}

func kindName(n *node) string {
	switch n.kind {
	case kindObject:
		return "a mapping"
	case kindArray:
		return "a list"
	}
	switch r := string(n.raw); {
	case r == "null":
		return "nothing (null)"
	case r == "true" || r == "false":
		return "a boolean"
	case strings.HasPrefix(r, `"`):
		return "a string"
	}
	return "a number"
}

func typeName(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean (true or false)"
	case reflect.Int, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint32, reflect.Uint64:
		return "a whole number"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return "a JSON schema (a mapping)"
		}
		return "a list"
	case reflect.Struct:
		if t.Name() == "Time" {
			return "a time such as 2025-01-02T03:04:05Z"
		}
		return "a mapping"
	case reflect.Pointer:
		return typeName(t.Elem())
	}
	return t.String()
}
