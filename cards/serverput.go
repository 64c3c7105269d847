package cards

import (
	"errors"
	"fmt"
	"strings"
)

// Key returns the server entry's key in the change sequence
// (ServerKey(Tenant, Name)).
func (s *ServerInfo) Key() Key { return ServerKey(s.Tenant, s.Name) }

// NormalizeServer sanitises and validates a server entry in place: tenant
// and name follow the card rule ([A-Za-z0-9_.-]{1,128}), title and
// description are sanitised like card text and bounded (MaxSummaryLen,
// MaxDescriptionLen). It returns a *FieldError for the first broken rule.
func NormalizeServer(s *ServerInfo) error {
	for _, f := range []struct {
		name string
		v    *string
	}{{"tenant", &s.Tenant}, {"name", &s.Name}} {
		*f.v = strings.TrimSpace(*f.v)
		if *f.v == "" {
			return Invalid(f.name, "is required")
		}
		if !nameRule.MatchString(*f.v) {
			return Invalid(f.name, "%q must match [A-Za-z0-9_.-]{1,%d}", Cut(*f.v, 140), MaxNameLen)
		}
	}
	if err := CheckServer("name", s.Name); err != nil {
		return err
	}
	s.Title = Sanitize(s.Title)
	if err := maxLen("title", s.Title, MaxSummaryLen); err != nil {
		return err
	}
	s.Description = Sanitize(s.Description)
	if err := maxLen("description", s.Description, MaxDescriptionLen); err != nil {
		return err
	}
	if s.Version < 0 {
		return Invalid("version", "must be 0 (no check) or the expected current version, got %d", s.Version)
	}
	return nil
}

// ServerBatchItem names server entry i of a batch in errors:
// "servers[2] github".
func ServerBatchItem(i int, s *ServerInfo) string {
	if s.Name == "" {
		return fmt.Sprintf("servers[%d]", i)
	}
	return fmt.Sprintf("servers[%d] %s", i, s.Name)
}

// NormalizeServerBatch is the first step of every store's PutServers: it
// normalises a copy of each entry and refuses a key that appears twice.
// Errors name the entry (FieldError.Item is ServerBatchItem).
func NormalizeServerBatch(ss []ServerInfo) ([]ServerInfo, error) {
	norm := make([]ServerInfo, len(ss))
	seen := make(map[Key]int, len(ss))
	for i := range ss {
		s := ss[i]
		if err := NormalizeServer(&s); err != nil {
			var fe *FieldError
			if errors.As(err, &fe) {
				out := *fe
				out.Item = ServerBatchItem(i, &s)
				return nil, &out
			}
			return nil, fmt.Errorf("%s: %w", ServerBatchItem(i, &s), err)
		}
		if j, dup := seen[s.Key()]; dup {
			return nil, &FieldError{
				Item:  ServerBatchItem(i, &s),
				Field: "name",
				Msg:   fmt.Sprintf("duplicates servers[%d]: a server may appear only once in a batch", j),
			}
		}
		seen[s.Key()] = i
		norm[i] = s
	}
	return norm, nil
}

// SameServerContent reports whether two normalised server entries carry
// the same content (ignoring Version and UpdatedAt).
func SameServerContent(a, b *ServerInfo) bool {
	return a.Tenant == b.Tenant && a.Name == b.Name && a.Title == b.Title && a.Description == b.Description
}

// PlanPutServer applies the put rules of cards (PlanPut) to server entry i
// of a normalised batch: optimistic concurrency, Unchanged for identical
// content, otherwise the next version, monotonic across delete and
// re-create. It sets s.Version and reports whether the entry must be
// written. The result's Key is ServerKey(tenant, name).
func PlanPutServer(i int, s *ServerInfo, stored *ServerInfo, lastDeleted int64) (PutResult, bool, error) {
	res := PutResult{Key: s.Key()}
	switch {
	case s.Version > 0 && stored == nil:
		return res, false, fmt.Errorf("%w: %s (server %s/%s): expected version %d, but the server entry does not exist",
			ErrConflict, ServerBatchItem(i, s), s.Tenant, s.Name, s.Version)
	case s.Version > 0 && s.Version != stored.Version:
		return res, false, fmt.Errorf("%w: %s (server %s/%s): expected version %d, stored version is %d",
			ErrConflict, ServerBatchItem(i, s), s.Tenant, s.Name, s.Version, stored.Version)
	}
	if stored != nil && SameServerContent(s, stored) {
		res.Version, res.Outcome = stored.Version, Unchanged
		return res, false, nil
	}
	if stored != nil {
		s.Version, res.Outcome = stored.Version+1, Updated
	} else {
		s.Version, res.Outcome = lastDeleted+1, Created
	}
	res.Version = s.Version
	return res, true, nil
}
