package eval

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// sharedDataset is where CI puts the shared evaluation data: shared/ beside
// the clone, so ../shared/eval from the repository root.
func sharedDataset(t *testing.T, name string) string {
	t.Helper()
	dir := filepath.Join("..", "..", "shared", "eval", name)
	if _, err := os.Stat(filepath.Join(dir, "tools.jsonl")); err != nil {
		if os.Getenv("CI") == "true" || !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("dataset %s: %v (CI needs shared/ beside the clone)", name, err)
		}
		t.Skipf("dataset %s not here (%v); CI fails instead of skipping", name, err)
	}
	return dir
}

// TestLiveMCPBench runs the real dataset end to end and checks only its
// structure: counts, modes, metrics in range, token savings present. It
// never asserts a recall figure; docs/EVAL.md records those.
func TestLiveMCPBench(t *testing.T) {
	dir := sharedDataset(t, "livemcpbench")
	d, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Tools) != 527 || len(d.Queries) != 49 {
		t.Fatalf("%d tools, %d queries; want 527, 49", len(d.Tools), len(d.Queries))
	}
	tk, err := NewBPE(DefaultEncoding)
	if err != nil {
		t.Fatal(err)
	}
	b := NewInProcess(nil)
	defer b.Close()
	rep, misses, err := Run(context.Background(), d, b, Options{Tokenizer: tk})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Tools != 527 || rep.Queries != 49 || len(rep.Modes) != 3 || len(rep.Conditions) != 3 {
		t.Errorf("report: %d tools, %d queries, modes %v, conditions %v", rep.Tools, rep.Queries, rep.Modes, rep.Conditions)
	}
	// The dataset has intents: every mode under every condition.
	all := rep.Subset("all")
	if all == nil || all.Queries != 49 || len(all.Modes) != 9 {
		t.Fatalf("subset all = %+v", all)
	}
	if s, m := rep.Subset("single"), rep.Subset("multi"); s == nil || m == nil || s.Queries+m.Queries != 49 {
		t.Errorf("single %+v, multi %+v", s, m)
	}
	for _, s := range rep.Subsets {
		for _, m := range s.Modes {
			for _, v := range []float64{m.Recall1, m.Recall3, m.Recall5, m.Recall10, m.MRR, m.NDCG10} {
				if v < 0 || v > 1 {
					t.Errorf("%s/%s: metric %v outside [0,1]", s.Name, m.Mode, v)
				}
			}
		}
	}
	if len(misses) > 49 {
		t.Errorf("%d misses for 49 queries", len(misses))
	}
	for _, m := range misses {
		if len(m.Modes) != 9 {
			t.Errorf("miss %s: modes %v", m.ID, m.Modes)
		}
	}
	tr := rep.Tokens
	if tr == nil || tr.Encoding != "o200k_base" || tr.Tools != 527 || tr.ToolsWithSchema != 527 || tr.CatalogTokens <= 0 || len(tr.Shortlists) != 3 {
		t.Fatalf("tokens = %+v", tr)
	}
	for _, s := range tr.Shortlists {
		if s.Tokens <= 0 || s.Tokens >= float64(tr.CatalogTokens) {
			t.Errorf("shortlist %+v against a catalogue of %d", s, tr.CatalogTokens)
		}
	}
}
