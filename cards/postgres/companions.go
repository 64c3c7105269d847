package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/seed0cff8200/cardex/cards"
)

// --- co-usage -------------------------------------------------------------

// AddCompanions implements cards.Store: one transaction that reads the
// tables of the cards the observations name (with their versions, so cards
// that do not exist are known), applies the rule and writes the changed
// tables and their change entries.
func (s *Store) AddCompanions(ctx context.Context, uses []cards.CoUse) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	if err := cards.ValidateCoUses(uses); err != nil {
		return false, err
	}
	keys := slices.DeleteFunc(cards.CoUseKeys(uses), func(k cards.Key) bool { return !validKey(k) })
	if len(keys) == 0 {
		return false, nil
	}
	now := cards.Now()
	changed := false
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		seq, err := s.lockCounter(ctx, tx)
		if err != nil {
			return err
		}
		t, sv, n := keyArrays(keys)
		rows, err := tx.Query(ctx, s.sql(`SELECT c.tenant, c.server, c.name, c.version, cc.companions::text
			FROM {s}.cards c
			LEFT JOIN {s}.card_companions cc USING (tenant, server, name)
			WHERE (c.tenant, c.server, c.name) IN (SELECT * FROM unnest($1::text[], $2::text[], $3::text[]))`), t, sv, n)
		if err != nil {
			return err
		}
		type held struct {
			version int64
			table   cards.Companions
		}
		have := map[cards.Key]*held{}
		for rows.Next() {
			var k cards.Key
			var h held
			var raw *string
			if err := rows.Scan(&k.Tenant, &k.Server, &k.Name, &h.version, &raw); err != nil {
				rows.Close()
				return err
			}
			if raw != nil {
				if err := json.Unmarshal([]byte(*raw), &h.table); err != nil {
					rows.Close()
					return fmt.Errorf("corrupt co-usage record of %s: %w", k, err)
				}
			}
			have[k] = &h
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		kept := cards.KeepCoUses(uses, func(k cards.Key) bool { return have[k] != nil })
		for _, k := range cards.CoUseKeys(kept) {
			h := have[k]
			next, ch := cards.AddCompanions(h.table, k, now, kept...)
			if !ch {
				continue
			}
			enc, err := json.Marshal(next)
			if err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, s.sql(`INSERT INTO {s}.card_companions (tenant, server, name, companions) VALUES ($1, $2, $3, $4::jsonb)
				ON CONFLICT (tenant, server, name) DO UPDATE SET companions = EXCLUDED.companions`), k.Tenant, k.Server, k.Name, string(enc)); err != nil {
				return err
			}
			seq++
			if err := s.recordChange(ctx, tx, row{Tenant: k.Tenant, Server: k.Server, Name: k.Name, Seq: seq, Version: h.version}, false); err != nil {
				return err
			}
			changed = true
		}
		return nil
	})
	if err != nil {
		return false, s.wrap(ctx, "add companions", err)
	}
	return changed, nil
}

// Companions implements cards.Store.
func (s *Store) Companions(ctx context.Context, keys []cards.Key) (map[cards.Key]cards.Companions, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out := make(map[cards.Key]cards.Companions)
	keys = slices.DeleteFunc(slices.Clone(keys), func(k cards.Key) bool { return !validKey(k) })
	if len(keys) == 0 {
		return out, nil
	}
	t, sv, n := keyArrays(keys)
	rows, err := s.pool.Query(ctx, s.sql(`SELECT tenant, server, name, companions::text FROM {s}.card_companions
		WHERE (tenant, server, name) IN (SELECT * FROM unnest($1::text[], $2::text[], $3::text[]))`), t, sv, n)
	if err != nil {
		return nil, s.wrap(ctx, "companions", err)
	}
	defer rows.Close()
	for rows.Next() {
		var k cards.Key
		var raw string
		if err := rows.Scan(&k.Tenant, &k.Server, &k.Name, &raw); err != nil {
			return nil, s.wrap(ctx, "companions", err)
		}
		var cs cards.Companions
		if err := json.Unmarshal([]byte(raw), &cs); err != nil {
			return nil, fmt.Errorf("postgres store: corrupt co-usage record of %s: %w", k, err)
		}
		if len(cs.Tools) > 0 {
			out[k] = cs
		}
	}
	if err := rows.Err(); err != nil {
		return nil, s.wrap(ctx, "companions", err)
	}
	return out, nil
}
