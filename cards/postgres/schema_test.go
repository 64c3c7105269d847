package postgres_test

import (
	"io/fs"
	"strings"
	"testing"

	"github.com/seed0cff8200/cardex/cards/postgres"
	"github.com/seed0cff8200/cardex/embed"
	"github.com/seed0cff8200/cardex/migrations"
)

// The migration creates the built-in embedder's HNSW index under the name
// EnsureVectorIndex uses, so a replica does not build a second one.
func TestMigrationIndexesTheBuiltInModel(t *testing.T) {
	emb := embed.NewHashed(embed.DefaultDim)
	b, err := fs.ReadFile(migrations.FS, "00002_embeddings.sql")
	if err != nil {
		t.Fatal(err)
	}
	name := postgres.VectorIndexName(emb.Model(), emb.Dim())
	for _, want := range []string{"CREATE INDEX " + name, "embedding::vector(384)", "WHERE model = '" + emb.Model() + "'"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("00002_embeddings.sql lacks %q", want)
		}
	}
}

func TestVectorIndexName(t *testing.T) {
	for model, want := range map[string]string{
		"cardex-hashed-v1-384":                         "card_embeddings_hnsw_cardex_hashed_v1_384_384",
		"openai:text-embedding-3-small@api.openai.com": "card_embeddings_hnsw_openai_text_embedding_3_small_",
	} {
		got := postgres.VectorIndexName(model, 384)
		if !strings.HasPrefix(got, want) || len(got) > 63 {
			t.Errorf("VectorIndexName(%q) = %q, want prefix %q and at most 63 bytes", model, got, want)
		}
	}
	a, b := postgres.VectorIndexName(strings.Repeat("m", 80)+"a", 8), postgres.VectorIndexName(strings.Repeat("m", 80)+"b", 8)
	if a == b {
		t.Errorf("long model ids collide: %s", a)
	}
}

func TestOpenRejectsBadConfig(t *testing.T) {
	if _, err := postgres.Open(postgres.Config{}); err == nil {
		t.Error("Open without a URL succeeded")
	}
	if _, err := postgres.Open(postgres.Config{URL: "postgres://x@127.0.0.1:1/db", Schema: "Bad-Schema"}); err == nil {
		t.Error("Open with an invalid schema name succeeded")
	}
	s, err := postgres.Open(postgres.Config{URL: "postgres://x@127.0.0.1:1/db?connect_timeout=1"})
	if err != nil {
		t.Fatalf("Open does not connect, so an unreachable database is no error: %v", err)
	}
	defer s.Close()
	if err := s.Ping(t.Context()); err == nil || !strings.Contains(err.Error(), "store unavailable") {
		t.Errorf("Ping of an unreachable database = %v, want cards.ErrUnavailable", err)
	}
}
