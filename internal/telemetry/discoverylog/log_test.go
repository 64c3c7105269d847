package discoverylog

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestParseQueryMode(t *testing.T) {
	cases := []struct {
		in      string
		want    QueryMode
		wantErr bool
	}{
		{"raw", QueryRaw, false},
		{"hash", QueryHash, false},
		{"off", QueryOff, false},
		{"", "", true},
		{"RAW", "", true},
		{"hashed", "", true},
		{" raw", "", true},
	}
	for _, tc := range cases {
		got, err := ParseQueryMode(tc.in)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("ParseQueryMode(%q) = %q, %v; want %q, error %v", tc.in, got, err, tc.want, tc.wantErr)
		}
		if err != nil && !strings.Contains(err.Error(), fmt.Sprintf("%q", tc.in)) {
			t.Errorf("ParseQueryMode(%q) error %q does not name the value", tc.in, err)
		}
	}
}

func TestHash(t *testing.T) {
	l, _ := openLog(t, QueryHash)
	if l.Hash("") != "" {
		t.Errorf("Hash(\"\") = %q, want empty", l.Hash(""))
	}
	a, b := l.Hash("alice"), l.Hash("bob")
	if a == b || a != l.Hash("alice") {
		t.Errorf("Hash is not a stable function of its input: %q %q", a, b)
	}
	if _, err := hex.DecodeString(a); err != nil || len(a) != 24 {
		t.Errorf("Hash(alice) = %q, want 24 hex digits", a)
	}
	if strings.Contains(a, "alice") {
		t.Errorf("Hash leaks its input")
	}
	other, err := Open(filepath.Join(t.TempDir(), "other.jsonl"), QueryHash, []byte("another-key-of-enough-bytes"))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if other.Hash("alice") == a {
		t.Errorf("two keys gave the same pseudonym: the hash is not keyed")
	}
}

func TestLoadOrCreateKey(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log-key")
	k1, err := LoadOrCreateKey(path)
	if err != nil || len(k1) != 32 {
		t.Fatalf("create: %v (%d bytes)", err, len(k1))
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v", err, fi.Mode())
	}
	k2, err := LoadOrCreateKey(path)
	if err != nil || string(k1) != string(k2) {
		t.Fatalf("reload gave another key: %v", err)
	}
	os.WriteFile(path, []byte("zz"), 0o600)
	if _, err := LoadOrCreateKey(path); err == nil {
		t.Fatal("a corrupt key file was accepted")
	}
	if _, err := Open(filepath.Join(t.TempDir(), "x.jsonl"), QueryRaw, nil); err == nil {
		t.Fatal("Open accepted an empty key")
	}
}

var testKey = []byte("0123456789abcdef-test-key")

func openLog(t *testing.T, mode QueryMode) (*Log, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "discoveries.jsonl")
	l, err := Open(path, mode, testKey)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return l, path
}

func readEntries(t *testing.T, path string) ([]Entry, []byte) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []Entry
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		dec.DisallowUnknownFields()
		var e Entry
		if err := dec.Decode(&e); err != nil {
			t.Fatalf("line %d: %v: %s", len(out)+1, err, sc.Bytes())
		}
		out = append(out, e)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out, raw
}

func TestAppendQueryModes(t *testing.T) {
	const subject, query = "user-42@example.com", "refund <order> & \"1234\"\nsecond line"
	entry := Entry{
		ID: "d-1", Time: time.Date(2025, 4, 1, 12, 0, 0, 123456000, time.UTC), Tenant: "acme", SessionID: "s",
		TopK: 5, Returned: []Returned{{Server: "orders", Name: "get_order", Score: 0.5, Pinned: true}, {Server: "billing", Name: "get_invoice", Score: 0.25}},
		CandidateCount: 18, LatencyMS: 1.25,
	}
	cases := []struct {
		mode              QueryMode
		wantQuery, wantQH string
	}{
		{QueryRaw, query, ""},
		{QueryHash, "", "hashed"},
		{QueryOff, "", ""},
	}
	for _, tc := range cases {
		t.Run(string(tc.mode), func(t *testing.T) {
			l, path := openLog(t, tc.mode)
			if err := l.Append(entry, subject, query); err != nil {
				t.Fatalf("Append: %v", err)
			}
			// Visible before Close, once flushed.
			if err := l.Flush(); err != nil {
				t.Fatalf("Flush: %v", err)
			}
			got, raw := readEntries(t, path)
			if len(got) != 1 || bytes.Count(raw, []byte("\n")) != 1 {
				t.Fatalf("%d entries, %d newlines, want one line:\n%s", len(got), bytes.Count(raw, []byte("\n")), raw)
			}
			want := entry
			if tc.wantQH == "hashed" {
				tc.wantQH = l.Hash(query)
			}
			want.SubjectHash, want.Query, want.QueryHash = l.Hash(subject), tc.wantQuery, tc.wantQH
			g, _ := json.Marshal(got[0])
			w, _ := json.Marshal(want)
			if !bytes.Equal(g, w) {
				t.Errorf("entry\n got %s\nwant %s", g, w)
			}
			if bytes.Contains(raw, []byte("user-42")) {
				t.Errorf("the subject is logged in clear")
			}
			if tc.mode != QueryRaw && (bytes.Contains(raw, []byte("refund")) || bytes.Contains(raw, []byte("second line"))) {
				t.Errorf("mode %s logs the query text: %s", tc.mode, raw)
			}
			if err := l.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
		})
	}
}

func TestAppendEmptySubject(t *testing.T) {
	l, path := openLog(t, QueryRaw)
	defer l.Close()
	if err := l.Append(Entry{ID: "x", Tenant: "acme", Returned: []Returned{}}, "", ""); err != nil {
		t.Fatal(err)
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	_, raw := readEntries(t, path)
	if bytes.Contains(raw, []byte("subject_hash")) || bytes.Contains(raw, []byte(`"query"`)) {
		t.Errorf("empty subject and query should be left out: %s", raw)
	}
	if !bytes.Contains(raw, []byte(`"returned":[]`)) {
		t.Errorf("an empty shortlist should be logged as []: %s", raw)
	}
}

func TestAppendConcurrentLinesStayWhole(t *testing.T) {
	l, path := openLog(t, QueryHash)
	const writers, each = 16, 50
	var wg sync.WaitGroup
	errs := make(chan error, writers*each)
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				e := Entry{ID: fmt.Sprintf("%d-%d", w, i), Tenant: "acme", Returned: []Returned{{Server: "s", Name: strings.Repeat("n", 200)}}}
				if err := l.Append(e, "subj", "query"); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	got, _ := readEntries(t, path)
	if len(got) != writers*each {
		t.Fatalf("%d lines, want %d", len(got), writers*each)
	}
	seen := map[string]bool{}
	for _, e := range got {
		if seen[e.ID] {
			t.Errorf("id %s twice", e.ID)
		}
		seen[e.ID] = true
	}
}

func TestOpenAppendsAndIsPrivate(t *testing.T) {
	l, path := openLog(t, QueryRaw)
	if err := l.Append(Entry{ID: "first"}, "", "q1"); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l2, err := Open(path, QueryRaw, testKey)
	if err != nil {
		t.Fatal(err)
	}
	if err := l2.Append(Entry{ID: "second"}, "", "q2"); err != nil {
		t.Fatal(err)
	}
	if err := l2.Close(); err != nil {
		t.Fatal(err)
	}
	got, _ := readEntries(t, path)
	if len(got) != 2 || got[0].ID != "first" || got[1].ID != "second" {
		t.Errorf("reopening must append: %+v", got)
	}
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if perm := info.Mode().Perm(); perm&0o077 != 0 {
		t.Errorf("log file mode %v: readable by others", perm)
	}
}

func TestOpenErrorsAndAppendAfterClose(t *testing.T) {
	if _, err := Open(filepath.Join(t.TempDir(), "missing", "dir", "log.jsonl"), QueryRaw, testKey); err == nil {
		t.Errorf("Open in a missing directory succeeded")
	}
	l, _ := openLog(t, QueryRaw)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Append(Entry{ID: "late"}, "", ""); err == nil {
		t.Errorf("Append after Close returned no error")
	}
}

// TestQueueKeepsEveryEntry: appends only queue; Close writes every queued
// entry in order, and nothing is dropped while the queue has room.
func TestQueueKeepsEveryEntry(t *testing.T) {
	l, path := openLog(t, QueryRaw)
	const n = QueueLen / 2
	for i := range n {
		if err := l.Append(Entry{ID: fmt.Sprint(i)}, "s", "q"); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	got, _ := readEntries(t, path)
	if len(got) != n || l.Dropped() != 0 {
		t.Fatalf("%d entries, %d dropped; want %d, 0", len(got), l.Dropped(), n)
	}
	for i, e := range got {
		if e.ID != fmt.Sprint(i) {
			t.Fatalf("line %d is entry %s: out of order", i, e.ID)
		}
	}
	if err := l.Flush(); !errors.Is(err, ErrClosed) {
		t.Errorf("Flush after Close: %v, want ErrClosed", err)
	}
	if err := l.Close(); !errors.Is(err, ErrClosed) {
		t.Errorf("second Close: %v, want ErrClosed", err)
	}
}

// blockingSink holds the writer until released, so the queue fills.
type blockingSink struct{ release chan struct{} }

func (b blockingSink) Discovery(Entry) { <-b.release }

// TestFullQueueDropsAndCounts: when the writer cannot keep up, Append does
// not wait; what does not fit is dropped and counted, and everything that
// was queued is still written.
func TestFullQueueDropsAndCounts(t *testing.T) {
	l, path := openLog(t, QueryOff)
	sink := blockingSink{release: make(chan struct{})}
	l.AddSink(sink)
	const extra = 10
	for i := range QueueLen + 1 + extra { // the writer holds one, the queue QueueLen
		if err := l.Append(Entry{ID: fmt.Sprint(i)}, "", ""); err != nil {
			t.Fatal(err)
		}
	}
	// The writer may not have taken the first entry yet: then one more
	// was dropped.
	if d := l.Dropped(); d != extra && d != extra+1 {
		t.Fatalf("%d dropped, want %d (or %d)", d, extra, extra+1)
	}
	close(sink.release)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	got, _ := readEntries(t, path)
	if uint64(len(got))+l.Dropped() != QueueLen+1+extra {
		t.Fatalf("%d written + %d dropped, want %d appended", len(got), l.Dropped(), QueueLen+1+extra)
	}
}
