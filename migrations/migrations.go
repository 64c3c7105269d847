// Package migrations holds the PostgreSQL schema of cardex as versioned SQL
// files (goose format: NNNNN_name.sql with "-- +goose Up" and "-- +goose
// Down" sections), embedded into the binary. cards/postgres runs them with
// goose; `cardex migrate up|status` is the command.
package migrations

import "embed"

// FS holds the migration files.
//
//go:embed *.sql
var FS embed.FS
