-- cardex schema, version 5: service tokens kept in the database, so that
-- every replica started with --service-tokens-db accepts the same ones
-- (`cardex token new --database-url ...` adds one, `cardex token delete`
-- removes it; replicas re-read the table every 30 s). Only the SHA-256 of a
-- token is stored.

-- +goose Up
CREATE TABLE service_tokens (
    name         text COLLATE "C" PRIMARY KEY,
    role         text NOT NULL CHECK (role IN ('discover', 'catalog', 'admin')),
    token_sha256 text NOT NULL UNIQUE CHECK (token_sha256 ~ '^[0-9a-f]{64}$'),
    caller       jsonb,
    created_at   timestamptz NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE service_tokens;
