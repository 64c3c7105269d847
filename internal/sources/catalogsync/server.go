package catalogsync

import (
	"context"
	"errors"
	"fmt"

	"github.com/seed0cff8200/cardex/cards"
)

// ServerCatalog is the part of the catalogue an import's server entry
// needs.
type ServerCatalog interface {
	// GetServer returns the stored entry, or an error wrapping
	// cards.ErrNotFound when there is none.
	GetServer(ctx context.Context, tenant, name string) (cards.ServerInfo, error)
	// PutServers writes entries atomically.
	PutServers(ctx context.Context, ss []cards.ServerInfo) error
}

// ServerChange is what an import does to its namespace's server entry.
// Entry is the entry as it will be written (or, for Unchanged, as stored).
type ServerChange struct {
	Action Action // Create, Update or Unchanged
	Entry  cards.ServerInfo
	Fields []string // what differs, for updates
}

// DiffServer compares the server entry an import read from its source with
// the stored one (nil when there is none). The source owns the title and
// the description, but a field it leaves empty keeps the stored text (a
// platform team may have written it in a card file).
func DiffServer(stored *cards.ServerInfo, imported cards.ServerInfo) (ServerChange, error) {
	want := imported
	want.Version = 0
	if err := cards.NormalizeServer(&want); err != nil {
		return ServerChange{}, fmt.Errorf("server entry: %w", err)
	}
	if stored == nil {
		return ServerChange{Action: Create, Entry: want}, nil
	}
	if want.Title == "" {
		want.Title = stored.Title
	}
	if want.Description == "" {
		want.Description = stored.Description
	}
	want.Version = stored.Version // optimistic concurrency: fail if it moved meanwhile
	var fields []string
	if want.Title != stored.Title {
		fields = append(fields, "title")
	}
	if want.Description != stored.Description {
		fields = append(fields, "description")
	}
	if len(fields) == 0 {
		return ServerChange{Action: Unchanged, Entry: *stored}, nil
	}
	return ServerChange{Action: Update, Entry: want, Fields: fields}, nil
}

// PlanServer reads the stored entry of (imported.Tenant, imported.Name) and
// diffs it against the imported one.
func PlanServer(ctx context.Context, cat ServerCatalog, imported cards.ServerInfo) (ServerChange, error) {
	var stored *cards.ServerInfo
	si, err := cat.GetServer(ctx, imported.Tenant, imported.Name)
	switch {
	case err == nil:
		stored = &si
	case !errors.Is(err, cards.ErrNotFound):
		return ServerChange{}, fmt.Errorf("read the server entry %s/%s: %w", imported.Tenant, imported.Name, err)
	}
	return DiffServer(stored, imported)
}

// ApplyServer writes a server change (nothing when it is Unchanged). An
// import calls it right after Apply wrote the cards: the entry is a second
// write, so a failure here leaves the cards written and says so.
func ApplyServer(ctx context.Context, cat ServerCatalog, ch ServerChange) error {
	if ch.Action != Create && ch.Action != Update {
		return nil
	}
	if err := cat.PutServers(ctx, []cards.ServerInfo{ch.Entry}); err != nil {
		return fmt.Errorf("the cards are written, but the server entry is not (run the import again): %w", err)
	}
	return nil
}

// GetServer implements ServerCatalog.
func (s StoreCatalog) GetServer(ctx context.Context, tenant, name string) (cards.ServerInfo, error) {
	return s.Store.GetServer(ctx, tenant, name)
}

// PutServers implements ServerCatalog.
func (s StoreCatalog) PutServers(ctx context.Context, ss []cards.ServerInfo) error {
	_, err := s.Store.PutServers(ctx, ss)
	return err
}
