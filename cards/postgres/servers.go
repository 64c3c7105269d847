package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/seed0cff8200/cardex/cards"
)

// --- server entries -----------------------------------------------------
//
// A server entry's change is its card_changes row (tenant, server = name,
// name = ''); a deletion keeps the last version there, as for cards.

const serverColumns = `tenant, name, title, description, version, updated_at`

func scanServer(row pgx.Row) (cards.ServerInfo, error) {
	var si cards.ServerInfo
	if err := row.Scan(&si.Tenant, &si.Name, &si.Title, &si.Description, &si.Version, &si.UpdatedAt); err != nil {
		return cards.ServerInfo{}, err
	}
	si.UpdatedAt = si.UpdatedAt.UTC()
	return si, nil
}

func validServer(tenant, name string) bool { return cards.ValidName(tenant) && cards.ValidName(name) }

// PutServers implements cards.Store.
func (s *Store) PutServers(ctx context.Context, ss []cards.ServerInfo) ([]cards.PutResult, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	norm, err := cards.NormalizeServerBatch(ss)
	if err != nil {
		return nil, err
	}
	return putBatch(ctx, s, serverRecords, norm)
}

var serverRecords = records[cards.ServerInfo]{
	op: "put servers", key: (*cards.ServerInfo).Key, plan: cards.PlanPutServer,
	stored: func(ctx context.Context, s *Store, tx pgx.Tx, keys []cards.Key) (map[cards.Key]cards.ServerInfo, error) {
		t, names, _ := keyArrays(keys) // a server entry's key: (tenant, name as server)
		rows, err := tx.Query(ctx, s.sql(`SELECT `+serverColumns+` FROM {s}.servers
			WHERE (tenant, name) IN (SELECT * FROM unnest($1::text[], $2::text[]))`), t, names)
		if err != nil {
			return nil, err
		}
		return collect(rows, scanServer, (*cards.ServerInfo).Key)
	},
	write: func(ctx context.Context, s *Store, tx pgx.Tx, ss []*cards.ServerInfo, _ []int64) error {
		n := len(ss)
		t, name, title, desc, version := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]int64, n)
		for i, si := range ss {
			t[i], name[i], title[i], desc[i], version[i] = si.Tenant, si.Name, si.Title, si.Description, si.Version
		}
		_, err := tx.Exec(ctx, s.sql(`INSERT INTO {s}.servers (`+serverColumns+`)
			SELECT w.tenant, w.name, w.title, w.description, w.version, $6::timestamptz
			FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::bigint[]) AS w(tenant, name, title, description, version)
			ON CONFLICT (tenant, name) DO UPDATE SET title = EXCLUDED.title, description = EXCLUDED.description,
				version = EXCLUDED.version, updated_at = EXCLUDED.updated_at`),
			t, name, title, desc, version, cards.Now())
		return err
	},
}

// GetServer implements cards.Store.
func (s *Store) GetServer(ctx context.Context, tenant, name string) (cards.ServerInfo, error) {
	if err := ctx.Err(); err != nil {
		return cards.ServerInfo{}, err
	}
	notFound := fmt.Errorf("%w: server %s/%s", cards.ErrNotFound, tenant, name)
	if !validServer(tenant, name) {
		return cards.ServerInfo{}, notFound
	}
	si, err := scanServer(s.pool.QueryRow(ctx, s.sql(`SELECT `+serverColumns+` FROM {s}.servers
		WHERE tenant = $1 AND name = $2`), tenant, name))
	if errors.Is(err, pgx.ErrNoRows) {
		return cards.ServerInfo{}, notFound
	}
	if err != nil {
		return cards.ServerInfo{}, s.wrap(ctx, "get server", err)
	}
	return si, nil
}

// Servers implements cards.Store.
func (s *Store) Servers(ctx context.Context, tenant string) ([]cards.ServerInfo, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if tenant == "" {
		return nil, cards.Invalid("tenant", "is required")
	}
	out := []cards.ServerInfo{}
	if !cards.ValidName(tenant) {
		return out, nil
	}
	rows, err := s.pool.Query(ctx, s.sql(`SELECT `+serverColumns+` FROM {s}.servers WHERE tenant = $1 ORDER BY name`), tenant)
	if err != nil {
		return nil, s.wrap(ctx, "servers", err)
	}
	defer rows.Close()
	for rows.Next() {
		si, err := scanServer(rows)
		if err != nil {
			return nil, s.wrap(ctx, "servers", err)
		}
		out = append(out, si)
	}
	if err := rows.Err(); err != nil {
		return nil, s.wrap(ctx, "servers", err)
	}
	return out, nil
}

// DeleteServer implements cards.Store.
func (s *Store) DeleteServer(ctx context.Context, tenant, name string, expectedVersion int64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	notFound := fmt.Errorf("%w: server %s/%s", cards.ErrNotFound, tenant, name)
	if !validServer(tenant, name) {
		return notFound
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		seq, version, err := s.lockedVersion(ctx, tx, notFound, `SELECT version FROM {s}.servers WHERE tenant = $1 AND name = $2`, tenant, name)
		if err != nil {
			return err
		}
		if expectedVersion > 0 && version != expectedVersion {
			return fmt.Errorf("%w: server %s/%s: expected version %d, stored version is %d",
				cards.ErrConflict, tenant, name, expectedVersion, version)
		}
		if _, err := tx.Exec(ctx, s.sql(`DELETE FROM {s}.servers WHERE tenant = $1 AND name = $2`), tenant, name); err != nil {
			return err
		}
		return s.recordChange(ctx, tx, row{Tenant: tenant, Server: name, Seq: seq + 1, Version: version}, true)
	})
	return s.wrap(ctx, "delete server", err)
}

// --- learned phrasings --------------------------------------------------

// AddLearned implements cards.Store.
func (s *Store) AddLearned(ctx context.Context, k cards.Key, phrases ...string) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	notFound := fmt.Errorf("%w: card %s", cards.ErrNotFound, k)
	if !validKey(k) {
		return false, notFound
	}
	changed := false
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		seq, version, err := s.lockedVersion(ctx, tx, notFound, `SELECT version FROM {s}.cards WHERE tenant = $1 AND server = $2 AND name = $3`,
			k.Tenant, k.Server, k.Name)
		if err != nil {
			return err
		}
		var have []string
		err = tx.QueryRow(ctx, s.sql(`SELECT phrases FROM {s}.card_learned WHERE tenant = $1 AND server = $2 AND name = $3`),
			k.Tenant, k.Server, k.Name).Scan(&have)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		next, ch := cards.AddLearned(have, phrases...)
		if !ch {
			return nil
		}
		if _, err := tx.Exec(ctx, s.sql(`INSERT INTO {s}.card_learned (tenant, server, name, phrases) VALUES ($1, $2, $3, $4::text[])
			ON CONFLICT (tenant, server, name) DO UPDATE SET phrases = EXCLUDED.phrases`), k.Tenant, k.Server, k.Name, next); err != nil {
			return err
		}
		if err := s.recordChange(ctx, tx, row{Tenant: k.Tenant, Server: k.Server, Name: k.Name, Seq: seq + 1, Version: version}, false); err != nil {
			return err
		}
		changed = true
		return nil
	})
	if err != nil {
		return false, s.wrap(ctx, "add learned", err)
	}
	return changed, nil
}

// Learned implements cards.Store.
func (s *Store) Learned(ctx context.Context, keys []cards.Key) (map[cards.Key][]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out := make(map[cards.Key][]string)
	keys = slices.DeleteFunc(slices.Clone(keys), func(k cards.Key) bool { return !validKey(k) })
	if len(keys) == 0 {
		return out, nil
	}
	t, sv, n := keyArrays(keys)
	rows, err := s.pool.Query(ctx, s.sql(`SELECT tenant, server, name, phrases FROM {s}.card_learned
		WHERE (tenant, server, name) IN (SELECT * FROM unnest($1::text[], $2::text[], $3::text[]))`), t, sv, n)
	if err != nil {
		return nil, s.wrap(ctx, "learned", err)
	}
	defer rows.Close()
	for rows.Next() {
		var k cards.Key
		var ps []string
		if err := rows.Scan(&k.Tenant, &k.Server, &k.Name, &ps); err != nil {
			return nil, s.wrap(ctx, "learned", err)
		}
		if len(ps) > 0 {
			out[k] = ps
		}
	}
	if err := rows.Err(); err != nil {
		return nil, s.wrap(ctx, "learned", err)
	}
	return out, nil
}
