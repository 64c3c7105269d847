package cards

import (
	"context"
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
	same := func(s ServerInfo) ServerInfo { return s }
	return normalizeBatch(context.Background(), ss, same, NormalizeServer, (*ServerInfo).Key, ServerBatchItem, "server")
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
	version := func(x *ServerInfo) int64 { return x.Version }
	who := fmt.Sprintf("%s (server %s/%s)", ServerBatchItem(i, s), s.Tenant, s.Name)
	if err := checkVersion(who, "server entry", s.Version, stored, version); err != nil {
		return PutResult{Key: s.Key()}, false, err
	}
	res, write := nextVersion(s.Key(), &s.Version, stored, version, func(x *ServerInfo) bool { return SameServerContent(s, x) }, lastDeleted)
	return res, write, nil
}
