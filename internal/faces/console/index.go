package console

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"slices"
	"sync"

	"github.com/seed0cff8200/cardex/cards"
	"github.com/seed0cff8200/cardex/internal/telemetry/feedback"
)

// keyIndex knows every key of the store — cards of any status and server
// entries — from the store's change sequence (the latest change per key),
// read on from where it stopped at every use: the store has no list of
// tenants, and this is the same sequence every replica follows.
type keyIndex struct {
	store cards.Store
	mu    sync.Mutex
	seq   uint64
	live  map[cards.Key]bool
}

// Tenants returns the tenants that hold a card or a server entry, sorted.
func (x *keyIndex) Tenants(ctx context.Context) ([]string, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.live == nil {
		x.live = map[cards.Key]bool{}
	}
	for {
		chs, err := x.store.Changes(ctx, x.seq, 1000)
		if err != nil {
			return nil, err
		}
		if len(chs) == 0 {
			break
		}
		for _, ch := range chs {
			if ch.Deleted {
				delete(x.live, ch.Key)
			} else {
				x.live[ch.Key] = true
			}
			x.seq = max(x.seq, ch.Seq)
		}
	}
	seen := map[string]bool{}
	var out []string
	for k := range x.live {
		if !seen[k.Tenant] {
			seen[k.Tenant] = true
			out = append(out, k.Tenant)
		}
	}
	slices.Sort(out)
	return out, nil
}

// MaxEvents bounds the feedback events the console keeps in memory (the
// latest ones).
const MaxEvents = 200000

// eventCache reads the feedback log on from where it stopped, keeping the
// latest MaxEvents events; a log that shrank (replaced) is read anew.
type eventCache struct {
	path   string
	mu     sync.Mutex
	offset int64
	events []feedback.Event
}

// Events returns the feedback log's events, oldest first (shared: do not
// modify). A missing log holds none.
func (c *eventCache) Events() ([]feedback.Event, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.path == "" {
		return nil, nil
	}
	f, err := os.Open(c.path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.Size() < c.offset {
		c.offset, c.events = 0, nil
	}
	if _, err := f.Seek(c.offset, io.SeekStart); err != nil {
		return nil, err
	}
	br := bufio.NewReaderSize(f, 64<<10)
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 && line[len(line)-1] == '\n' {
			// Only whole lines: a line being written is read next time.
			c.offset += int64(len(line))
			var e feedback.Event
			if json.Unmarshal(line, &e) == nil {
				c.events = append(c.events, e)
			}
		}
		if err != nil {
			break
		}
	}
	if n := len(c.events); n > MaxEvents {
		c.events = slices.Clone(c.events[n-MaxEvents:])
	}
	return c.events, nil
}
