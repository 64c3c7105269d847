package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/seed0cff8200/cardex/cards"
	"github.com/seed0cff8200/cardex/cards/embedded"
	"github.com/seed0cff8200/cardex/embed"
	"github.com/seed0cff8200/cardex/retriever"
)

// embeddingsServer is a loopback server speaking the OpenAI embeddings
// protocol with 8-dimensional vectors; it counts the texts it embedded.
type embeddingsServer struct {
	*httptest.Server
	mu     sync.Mutex
	texts  int
	reqs   int
	auth   string
	models map[string]bool
}

func newEmbeddingsServer(t *testing.T) *embeddingsServer {
	s := &embeddingsServer{models: map[string]bool{}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Model string   `json:"model"`
			Input []string `json:"input"`
		}
		if r.URL.Path != "/v1/embeddings" || json.NewDecoder(r.Body).Decode(&req) != nil {
			w.WriteHeader(http.StatusNotFound)
			io.WriteString(w, `{"error":"no such route"}`)
			return
		}
		s.mu.Lock()
		s.texts += len(req.Input)
		s.reqs++
		s.auth = r.Header.Get("Authorization")
		s.models[req.Model] = true
		s.mu.Unlock()
		type item struct {
			Index     int       `json:"index"`
			Embedding []float64 `json:"embedding"`
		}
		var data []item
		for i, text := range req.Input {
			v := make([]float64, 8)
			for j, c := range []byte(text) {
				v[(j+int(c))%8] += float64(c%7) + 1
			}
			data = append(data, item{Index: i, Embedding: v})
		}
		json.NewEncoder(w).Encode(map[string]any{"data": data})
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *embeddingsServer) counts() (texts, reqs int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.texts, s.reqs
}

// seedStore writes n cards (every fifth pending) into a new embedded store.
func seedStore(t *testing.T, n int) (dir string, all []cards.Card) {
	t.Helper()
	dir = t.TempDir()
	st, err := embedded.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for i := range n {
		c := cards.Card{Tenant: []string{"acme", "globex"}[i%2], Server: fmt.Sprintf("srv%d", i%3), Name: fmt.Sprintf("tool_%03d", i),
			Summary: fmt.Sprintf("Does thing number %d for a customer.", i), Aliases: []string{fmt.Sprintf("thing %d", i)}}
		if i%5 == 0 {
			c.Status = cards.StatusPending
		}
		all = append(all, c)
	}
	if _, err := st.Put(context.Background(), all); err != nil {
		t.Fatal(err)
	}
	// A server entry is no card, and a learned phrasing is part of its
	// card's text, as the retriever embeds it.
	if _, err := st.PutServers(context.Background(), []cards.ServerInfo{{Tenant: "acme", Name: "srv0", Title: "Server zero"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.AddLearned(context.Background(), all[1].Key(), "a phrasing learned from use"); err != nil {
		t.Fatal(err)
	}
	// One deleted card must not be embedded.
	extra := cards.Card{Tenant: "acme", Server: "srv0", Name: "gone", Summary: "Deleted."}
	if _, err := st.Put(context.Background(), []cards.Card{extra}); err != nil {
		t.Fatal(err)
	}
	if err := st.Delete(context.Background(), extra.Key(), 0); err != nil {
		t.Fatal(err)
	}
	return dir, all
}

func runCLI(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errb bytes.Buffer
	cmd := rootCmd()
	cmd.SetArgs(args)
	cmd.SetOut(&out)
	cmd.SetErr(&errb)
	err = cmd.ExecuteContext(context.Background())
	return out.String(), errb.String(), err
}

func TestReindexOpenAI(t *testing.T) {
	srv := newEmbeddingsServer(t)
	dir, all := seedStore(t, 150)
	t.Setenv("CARDEX_EMBED_API_KEY", "sk-reindex-test")
	args := []string{"reindex", "--data-dir", dir, "--embedder", "openai", "--embed-url", srv.URL + "/v1", "--embed-model", "mini-embed", "--embed-batch", "50"}
	out, errOut, err := runCLI(t, args...)
	if err != nil {
		t.Fatalf("reindex: %v\nstderr:\n%s", err, errOut)
	}
	model := "openai:mini-embed@" + strings.TrimPrefix(srv.URL, "http://")
	if !strings.Contains(out, "150 cards embedded with "+model+" (dim 8), 0 already up to date") {
		t.Errorf("stdout: %q", out)
	}
	if !strings.Contains(errOut, "reindex: 150/150 cards (100%)") || !strings.Contains(errOut, "cards/s") {
		t.Errorf("no final progress line on stderr:\n%s", errOut)
	}
	if strings.Contains(out+errOut, "sk-reindex-test") {
		t.Error("the API key was printed")
	}
	texts, reqs := srv.counts()
	// 1 dimension probe, then 150 texts in batches of at most 50 within
	// reindex batches of 128: 50+50+28, 22.
	if texts != 151 || reqs != 5 {
		t.Errorf("server embedded %d texts in %d requests, want 151 in 5", texts, reqs)
	}
	if srv.auth != "Bearer sk-reindex-test" {
		t.Errorf("Authorization %q", srv.auth)
	}

	st, err := embedded.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	keys := make([]cards.Key, len(all))
	for i := range all {
		keys[i] = all[i].Key()
	}
	got, err := st.Embeddings(ctx, model, keys)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(all) {
		t.Fatalf("%d stored vectors for %d cards", len(got), len(all))
	}
	for _, k := range keys {
		c, _ := st.Get(ctx, k)
		l, _ := st.Learned(ctx, []cards.Key{k})
		if e := got[k]; e.TextHash != retriever.EmbeddingHash(retriever.LearnedEmbeddingText(&c, l[k])) || len(e.Vector) != 8 {
			t.Fatalf("%s: stored hash %q, dim %d", k, e.TextHash, len(e.Vector))
		}
	}

	// A retriever on the same model reuses every vector: no card is sent.
	o, err := embed.NewOpenAI(embed.OpenAIConfig{BaseURL: srv.URL, Model: "mini-embed", Dim: 8})
	if err != nil {
		t.Fatal(err)
	}
	ret, err := retriever.New(ctx, st, o, nil)
	if err != nil {
		t.Fatal(err)
	}
	ret.Close()
	if texts2, _ := srv.counts(); texts2 != texts {
		t.Errorf("the retriever embedded %d card texts again after reindex", texts2-texts)
	}
	st.Close()

	// --missing-only has nothing to do.
	out, errOut, err = runCLI(t, append(args, "--missing-only", "--embed-dim", "8")...)
	if err != nil {
		t.Fatalf("reindex --missing-only: %v\n%s", err, errOut)
	}
	if !strings.Contains(out, "0 cards embedded with "+model+" (dim 8), 150 already up to date") {
		t.Errorf("stdout: %q", out)
	}
	if texts3, _ := srv.counts(); texts3 != texts {
		t.Errorf("--missing-only embedded %d texts", texts3-texts)
	}
}

func TestReindexHashedAndErrors(t *testing.T) {
	dir, all := seedStore(t, 10)
	out, errOut, err := runCLI(t, "reindex", "--data-dir", dir, "--embedder", "hashed")
	if err != nil {
		t.Fatalf("reindex: %v\n%s", err, errOut)
	}
	if !strings.Contains(out, "10 cards embedded with cardex-hashed-v1-384 (dim 384)") {
		t.Errorf("stdout: %q", out)
	}
	st, err := embedded.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	got, err := st.Embeddings(context.Background(), "cardex-hashed-v1-384", []cards.Key{all[3].Key()})
	if err != nil || len(got) != 1 {
		t.Errorf("stored hashed vectors: %v, %v", got, err)
	}

	// The store is locked while another process (here: this one) holds it.
	_, _, err = runCLI(t, "reindex", "--data-dir", dir)
	if err == nil || !strings.Contains(err.Error(), "stop the cardex serve") {
		t.Errorf("reindex on a locked store: %v", err)
	}
	st.Close()

	srv := newEmbeddingsServer(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--embedder", "openai", "--embed-model", "m"}, "needs --embed-url and --embed-model"},
		{[]string{"--embedder", "word2vec"}, `--embedder "word2vec": want builtin, hashed or openai`},
		{[]string{"--embed-url", srv.URL}, "are not for the builtin embedder"},
		{[]string{"--embedder", "hashed", "--embed-url", srv.URL}, "are for --embedder openai"},
		{[]string{"--embedder", "openai", "--embed-url", srv.URL + "/nope/embeddings", "--embed-model", "m"}, "404 Not Found: no such route"},
	} {
		_, _, err := runCLI(t, append([]string{"reindex", "--data-dir", dir}, tc.args...)...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("reindex %v: %v, want an error with %q", tc.args, err, tc.want)
		}
	}
	if _, _, err := runCLI(t, "reindex", "--data-dir", t.TempDir()); err == nil || !strings.Contains(err.Error(), "no embedded store") {
		t.Errorf("reindex of an empty directory: %v", err)
	}
}
