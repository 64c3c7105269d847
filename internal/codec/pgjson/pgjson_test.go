package pgjson

import (
	"encoding/json"
	"testing"
)

func TestAppendValue(t *testing.T) {
	text := Type{Kind: String}
	ints := Type{Kind: Integer}
	for _, tc := range []struct {
		name string
		t    Type
		raw  []byte
		want string
	}{
		{"null", text, nil, `null`},
		{"text", text, []byte("a \"b\"\n\\ \x01 é"), `"a \"b\"\n\\ \u0001 é"`},
		{"invalid utf-8", text, []byte{'a', 0xff}, `"a\ufffd"`},
		{"true", Type{Kind: Bool}, []byte("t"), `true`},
		{"false", Type{Kind: Bool}, []byte("f"), `false`},
		{"int8 beyond 2^53", ints, []byte("9007199254740993"), `9007199254740993`},
		{"numeric exact", Type{Kind: Number}, []byte("12345678901234567890.000100"), `12345678901234567890.000100`},
		{"float exponent", Type{Kind: Number}, []byte("1e+100"), `1e+100`},
		{"NaN", Type{Kind: Number}, []byte("NaN"), `"NaN"`},
		{"-Infinity", Type{Kind: Number}, []byte("-Infinity"), `"-Infinity"`},
		{"jsonb", Type{Kind: JSON}, []byte(`{"a": [1, 2.50], "b": null}`), `{"a":[1,2.50],"b":null}`},
		{"bytea", Type{Kind: Bytea}, []byte(`\x00ff10`), `"AP8Q"`},
		{"timestamptz", Type{Kind: Timestamptz}, []byte("2025-03-01 12:00:00.5+00"), `"2025-03-01T12:00:00.5Z"`},
		{"timestamptz offset", Type{Kind: Timestamptz}, []byte("2025-03-01 12:00:00+05:30"), `"2025-03-01T06:30:00Z"`},
		{"timestamptz infinity", Type{Kind: Timestamptz}, []byte("infinity"), `"infinity"`},
		{"timestamp", Type{Kind: Timestamp}, []byte("2025-03-01 12:00:00.123"), `"2025-03-01T12:00:00.123"`},
		{"date", Type{Kind: Date}, []byte("2025-03-01"), `"2025-03-01"`},
		{"int array", Type{Kind: Array, Elem: &ints, Delim: ','}, []byte("{1,NULL,3}"), `[1,null,3]`},
		{"text array", Type{Kind: Array, Elem: &text, Delim: ','}, []byte(`{"a,b",c,"q\"x","NULL",""}`), `["a,b","c","q\"x","NULL",""]`},
		{"2-d array", Type{Kind: Array, Elem: &ints, Delim: ','}, []byte("{{1,2},{3,4}}"), `[[1,2],[3,4]]`},
		{"bounds", Type{Kind: Array, Elem: &ints, Delim: ','}, []byte("[0:1]={7,8}"), `[7,8]`},
		{"empty array", Type{Kind: Array, Elem: &ints, Delim: ','}, []byte("{}"), `[]`},
		{"box array", Type{Kind: Array, Elem: &text, Delim: ';'}, []byte("{(1,1),(0,0);(2,2),(1,1)}"), `["(1,1),(0,0)","(2,2),(1,1)"]`},
		{"broken array", Type{Kind: Array, Elem: &ints, Delim: ','}, []byte("{1,2"), `"{1,2"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := string(tc.t.AppendValue(nil, tc.raw))
			if got != tc.want {
				t.Fatalf("got %s, want %s", got, tc.want)
			}
			if !json.Valid([]byte(got)) {
				t.Fatalf("not JSON: %s", got)
			}
		})
	}
}

func TestSchema(t *testing.T) {
	ints := Type{Kind: Integer}
	for _, tc := range []struct {
		t        Type
		nullable bool
		want     string
	}{
		{ints, false, `{"type":"integer"}`},
		{ints, true, `{"type":["integer","null"]}`},
		{Type{Kind: Number}, false, `{"type":["number","string"]}`},
		{Type{Kind: JSON}, false, `{}`},
		{Type{Kind: Bytea}, true, `{"contentEncoding":"base64","type":["string","null"]}`},
		{Type{Kind: String, Enum: []string{"a", "b"}}, true, `{"enum":["a","b",null],"type":["string","null"]}`},
		{Type{Kind: Array, Elem: &ints}, false, `{"items":{"type":["integer","null"]},"type":"array"}`},
		{Type{Kind: Timestamptz, Format: "date-time"}, false, `{"format":"date-time","type":"string"}`},
	} {
		b, _ := json.Marshal(tc.t.Schema(tc.nullable))
		if string(b) != tc.want {
			t.Errorf("%+v nullable=%v: %s, want %s", tc.t, tc.nullable, b, tc.want)
		}
	}
}
