package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// The client libraries (clients/) and the worked examples (examples/*-ts,
// examples/*-py) run here against a real `cardex serve` with the example
// catalogue, the model API replaced by a local server that speaks its real
// wire protocol and answers with recorded responses (examples/testdata, one a line).
// Outside CI the test skips when node, npm packages (npm ci) or python3 are
// missing; under CI=true it fails instead.

// repoRoot is the module's root, from cmd/cardex.
const repoRoot = "../.."

func needTool(t *testing.T, what string, ok bool) {
	t.Helper()
	if ok {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s is missing (CI=true): scripts/test installs it", what)
	}
	t.Skipf("%s is missing: run scripts/test (npm ci) or install it", what)
}

func have(name string) bool { _, err := exec.LookPath(name); return err == nil }

func TestClientsAndExamples(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary, node and python")
	}
	needTool(t, "python3", have("python3"))
	needTool(t, "node", have("node") && have("npm"))
	_, err := os.Stat(filepath.Join(repoRoot, "node_modules", "@connectrpc", "connect-node", "package.json"))
	needTool(t, "the npm packages (npm ci)", err == nil)

	bin := buildBinary(t)
	addr, h := jsonServer(t, bin)
	if out, code := run(t, bin, addr, "cards", "apply", "-f", filepath.Join(repoRoot, "examples", "catalog"), "--token", jsonAdminToken); code != 0 {
		t.Fatalf("cards apply: %s", out)
	}
	env := append(os.Environ(), "CARDEX_HTTP_URL=http://"+h, "CARDEX_TOKEN="+jsonDiscoverToken,
		"CARDEX_ADMIN_TOKEN="+jsonAdminToken, "CARDEX_AGENT_TOKEN="+jsonAgentToken)
	sh := func(t *testing.T, dir string, env []string, name string, args ...string) string {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Dir, cmd.Env = dir, env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
		return string(out)
	}

	t.Run("python client", func(t *testing.T) {
		out := sh(t, filepath.Join(repoRoot, "clients", "python"), env, "python3", "-m", "unittest", "-v", "tests.test_client")
		if !strings.Contains(out, "\nOK\n") && !strings.HasSuffix(strings.TrimSpace(out), "OK") || strings.Contains(out, "skipped") {
			t.Fatalf("python tests:\n%s", out)
		}
	})
	t.Run("typescript client", func(t *testing.T) {
		out := sh(t, repoRoot, env, "npm", "test", "--workspace", "@cardex/client")
		if !strings.Contains(out, "# fail 0") || strings.Contains(out, "# pass 0") {
			t.Fatalf("typescript tests:\n%s", out)
		}
	})
	// The TypeScript examples type-check against the SDKs' own types.
	sh(t, repoRoot, env, "npm", "run", "examples")
	for _, ex := range []struct {
		dir      string
		provider string
		run      []string
	}{
		{"anthropic-ts", "anthropic", []string{"node", "../dist/anthropic-ts/main.mjs"}},
		{"openai-ts", "openai", []string{"node", "../dist/openai-ts/main.mjs"}},
		{"anthropic-py", "anthropic", []string{"python3", "main.py"}},
		{"openai-py", "openai", []string{"python3", "main.py"}},
	} {
		t.Run("example "+ex.dir, func(t *testing.T) {
			fake := newFakeProvider(t, ex.provider)
			srv := httptest.NewServer(fake)
			defer srv.Close()
			// The model APIs' own variables of this machine are left out.
			exEnv := slices.DeleteFunc(slices.Clone(env), func(kv string) bool {
				return strings.HasPrefix(kv, "ANTHROPIC_") || strings.HasPrefix(kv, "OPENAI_")
			})
			exEnv = append(exEnv, "ANTHROPIC_API_KEY=test-key", "ANTHROPIC_BASE_URL="+srv.URL,
				"OPENAI_API_KEY=test-key", "OPENAI_BASE_URL="+srv.URL+"/v1")
			out := sh(t, filepath.Join(repoRoot, "examples", ex.dir), exEnv, ex.run[0], ex.run[1:]...)
			if fake.err() != nil {
				t.Fatalf("the model API refused a request: %v\n%s", fake.err(), out)
			}
			if fake.turns() != 3 {
				t.Fatalf("%d model calls; want the 3 recorded ones\n%s", fake.turns(), out)
			}
			for _, want := range []string{"orders__track_shipment", "authorized orders/track_shipment", "in transit"} {
				if !strings.Contains(out, want) {
					t.Errorf("output lacks %q:\n%s", want, out)
				}
			}
		})
	}
}

// fakeProvider is a model API that answers with recorded responses, in
// order, and checks each request as the real API would: the tools a
// tool_reference names must be defined with defer_loading (Anthropic), a
// tool_search_output must answer the model's tool_search_call (OpenAI),
// and the recorded answer may only call a tool the conversation loaded
// through cardex's answer.
type fakeProvider struct {
	t        *testing.T
	provider string
	answers  []json.RawMessage
	mu       sync.Mutex
	served   int
	failure  error
}

func newFakeProvider(t *testing.T, provider string) *fakeProvider {
	file := map[string]string{"anthropic": "anthropic-messages.jsonl", "openai": "openai-responses.jsonl"}[provider]
	raw, err := os.ReadFile(filepath.Join(repoRoot, "examples", "testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeProvider{t: t, provider: provider}
	for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		if !json.Valid([]byte(line)) {
			t.Fatalf("%s: a line is not JSON: %s", file, line)
		}
		f.answers = append(f.answers, json.RawMessage(line))
	}
	return f
}

func (f *fakeProvider) turns() int { f.mu.Lock(); defer f.mu.Unlock(); return f.served }
func (f *fakeProvider) err() error { f.mu.Lock(); defer f.mu.Unlock(); return f.failure }

func (f *fakeProvider) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var req map[string]any
	err := json.NewDecoder(r.Body).Decode(&req)
	if err == nil {
		switch f.provider {
		case "anthropic":
			err = f.checkAnthropic(r, req)
		default:
			err = f.checkOpenAI(r, req)
		}
	}
	if err == nil && f.served >= len(f.answers) {
		err = fmt.Errorf("more model calls than the %d recorded", len(f.answers))
	}
	w.Header().Set("Content-Type", "application/json")
	if err != nil {
		f.failure = err
		w.WriteHeader(http.StatusBadRequest)
		if f.provider == "anthropic" {
			json.NewEncoder(w).Encode(map[string]any{"type": "error", "error": map[string]any{"type": "invalid_request_error", "message": err.Error()}})
		} else {
			json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"type": "invalid_request_error", "message": err.Error()}})
		}
		return
	}
	w.Header().Set("request-id", fmt.Sprintf("req_%d", f.served))
	w.Write(f.answers[f.served])
	f.served++
}

// called returns the tool names a recorded answer calls (not the search).
func (f *fakeProvider) called(answer json.RawMessage) []string {
	var a struct {
		Content []struct{ Type, Name string }
		Output  []struct{ Type, Name string }
	}
	_ = json.Unmarshal(answer, &a)
	var out []string
	for _, c := range append(a.Content, a.Output...) {
		if (c.Type == "tool_use" && c.Name != "search_tools") || c.Type == "function_call" {
			out = append(out, c.Name)
		}
	}
	return out
}

func (f *fakeProvider) checkAnthropic(r *http.Request, req map[string]any) error {
	// The key goes in x-api-key, or as a bearer token (the SDK's way now).
	key := r.Header.Get("x-api-key") == "test-key" || r.Header.Get("Authorization") == "Bearer test-key"
	if r.URL.Path != "/v1/messages" || !key || r.Header.Get("anthropic-version") == "" {
		return fmt.Errorf("%s %s without the API key and anthropic-version (headers %v)", r.Method, r.URL.Path, slices.Sorted(maps.Keys(r.Header)))
	}
	deferred := map[string]bool{}
	for _, tl := range asList(req["tools"]) {
		m := asMap(tl)
		if m["defer_loading"] == true {
			deferred[fmt.Sprint(m["name"])] = true
		} else if m["name"] != "search_tools" {
			return fmt.Errorf("tool %v is not deferred: the example loads only its search tool up front", m["name"])
		}
		if _, ok := m["input_schema"].(map[string]any); !ok {
			return fmt.Errorf("tool %v has no input_schema", m["name"])
		}
	}
	loaded := map[string]bool{}
	var results []string
	for _, msg := range asList(req["messages"]) {
		for _, block := range asList(asMap(msg)["content"]) {
			b := asMap(block)
			if b["type"] != "tool_result" {
				continue
			}
			results = append(results, fmt.Sprint(b["tool_use_id"]))
			for _, c := range asList(b["content"]) {
				if cm := asMap(c); cm["type"] == "tool_reference" {
					name := fmt.Sprint(cm["tool_name"])
					if !deferred[name] {
						return fmt.Errorf("tool_reference_unresolved: %s is not a tool defined with defer_loading", name)
					}
					loaded[name] = true
				}
			}
		}
	}
	if len(results) != f.served {
		return fmt.Errorf("turn %d: %d tool results; want one per earlier tool call (%v)", f.served, len(results), results)
	}
	if f.served < len(f.answers) {
		for _, name := range f.called(f.answers[f.served]) {
			if !loaded[name] {
				return fmt.Errorf("the recorded answer calls %s, which cardex's answer did not load (loaded: %v)", name, loaded)
			}
		}
	}
	return nil
}

func (f *fakeProvider) checkOpenAI(r *http.Request, req map[string]any) error {
	if r.URL.Path != "/v1/responses" || r.Header.Get("Authorization") != "Bearer test-key" {
		return fmt.Errorf("%s %s without a bearer key (headers %v)", r.Method, r.URL.Path, slices.Sorted(maps.Keys(r.Header)))
	}
	search := false
	for _, tl := range asList(req["tools"]) {
		if m := asMap(tl); m["type"] == "tool_search" && m["execution"] == "client" {
			search = true
		}
	}
	if !search {
		return fmt.Errorf("no client-executed tool_search tool")
	}
	calls := map[string]bool{}
	loaded := map[string]bool{}
	outputs := 0
	for _, item := range asList(req["input"]) {
		m := asMap(item)
		switch m["type"] {
		case "tool_search_call", "function_call":
			calls[fmt.Sprint(m["call_id"])] = true
		case "tool_search_output":
			if m["execution"] != "client" || !calls[fmt.Sprint(m["call_id"])] {
				return fmt.Errorf("tool_search_output for call %v, which no tool_search_call made", m["call_id"])
			}
			for _, tl := range asList(m["tools"]) {
				fn := asMap(tl)
				if _, ok := fn["parameters"].(map[string]any); fn["type"] != "function" || !ok {
					return fmt.Errorf("tool_search_output holds %v, not a function tool with parameters", fn)
				}
				loaded[fmt.Sprint(fn["name"])] = true
			}
			outputs++
		case "function_call_output":
			if !calls[fmt.Sprint(m["call_id"])] {
				return fmt.Errorf("function_call_output for call %v, which no function_call made", m["call_id"])
			}
			outputs++
		}
	}
	if outputs != f.served {
		return fmt.Errorf("turn %d: %d call outputs; want one per earlier call", f.served, outputs)
	}
	if f.served < len(f.answers) {
		for _, name := range f.called(f.answers[f.served]) {
			if !loaded[name] {
				return fmt.Errorf("the recorded answer calls %s, which cardex's tool_search_output did not load (loaded: %v)", name, loaded)
			}
		}
	}
	return nil
}

func asList(v any) []any         { l, _ := v.([]any); return l }
func asMap(v any) map[string]any { m, _ := v.(map[string]any); return m }
