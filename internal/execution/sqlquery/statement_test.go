package sqlquery

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name, sql, want string
		params          []string
	}{
		{"plain", "SELECT 1", "SELECT 1", nil},
		{"with", "with x as (select 1) select * from x", "with x as (select 1) select * from x", nil},
		{"parenthesised", "(SELECT 1) UNION (SELECT 2)", "(SELECT 1) UNION (SELECT 2)", nil},
		{"leading comments", "-- why\n/* what */ SELECT 1", "-- why\n/* what */ SELECT 1", nil},
		{"trailing semicolon", "SELECT 1;  -- done\n", "SELECT 1", nil},
		{"params", "SELECT * FROM t WHERE a = :a AND b > :b_2 OR a = :a", "SELECT * FROM t WHERE a = $1 AND b > $2 OR a = $1", []string{"a", "b_2"}},
		{"cast is not a param", "SELECT :x::int, '1'::text", "SELECT $1::int, '1'::text", []string{"x"}},
		{"colon in string", "SELECT ':no; DELETE' , E'\\':no;' , :yes", "SELECT ':no; DELETE' , E'\\':no;' , $1", []string{"yes"}},
		{"doubled quote", "SELECT 'it''s :no; x'", "SELECT 'it''s :no; x'", nil},
		{"quoted identifier", `SELECT "a;:b""c" FROM t`, `SELECT "a;:b""c" FROM t`, nil},
		{"dollar quote", "SELECT $$ :no; DROP $$, $f$ ; $$ :no $f$", "SELECT $$ :no; DROP $$, $f$ ; $$ :no $f$", nil},
		{"comment hides", "SELECT 1 -- ; DELETE :no\n, /* ; /* nested ; */ :no */ :p", "SELECT 1 -- ; DELETE :no\n, /* ; /* nested ; */ :no */ $1", []string{"p"}},
		{"identifier with dollar", "SELECT a$1 FROM t", "SELECT a$1 FROM t", nil},
		{"slice bound number", "SELECT arr[1:2] FROM t", "SELECT arr[1:2] FROM t", nil},
		{"E is an identifier too", "SELECT e FROM t WHERE e = 'x\\'", "SELECT e FROM t WHERE e = 'x\\'", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, err := Parse(tc.sql)
			if err != nil {
				t.Fatalf("Parse(%q): %v", tc.sql, err)
			}
			if st.SQL != tc.want || !slices.Equal(st.Params, tc.params) {
				t.Fatalf("Parse(%q) = %q %v, want %q %v", tc.sql, st.SQL, st.Params, tc.want, tc.params)
			}
		})
	}
}

func TestParseRefuses(t *testing.T) {
	for _, tc := range []struct {
		name, sql, reason, msg string
	}{
		{"empty", "  -- nothing\n", RefusedStatement, "no statement"},
		{"write", "DELETE FROM t", RefusedStatement, `starts with "DELETE"`},
		{"write in parens", "(UPDATE t SET a = 1)", RefusedStatement, "UPDATE"},
		{"set", "SET ROLE admin", RefusedStatement, "SET"},
		{"two statements", "SELECT 1; DELETE FROM t", RefusedStatement, "more than one statement"},
		{"commit breakout", "SELECT 1; COMMIT; DELETE FROM t", RefusedStatement, "more than one statement"},
		{"second after comment", "SELECT 1; /* x */ SELECT 2", RefusedStatement, "more than one statement"},
		{"second after string", "SELECT ';'; SELECT 2", RefusedStatement, "more than one statement"},
		{"second after E string", `SELECT E'\';'; DELETE FROM t`, RefusedStatement, "more than one statement"},
		{"second after dollar", "SELECT $a$;$a$; DELETE FROM t", RefusedStatement, "more than one statement"},
		{"positional", "SELECT $1", RefusedArguments, "positional"},
		{"unterminated string", "SELECT 'abc", RefusedStatement, "inside a quoted string"},
		{"unterminated E string", `SELECT E'abc\'; DELETE FROM t`, RefusedStatement, "inside a quoted string"},
		{"unterminated identifier", `SELECT "abc`, RefusedStatement, "quoted identifier"},
		{"unterminated comment", "SELECT 1 /* ; DELETE", RefusedStatement, "comment"},
		{"unterminated dollar", "SELECT $x$ ; DELETE", RefusedStatement, "dollar-quoted"},
		{"long param", "SELECT :" + strings.Repeat("a", 64), RefusedArguments, "parameter"},
		{"string first", "'SELECT'", RefusedStatement, "starts with"},
		{"too long", "SELECT '" + strings.Repeat("x", MaxSQLBytes) + "'", RefusedArguments, "limit"},
		// PostgreSQL ends a -- comment at \r as at \n: what follows is SQL.
		{"comment ended by CR", "SELECT :a::text AS a --c\r, $1 AS b", RefusedArguments, "positional"},
		{"second after a comment ended by CR", "SELECT 1 --c\r; DELETE FROM t", RefusedStatement, "more than one statement"},
		{"second after comments ended by CR", "SELECT 1; --c\rDELETE FROM t", RefusedStatement, "more than one statement"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(tc.sql)
			var r *Refusal
			if !errors.As(err, &r) || r.Reason != tc.reason || !strings.Contains(r.Message, tc.msg) {
				t.Fatalf("Parse(%.60q) = %v, want a %s refusal mentioning %q", tc.sql, err, tc.reason, tc.msg)
			}
		})
	}
}

func TestBind(t *testing.T) {
	args, err := DecodeArgs([]byte(`{"sql": "SELECT :s, :n, :b, :z, :j, :region", "params": {"s": "x'y", "n": 12.50, "b": true, "z": null, "j": {"k": [1, 2]}}}`))
	if err != nil {
		t.Fatal(err)
	}
	st, values, err := Bind(args, map[string]string{"region": "eu"})
	if err != nil {
		t.Fatal(err)
	}
	got := make([]string, len(values))
	for i, v := range values {
		if v == nil {
			got[i] = "NULL"
		} else {
			got[i] = string(v)
		}
	}
	if st.SQL != "SELECT $1, $2, $3, $4, $5, $6" || !slices.Equal(got, []string{"x'y", "12.50", "true", "NULL", `{"k":[1,2]}`, "eu"}) {
		t.Fatalf("%q %q", st.SQL, got)
	}
	for _, tc := range []struct {
		args, reason, msg string
	}{
		{`{"sql": "SELECT :region", "params": {"region": "us"}}`, RefusedReserved, "reserved"},
		{`{"sql": "SELECT 1", "params": {"region": "us"}}`, RefusedReserved, "reserved"},
		{`{"sql": "SELECT :a"}`, RefusedArguments, `params has no "a"`},
		{`{"sql": "SELECT :a", "params": {"a": 1, "b": 2}}`, RefusedArguments, "has no :b"},
		{`{"sql": "SELECT 1", "limit": 5}`, RefusedArguments, "unknown field"},
		{`{"params": {}}`, RefusedArguments, "sql is required"},
		{`{"sql": "SELECT :a", "params": {"a-b": 1}}`, RefusedArguments, "not a parameter name"},
	} {
		a, err := DecodeArgs([]byte(tc.args))
		if err == nil {
			_, _, err = Bind(a, map[string]string{"region": "eu"})
		}
		var r *Refusal
		if !errors.As(err, &r) || r.Reason != tc.reason || !strings.Contains(r.Message, tc.msg) {
			t.Errorf("%s: %v, want a %s refusal mentioning %q", tc.args, err, tc.reason, tc.msg)
		}
	}
}

// FuzzParse: the statement checker refuses with a *Refusal or accepts, and
// reads line ends as PostgreSQL's lexer does: \n and \r both end a --
// comment, so turning every \n into \r (or \r\n into \n) changes neither
// its verdict nor the parameters it found. An accepted statement has its
// :name parameters, each once, and nothing after a statement's end.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"SELECT :a::text AS a --c\r, $1 AS b",
		"SELECT 1 --c\n; DELETE FROM t",
		"WITH x AS (SELECT :n) SELECT * FROM x WHERE y = :n -- :z\n",
		"SELECT E'\\';', $t$ ; $t$, \"a;\" /* /* ; */ */ FROM t;",
		"SELECT ':x', :y, $$:z$$ --:w\r\n",
		"(SELECT 1)",
		"select U&'\\0041' --\r;x",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, sql string) {
		st, err := Parse(sql)
		if err != nil {
			var r *Refusal
			if !errors.As(err, &r) || r.Message == "" {
				t.Fatalf("Parse(%q): %v is not a refusal", sql, err)
			}
		} else {
			seen := map[string]bool{}
			for i, p := range st.Params {
				if seen[p] || !strings.Contains(st.SQL, fmt.Sprintf("$%d", i+1)) {
					t.Fatalf("Parse(%q): parameters %v in %q", sql, st.Params, st.SQL)
				}
				seen[p] = true
			}
		}
		for _, alt := range []string{strings.ReplaceAll(sql, "\n", "\r"), strings.ReplaceAll(sql, "\r\n", "\n"), strings.ReplaceAll(sql, "\r", "\n")} {
			st2, err2 := Parse(alt)
			if (err == nil) != (err2 == nil) || !slices.Equal(st.Params, st2.Params) || (err != nil && refusalReason(err) != refusalReason(err2)) {
				t.Fatalf("line ends change the verdict:\n%q: %v %v\n%q: %v %v", sql, st.Params, err, alt, st2.Params, err2)
			}
		}
	})
}

func refusalReason(err error) string {
	var r *Refusal
	if errors.As(err, &r) {
		return r.Reason
	}
	return ""
}
