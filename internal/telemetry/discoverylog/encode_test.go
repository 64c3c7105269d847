package discoverylog

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestAppendEntryIsJSONMarshal holds the writer's encoder to json.Marshal,
// byte for byte, on entries that reach each of its branches.
func TestAppendEntryIsJSONMarshal(t *testing.T) {
	at := time.Date(2026, 12, 2, 6, 30, 1, 123456789, time.UTC)
	base := func() Entry {
		return Entry{ID: "3f1c", Time: at, Tenant: "acme", TopK: 5, CandidateCount: 1000, LatencyMS: 0.412,
			Returned: []Returned{{Server: "github", Name: "create_issue", Score: 0.031}}}
	}
	with := func(f func(*Entry)) Entry { e := base(); f(&e); return e }
	cases := []struct {
		name string
		e    Entry
		ok   bool // encoded by appendEntry itself
	}{
		{"plain", base(), true},
		{"zero entry", Entry{}, true},
		{"nil returned is null", with(func(e *Entry) { e.Returned = nil }), true},
		{"empty returned is []", with(func(e *Entry) { e.Returned = []Returned{} }), true},
		{"every optional field", with(func(e *Entry) {
			e.SubjectHash, e.SessionID, e.Query, e.QueryHash = "ab12", "s-1", "open a ticket", "cd34"
			e.Intents, e.IntentHashes = []string{"a", "b c"}, []string{"h1", "h2"}
			e.LowConfidence, e.Degraded, e.Abstained = true, true, true
			e.Returned = append(e.Returned, Returned{Server: "jira", Name: "create", Score: 1, Pinned: true}, Returned{Score: -0.5})
		}), true},
		{"empty intents omitted", with(func(e *Entry) { e.Intents, e.IntentHashes = []string{}, []string{} }), true},
		{"empty intent kept", with(func(e *Entry) { e.Intents = []string{""} }), true},
		{"HTML escaped", with(func(e *Entry) { e.Query = `<a href="x">&amp;</a>` }), true},
		{"quotes and backslashes", with(func(e *Entry) { e.Query = `say "hi" \ bye`; e.Tenant = `t\` }), true},
		{"control characters", with(func(e *Entry) { e.Query = "a\nb\tc\rd\x00e\x1f\bf\fg\x7f" }), true},
		{"unicode", with(func(e *Entry) { e.Query = "créer un ticket 工单 🎫 \u2028\u2029" }), true},
		{"invalid UTF-8", with(func(e *Entry) { e.Query = "bad \xff\xfe bytes"; e.Intents = []string{"\xc3"} }), true},
		{"time with zone", with(func(e *Entry) { e.Time = time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("x", 5*3600+1800)) }), true},
		{"zero time", with(func(e *Entry) { e.Time = time.Time{} }), true},
		{"time beyond year 9999", with(func(e *Entry) { e.Time = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) }), false},
		{"negative counts", with(func(e *Entry) { e.TopK, e.CandidateCount = -1, math.MinInt }), true},
		{"negative zero", with(func(e *Entry) { e.LatencyMS = math.Copysign(0, -1) }), true},
		{"tiny float", with(func(e *Entry) { e.LatencyMS = 1e-7; e.Returned[0].Score = 1.5e-9 }), true},
		{"float at the cut-offs", with(func(e *Entry) { e.LatencyMS = 1e-6; e.Returned[0].Score = 1e21 }), true},
		{"just under the cut-off", with(func(e *Entry) { e.LatencyMS = 999999999999999900000 }), true},
		{"huge float", with(func(e *Entry) { e.LatencyMS = 1.7976931348623157e308 }), true},
		{"NaN score", with(func(e *Entry) { e.Returned[0].Score = math.NaN() }), false},
		{"infinite latency", with(func(e *Entry) { e.LatencyMS = math.Inf(-1) }), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			want, werr := json.Marshal(tc.e)
			got, ok := appendEntry([]byte("prefix"), &tc.e)
			if ok != tc.ok {
				t.Fatalf("ok = %v, want %v (json.Marshal: %v)", ok, tc.ok, werr)
			}
			if !ok {
				if string(got) != "prefix" {
					t.Errorf("refused entry left %q, want the buffer as given", got)
				}
				return
			}
			if werr != nil {
				t.Fatalf("encoded an entry json.Marshal refuses (%v)", werr)
			}
			if !bytes.Equal(got, append([]byte("prefix"), want...)) {
				t.Errorf("got  %s\nwant prefix%s", got, want)
			}
		})
	}
}

// TestAppendEntryRandom compares the encoder with json.Marshal on random
// entries: random bytes in every string, random floats of every magnitude.
func TestAppendEntryRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(22, 7))
	alphabet := []string{"a", "Z", "0", " ", "\"", "\\", "<", ">", "&", "\n", "\x01", "\x7f", "é", "工", "\u2028", "\xff", "/", "_"}
	str := func() string {
		var sb strings.Builder
		for range rng.IntN(6) {
			sb.WriteString(alphabet[rng.IntN(len(alphabet))])
		}
		return sb.String()
	}
	strs := func() []string {
		if rng.IntN(3) == 0 {
			return nil
		}
		out := make([]string, rng.IntN(3))
		for i := range out {
			out[i] = str()
		}
		return out
	}
	float := func() float64 {
		f := math.Ldexp(rng.Float64(), rng.IntN(160)-80)
		if rng.IntN(2) == 0 {
			f = -f
		}
		if rng.IntN(10) == 0 {
			f = 0
		}
		return f
	}
	for i := range 5000 {
		e := Entry{ID: str(), Time: time.Unix(rng.Int64N(1<<35), rng.Int64N(1e9)).In(time.FixedZone("z", 60*(rng.IntN(1500)-750))),
			Tenant: str(), SubjectHash: str(), SessionID: str(), Query: str(), QueryHash: str(), Intents: strs(), IntentHashes: strs(),
			TopK: rng.IntN(100), CandidateCount: rng.IntN(1 << 20), LatencyMS: float(),
			LowConfidence: rng.IntN(2) == 0, Degraded: rng.IntN(2) == 0, Abstained: rng.IntN(2) == 0}
		if rng.IntN(4) > 0 {
			e.Returned = make([]Returned, rng.IntN(4))
			for j := range e.Returned {
				e.Returned[j] = Returned{Server: str(), Name: str(), Score: float(), Pinned: rng.IntN(2) == 0}
			}
		}
		want, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := appendEntry(nil, &e)
		if !ok || !bytes.Equal(got, want) {
			t.Fatalf("entry %d: ok %v\ngot  %s\nwant %s", i, ok, got, want)
		}
	}
}

// TestWriterLinesAndHashes checks the writer end to end: each line is
// json.Marshal's encoding of the entry as logged, the subject (remembered
// from one entry to the next) and the query hashed as Hash hashes them,
// and an entry json.Marshal refuses is not written and is the log's error.
func TestWriterLinesAndHashes(t *testing.T) {
	for _, mode := range []QueryMode{QueryRaw, QueryHash, QueryOff} {
		t.Run(string(mode), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "d.jsonl")
			l, err := Open(path, mode, []byte("a-key-of-enough-bytes-0123456789"))
			if err != nil {
				t.Fatal(err)
			}
			type call struct {
				e              Entry
				subject, query string
			}
			at := time.Date(2026, 12, 2, 7, 0, 0, 0, time.UTC)
			calls := []call{
				{Entry{ID: "1", Time: at, Tenant: "acme", Intents: []string{"x <y>", "z"}, Returned: []Returned{{Server: "s", Name: "n", Score: 0.5}}}, "alice", "q1"},
				{Entry{ID: "2", Time: at, Tenant: "acme"}, "alice", "q2"},
				{Entry{ID: "3", Time: at, Tenant: "acme"}, "bob", ""},
				{Entry{ID: "4", Time: at, Tenant: "acme"}, "", "q4"},
				{Entry{ID: "5", Time: at, Tenant: "acme"}, "alice", "q5"},
				{Entry{ID: "6", Time: at, Tenant: "acme", LatencyMS: math.NaN()}, "carol", "q6"},
				{Entry{ID: "7", Time: at, Tenant: "acme"}, "carol", "q7"},
			}
			var want bytes.Buffer
			for _, c := range calls {
				if err := l.Append(c.e, c.subject, c.query); err != nil {
					t.Fatal(err)
				}
				e := c.e
				e.SubjectHash = l.Hash(c.subject)
				switch mode {
				case QueryRaw:
					e.Query = c.query
				case QueryHash:
					e.QueryHash = l.Hash(c.query)
					e.Intents = nil
					for _, in := range c.e.Intents {
						e.IntentHashes = append(e.IntentHashes, l.Hash(in))
					}
				case QueryOff:
					e.Intents = nil
				}
				b, err := json.Marshal(e)
				if err != nil {
					continue // not written
				}
				want.Write(append(b, '\n'))
			}
			if err := l.Close(); err == nil || !strings.Contains(err.Error(), "NaN") {
				t.Errorf("Close = %v, want the NaN entry's encoding error", err)
			}
			got, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want.Bytes()) {
				t.Errorf("log:\n%s\nwant:\n%s", got, want.Bytes())
			}
		})
	}
}

func BenchmarkWrite(b *testing.B) {
	l, err := Open(filepath.Join(b.TempDir(), "d.jsonl"), QueryRaw, []byte("a-key-of-enough-bytes-0123456789"))
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	e := Entry{ID: "0b7d6f0e-5d7c-4a43-9d43-1f4f2a0c9b11", Time: time.Now().UTC(), Tenant: "acme", SessionID: "s", TopK: 5,
		CandidateCount: 1000, LatencyMS: 0.412, Intents: []string{"create a ticket"}}
	for i := range 5 {
		e.Returned = append(e.Returned, Returned{Server: "github", Name: "tool_" + string(rune('a'+i)), Score: 0.03 / float64(i+1)})
	}
	it := item{e: e, subject: "admin", query: "create a ticket for the failing build"}
	b.ReportAllocs()
	for b.Loop() {
		l.write(it)
	}
}
