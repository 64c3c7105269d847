package enrich

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// Cache keeps the model's answers on disk, one small file per key, so that
// a rerun (after an interruption, or of the same catalogue) costs no model
// call. The key is the SHA-256 of the model name, the prompt version and
// the prompt as rendered for the card (so of the card text it shows): a
// changed card, model or prompt misses. Files are written to a temporary
// name and renamed, so a killed run leaves whole entries only, and several
// processes may share a directory.
type Cache struct{ dir string }

// OpenCache opens (creating) a cache directory.
func OpenCache(dir string) (*Cache, error) {
	if dir == "" {
		return nil, errors.New("enrichment cache: a directory is required")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("enrichment cache: %w", err)
	}
	return &Cache{dir: dir}, nil
}

// Dir is the cache's directory.
func (c *Cache) Dir() string { return c.dir }

// CacheKey is the key of an answer of model to msgs under PromptVersion.
func CacheKey(model string, msgs []Message) string {
	h := sha256.New()
	b, _ := json.Marshal(struct {
		Model    string    `json:"model"`
		Prompt   string    `json:"prompt_version"`
		Messages []Message `json:"messages"`
	}{model, PromptVersion, msgs})
	h.Write(b)
	return hex.EncodeToString(h.Sum(nil))
}

type cacheEntry struct {
	Model         string    `json:"model"`
	PromptVersion string    `json:"prompt_version"`
	Content       string    `json:"content"`
	FinishReason  string    `json:"finish_reason,omitempty"`
	At            time.Time `json:"at"`
}

func (c *Cache) path(key string) string {
	return filepath.Join(c.dir, key[:2], key+".json")
}

// Get returns the answer stored under key, if any (a damaged file is a
// miss).
func (c *Cache) Get(key, model string) (Answer, bool) {
	if len(key) != 2*sha256.Size {
		return Answer{}, false
	}
	b, err := os.ReadFile(c.path(key))
	if err != nil {
		return Answer{}, false
	}
	var e cacheEntry
	if json.Unmarshal(b, &e) != nil || e.Model != model || e.PromptVersion != PromptVersion || e.Content == "" {
		return Answer{}, false
	}
	return Answer{Content: e.Content, FinishReason: e.FinishReason}, true
}

// Put stores an answer under key.
func (c *Cache) Put(key, model string, a Answer) error {
	if len(key) != 2*sha256.Size {
		return fmt.Errorf("enrichment cache: bad key %q", key)
	}
	p := c.path(key)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return fmt.Errorf("enrichment cache: %w", err)
	}
	b, err := json.Marshal(cacheEntry{Model: model, PromptVersion: PromptVersion, Content: a.Content, FinishReason: a.FinishReason, At: time.Now().UTC()})
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(p), ".tmp-*")
	if err != nil {
		return fmt.Errorf("enrichment cache: %w", err)
	}
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), p)
	}
	if err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("enrichment cache: %w", err)
	}
	return nil
}
