package embed

import (
	"bufio"
	"container/list"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"slices"
	"sync"
)

// vectorCache is a bounded LRU of vectors of one model, keyed by the SHA-256
// of the text, optionally persisted to a JSON Lines file.
type vectorCache struct {
	mu    sync.Mutex
	cap   int
	model string
	byKey map[cacheKey]*list.Element // of *cacheEntry
	order *list.List                 // most recently used first
	file  *persistFile
}

type cacheKey struct {
	model string
	sum   [32]byte
}

type cacheEntry struct {
	key cacheKey
	vec []float32
}

func newVectorCache(capacity int, model, path string, dim int, log *slog.Logger) (*vectorCache, error) {
	c := &vectorCache{cap: capacity, model: model, byKey: map[cacheKey]*list.Element{}, order: list.New()}
	if path != "" {
		f, err := openPersistFile(path, c, dim, log)
		if err != nil {
			return nil, err
		}
		c.file = f
	}
	return c, nil
}

func (c *vectorCache) key(text string) cacheKey {
	return cacheKey{model: c.model, sum: sha256Sum(text)}
}

// get returns a copy of the cached vector of text, if it has length dim.
func (c *vectorCache) get(text string, dim int) ([]float32, bool) {
	k := c.key(text)
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.byKey[k]
	if !ok {
		return nil, false
	}
	e := el.Value.(*cacheEntry)
	if len(e.vec) != dim {
		c.order.Remove(el)
		delete(c.byKey, k)
		return nil, false
	}
	c.order.MoveToFront(el)
	return slices.Clone(e.vec), true
}

// put stores a copy of v for text and persists it.
func (c *vectorCache) put(text string, v []float32) {
	k := c.key(text)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.insert(k, slices.Clone(v)) && c.file != nil {
		c.file.append(k.sum, v, c.model)
	}
}

// insert adds or refreshes an entry, evicting the least recently used one
// when full; it reports whether the entry is new or changed.
func (c *vectorCache) insert(k cacheKey, v []float32) bool {
	if el, ok := c.byKey[k]; ok {
		e := el.Value.(*cacheEntry)
		changed := !slices.Equal(e.vec, v)
		e.vec = v
		c.order.MoveToFront(el)
		return changed
	}
	c.byKey[k] = c.order.PushFront(&cacheEntry{key: k, vec: v})
	if c.order.Len() > c.cap {
		oldest := c.order.Back()
		c.order.Remove(oldest)
		delete(c.byKey, oldest.Value.(*cacheEntry).key)
	}
	return true
}

func (c *vectorCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}

func (c *vectorCache) close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.file == nil {
		return nil
	}
	err := c.file.close()
	c.file = nil
	return err
}

func sha256Sum(text string) [32]byte { return sha256.Sum256([]byte(text)) }

// persistFile is the cache's JSON Lines file: one {"m": model id,
// "h": hex SHA-256 of the text, "v": base64 little-endian float32s} per line,
// appended as vectors arrive.
type persistFile struct {
	path   string
	f      *os.File
	log    *slog.Logger
	failed bool
}

type persistRecord struct {
	M string `json:"m"`
	H string `json:"h"`
	V string `json:"v"`
}

// openPersistFile loads the vectors of c's model from path into c (the most
// recent last, so they end up the most recently used), rewrites the file if
// it has grown past twice the cache size, and opens it for appending.
func openPersistFile(path string, c *vectorCache, dim int, log *slog.Logger) (*persistFile, error) {
	lines := 0
	switch f, err := os.Open(path); {
	case err == nil:
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64<<10), 16<<20)
		for sc.Scan() {
			lines++
			var r persistRecord
			if json.Unmarshal(sc.Bytes(), &r) != nil || r.M != c.model {
				continue // another model's vector, or a torn last line
			}
			sum, err := hex.DecodeString(r.H)
			if err != nil || len(sum) != sha256.Size {
				continue
			}
			b, err := base64.StdEncoding.DecodeString(r.V)
			if err != nil || len(b) == 0 || len(b)%4 != 0 || (dim > 0 && len(b)/4 != dim) {
				continue
			}
			v := make([]float32, len(b)/4)
			for i := range v {
				v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
			}
			k := cacheKey{model: c.model}
			copy(k.sum[:], sum)
			c.insert(k, v)
		}
		if err := sc.Err(); err != nil {
			log.Warn("embedding cache file partly unreadable; continuing with what was read", "path", path, "err", err)
		}
		f.Close()
	case !errors.Is(err, os.ErrNotExist):
		return nil, fmt.Errorf("embedding cache file: %w", err)
	}
	p := &persistFile{path: path, log: log}
	if lines > 2*c.cap {
		if err := p.rewrite(c); err != nil {
			return nil, err
		}
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("embedding cache file: %w", err)
	}
	p.f = f
	return p, nil
}

func encodeRecord(model string, sum [32]byte, v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	line, _ := json.Marshal(persistRecord{M: model, H: hex.EncodeToString(sum[:]), V: base64.StdEncoding.EncodeToString(b)})
	return append(line, '\n')
}

// rewrite replaces the file with the cache's entries, least recently used
// first, through a temporary file and a rename.
func (p *persistFile) rewrite(c *vectorCache) error {
	tmp := p.path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("embedding cache file: %w", err)
	}
	w := bufio.NewWriter(f)
	for el := c.order.Back(); el != nil; el = el.Prev() {
		e := el.Value.(*cacheEntry)
		w.Write(encodeRecord(c.model, e.key.sum, e.vec))
	}
	err = w.Flush()
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, p.path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("embedding cache file: compact: %w", err)
	}
	return nil
}

// append writes one vector; after a failure, persistence stops (the
// in-memory cache goes on).
func (p *persistFile) append(sum [32]byte, v []float32, model string) {
	if p.failed {
		return
	}
	if _, err := p.f.Write(encodeRecord(model, sum, v)); err != nil {
		p.failed = true
		p.log.Warn("embedding cache file not writable; vectors are cached in memory only", "path", p.path, "err", err)
	}
}

func (p *persistFile) close() error { return p.f.Close() }
