package main

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/seed0cff8200/cardex/embed"
)

// topics are two sets of words that share contexts only within their set.
var topics = [][]string{
	{"kitten", "puppy", "pony", "calf", "lamb", "fur", "tail", "barn", "meadow", "hay", "paw", "mane"},
	{"compiler", "linker", "debugger", "kernel", "parser", "binary", "source", "build", "symbol", "module", "pointer", "register"},
}

// writeCorpus writes documents drawn from topics, and words common to
// both, in two files.
func writeCorpus(t *testing.T) []string {
	t.Helper()
	var shared []string          // words of both topics, so the topics are not disjoint graphs
	const letters = "bcdfgkmnpt" // no stemmable ending
	for i := range 30 {
		shared = append(shared, fmt.Sprintf("zq%c%c", letters[i/10], letters[i%10]))
	}
	rng := rand.New(rand.NewPCG(7, 7))
	dir := t.TempDir()
	var paths []string
	for f := range 2 {
		var b strings.Builder
		for range 1500 {
			topic := topics[rng.IntN(2)]
			for range 12 {
				if rng.IntN(3) == 0 {
					b.WriteString(shared[rng.IntN(len(shared))])
				} else {
					b.WriteString(topic[rng.IntN(len(topic))])
				}
				b.WriteByte(' ')
			}
			b.WriteByte('\n')
		}
		p := filepath.Join(dir, fmt.Sprintf("corpus%d.txt", f))
		if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	return paths
}

func TestTrain(t *testing.T) {
	paths := writeCorpus(t)
	o := options{dim: 8, window: 3, minCount: 5, maxVocab: 1000, iters: 3, seed: 1}
	quiet := func(string, ...any) {}
	var files [][]byte
	var last *embed.WordVectors
	for range 2 {
		wv, err := train(paths, o, quiet)
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		if _, err := wv.WriteTo(&buf); err != nil {
			t.Fatal(err)
		}
		files = append(files, buf.Bytes())
		last = wv
	}
	// The committed vectors must be what the documented command produces:
	// the same corpus gives the same bytes.
	if !bytes.Equal(files[0], files[1]) {
		t.Fatal("two trainings on the same corpus wrote different files")
	}
	if last.Len() != 24+30 || last.Dim() != 8 {
		t.Fatalf("%d words × %d dims, want 54 × 8", last.Len(), last.Dim())
	}
	// Words of one topic are each other's nearest neighbours.
	for _, topic := range topics {
		w := topic[0]
		for _, s := range last.Similar(w, 5) {
			if !slices.ContainsFunc(topic, func(x string) bool { return embed.AnalyzeWords(x)[0] == s }) {
				t.Errorf("nearest neighbours of %s: %v; %s is not of its topic", w, last.Similar(w, 5), s)
			}
		}
	}
	// Limits are honoured: the vocabulary is the most frequent words.
	o.maxVocab = 40
	wv, err := train(paths, o, quiet)
	if err != nil {
		t.Fatal(err)
	}
	if wv.Len() != 40 {
		t.Errorf("max-vocab 40: %d words", wv.Len())
	}
}

func TestTrainErrors(t *testing.T) {
	quiet := func(string, ...any) {}
	if _, err := train([]string{filepath.Join(t.TempDir(), "missing.txt")}, options{dim: 8, window: 3, minCount: 1, maxVocab: 100, iters: 1, seed: 1}, quiet); err == nil {
		t.Error("a missing corpus file: no error")
	}
	// A vocabulary smaller than the SVD's subspace cannot be factorised.
	p := filepath.Join(t.TempDir(), "tiny.txt")
	if err := os.WriteFile(p, []byte("alpha beta gamma\nbeta gamma delta\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := train([]string{p}, options{dim: 8, window: 3, minCount: 1, maxVocab: 100, iters: 1, seed: 1}, quiet); err == nil || !strings.Contains(err.Error(), "vocabulary") {
		t.Errorf("a 4-word vocabulary with dim 8: error %v, want one naming the vocabulary", err)
	}
}
