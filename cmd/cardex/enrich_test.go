package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/seed0cff8200/cardex/internal/testkit/chatfake"
)

// enrichCards writes a card file of n tools of one server, plus one card
// whose examples a person wrote.
func enrichCards(t *testing.T, tenant string, n int) string {
	t.Helper()
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "---\ntenant: %s\nserver: files\nname: tool_%02d\nsummary: Does file thing number %d for %s.\n", tenant, i, i, tenant)
	}
	fmt.Fprintf(&b, "---\ntenant: %s\nserver: files\nname: curated\nsummary: A tool a person curated.\nsearch_examples: [my own phrase, another of mine]\n", tenant)
	p := filepath.Join(t.TempDir(), "cards.yaml")
	if err := os.WriteFile(p, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

type cardOut struct {
	Name           string   `json:"name"`
	Version        int64    `json:"version"`
	SearchExamples []string `json:"search_examples"`
	Source         *struct {
		Author        string `json:"author"`
		Model         string `json:"model"`
		PromptVersion string `json:"prompt_version"`
	} `json:"search_examples_source"`
}

func getCard(t *testing.T, bin, addr, tenant, name string) cardOut {
	t.Helper()
	out, code := run(t, bin, addr, "cards", "get", "files/"+name, "--tenant", tenant, "-o", "json")
	var c cardOut
	if err := json.Unmarshal([]byte(out), &c); code != 0 || err != nil {
		t.Fatalf("cards get %s: exit %d, %v\n%s", name, code, err, out)
	}
	return c
}

// TestEnrichCommand runs `cardex enrich` and `import --enrich` against a
// running server and a local OpenAI-compatible chat server: writes,
// progress, reruns that cost nothing, a person's examples left alone by
// --all, a dry run for review, and a run killed midway that resumes.
func TestEnrichCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	t.Setenv("CARDEX_LLM_API_KEY", "sk-test-key")
	bin := buildBinary(t)
	addr, _ := startServer(t, bin, t.TempDir())
	model := chatfake.New(t)
	var answered atomic.Int32
	model.Content(func(r chatfake.Request) string { answered.Add(1); return chatfake.Phrases(r) })
	cache := t.TempDir()
	llm := []string{"--llm-url", model.URL, "--llm-model", "fake-llm", "--cache-dir", cache}
	enrich := func(args ...string) (string, string, int) {
		return runErr(t, bin, addr, append(append([]string{"enrich"}, args...), llm...)...)
	}

	if out, code := run(t, bin, addr, "cards", "apply", "-f", enrichCards(t, "acme", 6)); code != 0 {
		t.Fatalf("apply: %s", out)
	}
	out, errOut, code := enrich("--tenant", "acme", "--llm-stream")
	if code != 0 {
		t.Fatalf("enrich: exit %d\n%s\n%s", code, out, errOut)
	}
	if !strings.Contains(out, "6 written, 0 unchanged, 0 kept a person's, 0 failed; skipped: 0 current, 1 a person's") ||
		!strings.Contains(out, "model calls 6, cache hits 0") || !strings.Contains(out, "I need to tool 03") {
		t.Errorf("enrich stdout:\n%s", out)
	}
	if !strings.Contains(errOut, "enrich: 6/6 cards (100%)") || !strings.Contains(errOut, "prompt enrich-v1") {
		t.Errorf("enrich stderr (progress):\n%s", errOut)
	}
	for _, r := range model.Requests() {
		if r.Auth != "Bearer sk-test-key" || !r.Stream || r.Model != "fake-llm" {
			t.Fatalf("model request %+v", r)
		}
	}
	c := getCard(t, bin, addr, "acme", "tool_03")
	if len(c.SearchExamples) != 6 || c.Source == nil || c.Source.Author != "model" || c.Source.Model != "fake-llm" || c.Source.PromptVersion != "enrich-v1" {
		t.Errorf("tool_03 after enrich: %+v", c)
	}

	// Rerun, and --all: nothing to do, no model call; the person's card is
	// left alone.
	calls := model.Calls()
	out, _, code = enrich("--tenant", "acme", "--all")
	if code != 0 || !strings.Contains(out, "skipped: 6 current, 1 a person's") || model.Calls() != calls {
		t.Errorf("enrich --all: exit %d, %d calls\n%s", code, model.Calls()-calls, out)
	}
	if p := getCard(t, bin, addr, "acme", "curated"); !slices.Equal(p.SearchExamples, []string{"my own phrase", "another of mine"}) || p.Source == nil || p.Source.Author != "person" {
		t.Errorf("the person's card after enrich --all: %+v", p)
	}
	// Applying the card file again (no examples stated) keeps them.
	run(t, bin, addr, "cards", "apply", "-f", enrichCards(t, "acme", 6))
	if c := getCard(t, bin, addr, "acme", "tool_03"); len(c.SearchExamples) != 6 {
		t.Errorf("re-applying the card file dropped the examples: %+v", c)
	}

	// A dry run for review: YAML, nothing written, and the real run after
	// it costs no model call.
	if out, code := run(t, bin, addr, "cards", "apply", "-f", enrichCards(t, "globex", 3)); code != 0 {
		t.Fatalf("apply: %s", out)
	}
	calls = model.Calls()
	out, errOut, code = enrich("--tenant", "globex", "--dry-run", "-o", "yaml")
	var review struct {
		Items []struct {
			Card           struct{ Name string } `json:"card"`
			Outcome        string                `json:"outcome"`
			SearchExamples []string              `json:"search_examples"`
		} `json:"items"`
	}
	if err := yaml.Unmarshal([]byte(out), &review); code != 0 || err != nil || len(review.Items) != 3 || review.Items[0].Outcome != "dry_run" || len(review.Items[0].SearchExamples) != 6 {
		t.Fatalf("dry run: exit %d, %v\n%s\n%s", code, err, out, errOut)
	}
	if c := getCard(t, bin, addr, "globex", "tool_00"); len(c.SearchExamples) != 0 {
		t.Error("a dry run wrote examples")
	}
	out, _, code = enrich("--tenant", "globex", "-o", "json")
	var rep struct {
		Calls     int `json:"model_calls"`
		CacheHits int `json:"cache_hits"`
	}
	if err := json.Unmarshal([]byte(out), &rep); code != 0 || err != nil || rep.Calls != 0 || rep.CacheHits != 3 || model.Calls()-calls != 3 {
		t.Errorf("after the dry run: exit %d, %v, %+v, %d calls in all\n%s", code, err, rep, model.Calls()-calls, out)
	}

	// Killed midway: the model answers 4 cards, then hangs; the run is
	// killed. The next run finishes the rest, and no card is asked twice.
	if out, code := run(t, bin, addr, "cards", "apply", "-f", enrichCards(t, "initech", 12)); code != 0 {
		t.Fatalf("apply: %s", out)
	}
	answered.Store(0)
	model.HoldFrom(model.Calls() + 4)
	killCache := t.TempDir()
	llmKill := []string{"--llm-url", model.URL, "--llm-model", "fake-llm", "--cache-dir", killCache}
	killed := exec.Command(bin, append([]string{"enrich", "--tenant", "initech", "--concurrency", "2"}, llmKill...)...)
	killed.Env = append(os.Environ(), "CARDEX_ADDR="+addr)
	if err := killed.Start(); err != nil {
		t.Fatal(err)
	}
	// Killed once the 4 answers have reached it (they are in its cache)
	// and it waits for more.
	cached := func() int {
		m, _ := filepath.Glob(filepath.Join(killCache, "*", "*.json"))
		return len(m)
	}
	deadline := time.Now().Add(30 * time.Second)
	for cached() < 4 || model.Calls() < int(answered.Load())+1 {
		if time.Now().After(deadline) {
			killed.Process.Kill()
			t.Fatal("the run did not reach the held answers")
		}
		time.Sleep(10 * time.Millisecond)
	}
	killed.Process.Kill()
	killed.Wait()
	// The killed run's held requests end before the hold is released, so
	// none of them is answered to a client that has gone.
	for model.Waiting() > 0 {
		if time.Now().After(deadline) {
			t.Fatal("the killed run's held requests did not end")
		}
		time.Sleep(10 * time.Millisecond)
	}
	model.Release()
	first := answered.Load()
	out, errOut, code = runErr(t, bin, addr, append([]string{"enrich", "--tenant", "initech"}, llmKill...)...)
	if code != 0 {
		t.Fatalf("resumed run: exit %d\n%s\n%s", code, out, errOut)
	}
	if first != 4 || answered.Load() != 12 {
		t.Errorf("the killed run had %d answers, both runs %d; want 4 and 12 (no card asked twice)\n%s", first, answered.Load(), out)
	}
	for i := range 12 {
		if c := getCard(t, bin, addr, "initech", fmt.Sprintf("tool_%02d", i)); len(c.SearchExamples) != 6 {
			t.Errorf("tool_%02d after the resumed run: %+v", i, c)
		}
	}

	// import --enrich: the imported operations get examples.
	answered.Store(0)
	out, errOut, code = runErr(t, bin, addr, append([]string{"import", "openapi", "../../testdata/openapi/petstore3.yaml",
		"--tenant", "acme", "--server", "petstore", "--scopes", "pets:read", "--enrich"}, llm...)...)
	if code != 0 || !strings.Contains(out, "19 created") || !strings.Contains(out, "19 written") || answered.Load() != 19 {
		t.Fatalf("import --enrich: exit %d, %d answers\n%s\n%s", code, answered.Load(), out, errOut)
	}
	out, _ = run(t, bin, addr, "cards", "get", "petstore/findPetsByStatus", "--tenant", "acme", "-o", "json")
	if !strings.Contains(out, `"search_examples"`) || !strings.Contains(out, "I need to findPetsByStatus") {
		t.Errorf("an imported card after --enrich:\n%s", out)
	}

	// Flags are checked before anything is done.
	for _, args := range [][]string{
		{"enrich", "--tenant", "acme"},
		{"enrich", "--tenant", "acme", "--llm-url", model.URL, "--llm-model", "m", "--phrases", "33"},
		{"enrich", "--tenant", "acme", "--llm-url", model.URL, "--llm-model", "m", "-o", "xml"},
		{"import", "openapi", "x.yaml", "--tenant", "acme", "--server", "s", "--enrich"},
		{"enrich", "--tenant", "acme", "--llm-url", model.URL, "--llm-model", "m", "files/tool_00", "other/tool_01"},
		{"enrich", "--tenant", "acme", "--llm-url", model.URL, "--llm-model", "m", "tool_00"},
	} {
		if _, errOut, code := runErr(t, bin, addr, args...); code != 2 {
			t.Errorf("%v: exit %d, want 2\n%s", args, code, errOut)
		}
	}
}

// TestServeEnriches: `serve --enrich-url` gives new cards search examples in
// the background, and /metrics shows the worker's work.
func TestServeEnriches(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildBinary(t)
	model := chatfake.New(t)
	data := t.TempDir()
	addr, httpAddr, _ := startServerHTTP(t, bin, data, "--enrich-url", model.URL, "--enrich-model", "fake-llm", "--enrich-rate", "6000")
	if out, code := run(t, bin, addr, "cards", "apply", "-f", enrichCards(t, "acme", 4)); code != 0 {
		t.Fatalf("apply: %s", out)
	}
	deadline := time.Now().Add(30 * time.Second)
	for i := 0; i < 4; {
		if c := getCard(t, bin, addr, "acme", fmt.Sprintf("tool_%02d", i)); len(c.SearchExamples) == 6 && c.Source.Model == "fake-llm" {
			i++
			continue
		}
		if time.Now().After(deadline) {
			t.Fatalf("tool_%02d has no examples after 30s", i)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if p := getCard(t, bin, addr, "acme", "curated"); p.Source == nil || p.Source.Author != "person" {
		t.Errorf("the person's card: %+v", p)
	}
	fams := scrapeMetrics(t, "http://"+httpAddr+"/metrics")
	if metricValue(fams, "cardex_enrich_leader") != 1 || metricValue(fams, "cardex_enrich_cards_total", "outcome", "written") != 4 ||
		metricValue(fams, "cardex_enrich_model_calls_total") != 4 {
		t.Errorf("enrichment series: leader %v, written %v, calls %v", metricValue(fams, "cardex_enrich_leader"),
			metricValue(fams, "cardex_enrich_cards_total", "outcome", "written"), metricValue(fams, "cardex_enrich_model_calls_total"))
	}
	if _, err := os.Stat(filepath.Join(data, "enrich-cache")); err != nil {
		t.Errorf("no answer cache in the data directory: %v", err)
	}
	if _, errOut, code := runErr(t, bin, addr, "serve", "--data-dir", t.TempDir(), "--enrich-url", model.URL); code != 2 || !strings.Contains(errOut, "--enrich-model") {
		t.Errorf("serve with --enrich-url alone: exit %d: %s", code, errOut)
	}
}
