package auth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DBTokens are the service tokens of the service_tokens table (migration
// 5), re-read periodically so that every replica sees a token added or
// removed. While an Authenticator has DBTokens, every service needs a
// credential, even when the table is empty: an emptied table must not
// open the service.
type DBTokens struct {
	pool   *pgxpool.Pool
	schema string
	cur    atomic.Pointer[Tokens]
}

// DBRefresh is how often replicas re-read the table.
const DBRefresh = 30 * time.Second

// NewDBTokens reads the table once (an error when it cannot: a missing
// table means `cardex migrate up` has not run).
func NewDBTokens(ctx context.Context, pool *pgxpool.Pool, schema string) (*DBTokens, error) {
	d := &DBTokens{pool: pool, schema: pgx.Identifier{schema}.Sanitize()}
	if err := d.Load(ctx); err != nil {
		return nil, err
	}
	return d, nil
}

// Load re-reads the table; on an error the tokens read before stay.
func (d *DBTokens) Load(ctx context.Context) error {
	rows, err := d.pool.Query(ctx, `SELECT name, role, token_sha256, coalesce(caller::text, '') FROM `+d.schema+`.service_tokens ORDER BY name`)
	if err != nil {
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == "42P01" {
			return fmt.Errorf("table service_tokens does not exist: run `cardex migrate up`")
		}
		return fmt.Errorf("read service_tokens: %w", err)
	}
	var f TokenFile
	for rows.Next() {
		var e TokenEntry
		var caller string
		if err := rows.Scan(&e.Name, &e.Role, &e.TokenSHA256, &caller); err != nil {
			return fmt.Errorf("read service_tokens: %w", err)
		}
		if caller != "" {
			e.Caller = &Binding{}
			if err := json.Unmarshal([]byte(caller), e.Caller); err != nil {
				return fmt.Errorf("service_tokens %s: caller: %w", e.Name, err)
			}
		}
		f.Tokens = append(f.Tokens, e)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read service_tokens: %w", err)
	}
	t, err := NewTokens(f)
	if err != nil {
		return fmt.Errorf("service_tokens: %w", err)
	}
	d.cur.Store(t)
	return nil
}

// Tokens are the tokens read last.
func (d *DBTokens) Tokens() *Tokens {
	if d == nil {
		return nil
	}
	return d.cur.Load()
}

// Follow re-reads the table every DBRefresh until ctx ends.
func (d *DBTokens) Follow(ctx context.Context, log *slog.Logger) {
	t := time.NewTicker(DBRefresh)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := d.Load(ctx); err != nil && ctx.Err() == nil {
				log.Warn("re-reading service tokens failed; keeping those read before", "err", err)
			}
		}
	}
}

// PutDBToken adds a token entry to the table, checked as a token file's.
func PutDBToken(ctx context.Context, pool *pgxpool.Pool, schema string, e TokenEntry) error {
	if _, err := NewTokens(TokenFile{Tokens: []TokenEntry{e}}); err != nil {
		return err
	}
	var caller *string
	if e.Caller != nil {
		b, err := json.Marshal(e.Caller)
		if err != nil {
			return err
		}
		s := string(b)
		caller = &s
	}
	_, err := pool.Exec(ctx, `INSERT INTO `+pgx.Identifier{schema}.Sanitize()+`.service_tokens (name, role, token_sha256, caller) VALUES ($1, $2, $3, $4::jsonb)`,
		e.Name, string(e.Role), strings.ToLower(e.TokenSHA256), caller)
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "23505" {
		return fmt.Errorf("a token named %q (or the same token) is already in service_tokens", e.Name)
	}
	return err
}

// DeleteDBToken removes the named token; false when there was none.
func DeleteDBToken(ctx context.Context, pool *pgxpool.Pool, schema, name string) (bool, error) {
	tag, err := pool.Exec(ctx, `DELETE FROM `+pgx.Identifier{schema}.Sanitize()+`.service_tokens WHERE name = $1`, name)
	if err != nil {
		return false, err
	}
	return tag.RowsAffected() > 0, nil
}
