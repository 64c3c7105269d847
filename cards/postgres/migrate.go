package postgres

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"log/slog"
	"slices"
	"strings"
	"testing/fstest"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	"github.com/seed0cff8200/cardex/migrations"
)

// VersionTable is goose's record of applied migrations, in the store's schema.
const VersionTable = "goose_db_version"

// MigrationStatus is one migration and whether it is applied.
type MigrationStatus struct {
	Version int64
	Name    string
	Applied bool
}

// migrationFS returns the embedded migrations, each section of each file
// starting with SET LOCAL search_path, so that the tables land in the
// store's schema whatever the connection's search_path is (goose runs every
// migration in one transaction, so the setting ends with it).
func migrationFS(schema string) (fs.FS, error) {
	ents, err := fs.ReadDir(migrations.FS, ".")
	if err != nil {
		return nil, err
	}
	set := fmt.Sprintf("SET LOCAL search_path TO %s, public;", quoteIdent(schema))
	out := fstest.MapFS{} // an in-memory fs.FS; nothing to do with tests
	for _, e := range ents {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".sql") {
			continue
		}
		b, err := fs.ReadFile(migrations.FS, e.Name())
		if err != nil {
			return nil, err
		}
		var sb strings.Builder
		for line := range strings.Lines(string(b)) {
			sb.WriteString(line)
			if t := strings.TrimSpace(line); t == "-- +goose Up" || t == "-- +goose Down" {
				sb.WriteString(set + "\n")
			}
		}
		out[e.Name()] = &fstest.MapFile{Data: []byte(sb.String()), Mode: 0o444}
	}
	return out, nil
}

// migrationLockID is the advisory lock that serialises `cardex migrate up`
// runs on one schema (two at once wait for each other, not fail).
func migrationLockID(schema string) int64 {
	h := fnv.New64a()
	h.Write([]byte("cardex migrate " + schema))
	return int64(h.Sum64() >> 1)
}

func (s *Store) provider(log *slog.Logger, locked bool) (*goose.Provider, error) {
	fsys, err := migrationFS(s.schema)
	if err != nil {
		return nil, err
	}
	opts := []goose.ProviderOption{goose.WithTableName(s.schema + "." + VersionTable)}
	if locked {
		locker, err := lock.NewPostgresSessionLocker(lock.WithLockID(migrationLockID(s.schema)), lock.WithLockTimeout(1, 600))
		if err != nil {
			return nil, err
		}
		opts = append(opts, goose.WithSessionLocker(locker))
	}
	if log != nil {
		opts = append(opts, goose.WithSlog(log))
	}
	db := stdlib.OpenDBFromPool(s.pool)
	p, err := goose.NewProvider(goose.DialectPostgres, db, fsys, opts...)
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("migrations: %w", err)
	}
	return p, nil
}

// Migrate applies every pending migration (creating the schema if needed)
// and returns the versions it applied.
func (s *Store) Migrate(ctx context.Context) ([]int64, error) { return s.MigrateTo(ctx, 0) }

// MigrateTo applies the pending migrations up to and including version (0:
// all of them).
func (s *Store) MigrateTo(ctx context.Context, version int64) ([]int64, error) {
	if err := s.createSchema(ctx); err != nil {
		return nil, err
	}
	p, err := s.provider(s.log, true)
	if err != nil {
		return nil, err
	}
	defer p.Close()
	var res []*goose.MigrationResult
	if version > 0 {
		res, err = p.UpTo(ctx, version)
	} else {
		res, err = p.Up(ctx)
	}
	if err != nil {
		return nil, s.wrap(ctx, "migrate up", err)
	}
	var out []int64
	for _, r := range res {
		out = append(out, r.Source.Version)
	}
	return out, nil
}

// MigrateExcept applies every pending migration but the skipped versions,
// one at a time in order. It is for test databases that lack what one
// migration needs (native PostgreSQL without pgvector skips version 2);
// a schema migrated so is never current for SchemaCurrent.
func (s *Store) MigrateExcept(ctx context.Context, skip ...int64) ([]int64, error) {
	if err := s.createSchema(ctx); err != nil {
		return nil, err
	}
	p, err := s.provider(s.log, true)
	if err != nil {
		return nil, err
	}
	defer p.Close()
	var out []int64
	for _, src := range p.ListSources() {
		if slices.Contains(skip, src.Version) {
			continue
		}
		if _, err := p.ApplyVersion(ctx, src.Version, true); err != nil {
			if errors.Is(err, goose.ErrAlreadyApplied) {
				continue
			}
			return out, s.wrap(ctx, "migrate up", err)
		}
		out = append(out, src.Version)
	}
	return out, nil
}

// createSchema creates the store's schema unless it exists.
func (s *Store) createSchema(ctx context.Context) error {
	var exists bool
	if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)`, s.schema).Scan(&exists); err != nil {
		return s.wrap(ctx, "migrate", err)
	}
	if !exists {
		// IF NOT EXISTS is not safe against a concurrent CREATE SCHEMA: a
		// second `migrate up` racing this one may get a unique violation,
		// which only means the schema now exists.
		if _, err := s.pool.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+quoteIdent(s.schema)); err != nil && !schemaRace(err) {
			return s.wrap(ctx, "migrate: create schema", err)
		}
	}
	return nil
}

// MigrationStatus lists every migration of this binary and whether the
// database has it.
func (s *Store) MigrationStatus(ctx context.Context) ([]MigrationStatus, error) {
	p, err := s.provider(nil, false)
	if err != nil {
		return nil, err
	}
	defer p.Close()
	var exists bool
	if err := s.pool.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, s.schema+"."+VersionTable).Scan(&exists); err != nil {
		return nil, s.wrap(ctx, "migration status", err)
	}
	var out []MigrationStatus
	if !exists {
		for _, src := range p.ListSources() {
			out = append(out, MigrationStatus{Version: src.Version, Name: baseName(src.Path)})
		}
		return out, nil
	}
	st, err := p.Status(ctx)
	if err != nil {
		return nil, s.wrap(ctx, "migration status", err)
	}
	for _, m := range st {
		out = append(out, MigrationStatus{Version: m.Source.Version, Name: baseName(m.Source.Path), Applied: m.State == goose.StateApplied})
	}
	return out, nil
}

// SchemaCurrent reports whether every migration of this binary is applied;
// when not, the error says what is missing (wrapping cards.ErrUnavailable
// when the database cannot be reached).
func (s *Store) SchemaCurrent(ctx context.Context) error {
	st, err := s.MigrationStatus(ctx)
	if err != nil {
		return err
	}
	var pending []string
	for _, m := range st {
		if !m.Applied {
			pending = append(pending, m.Name)
		}
	}
	if len(pending) > 0 {
		return fmt.Errorf("database schema %q is not current: %d migration(s) pending (%s); run `cardex migrate up`",
			s.schema, len(pending), strings.Join(pending, ", "))
	}
	return nil
}

func baseName(p string) string {
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		return p[i+1:]
	}
	return p
}

// schemaRace reports whether err is a concurrent CREATE SCHEMA's unique
// violation (23505) or duplicate schema (42P06).
func schemaRace(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "23505" || pe.Code == "42P06")
}
