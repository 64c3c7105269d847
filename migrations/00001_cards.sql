-- cardex schema, version 1: cards, the change sequence, the discovery log
-- and outcomes. Version 2 adds card embeddings (pgvector).
--
-- Identifiers and the JSON schemas are compared and ordered as bytes: the key
-- columns use COLLATE "C" so that List pages in the same (server, name) byte
-- order as the embedded store, and the schemas are bytea (not jsonb, which
-- would reorder keys and rewrite numbers), returned byte-for-byte.

-- +goose Up
CREATE TABLE cards (
    tenant          text COLLATE "C" NOT NULL,
    server          text COLLATE "C" NOT NULL,
    name            text COLLATE "C" NOT NULL,
    kind            text NOT NULL,
    summary         text NOT NULL,
    description     text NOT NULL DEFAULT '',
    aliases         text[] NOT NULL DEFAULT '{}',
    tags            text[] NOT NULL DEFAULT '{}',
    when_not_to_use text NOT NULL DEFAULT '',
    required_scopes text[] NOT NULL DEFAULT '{}',
    status          text NOT NULL CHECK (status IN ('active', 'pending', 'revoked')),
    read_only       boolean,
    destructive     boolean,
    idempotent      boolean,
    open_world      boolean,
    input_schema    bytea,
    output_schema   bytea,
    version         bigint NOT NULL CHECK (version > 0),
    updated_at      timestamptz NOT NULL,
    PRIMARY KEY (tenant, server, name)
);

-- The change sequence. change_counter is one row: a writer increments it in
-- its transaction, which orders commits by sequence number (a SEQUENCE
-- would hand out numbers that commit out of order, so a reader could skip a
-- change that commits late) and gives no gaps on rollback.
CREATE TABLE change_counter (
    id  boolean PRIMARY KEY DEFAULT true CHECK (id),
    seq bigint NOT NULL
);
INSERT INTO change_counter (id, seq) VALUES (true, 0);

-- The latest change per card key (older ones are replaced). version is the
-- card's version at that change; for a deletion it is the last version, so a
-- re-created card continues after it.
CREATE TABLE card_changes (
    tenant  text COLLATE "C" NOT NULL,
    server  text COLLATE "C" NOT NULL,
    name    text COLLATE "C" NOT NULL,
    seq     bigint NOT NULL UNIQUE,
    deleted boolean NOT NULL,
    version bigint NOT NULL,
    PRIMARY KEY (tenant, server, name)
);

-- Replicas LISTEN on cardex_changes; the payload is the schema name.
-- +goose StatementBegin
CREATE FUNCTION cardex_notify_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('cardex_changes', TG_TABLE_SCHEMA);
    RETURN NULL;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER card_changes_notify AFTER INSERT OR UPDATE ON card_changes
    FOR EACH STATEMENT EXECUTE FUNCTION cardex_notify_change();

-- The discovery log (one row per DiscoverTools) and the outcomes reported
-- for discoveries (ReportOutcome), for evaluation and miss mining.
CREATE TABLE discoveries (
    id              text PRIMARY KEY,
    at              timestamptz NOT NULL,
    tenant          text COLLATE "C" NOT NULL,
    subject_hash    text NOT NULL DEFAULT '',
    session_id      text NOT NULL DEFAULT '',
    query           text,
    query_hash      text,
    top_k           integer NOT NULL,
    returned        jsonb NOT NULL DEFAULT '[]',
    candidate_count integer NOT NULL,
    latency_ms      double precision NOT NULL,
    low_confidence  boolean NOT NULL DEFAULT false,
    degraded        boolean NOT NULL DEFAULT false
);
CREATE INDEX discoveries_tenant_at ON discoveries (tenant, at);

CREATE TABLE outcomes (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    discovery_id text NOT NULL REFERENCES discoveries ON DELETE CASCADE,
    at           timestamptz NOT NULL,
    tenant       text COLLATE "C" NOT NULL,
    used_server  text COLLATE "C",
    used_name    text COLLATE "C",
    none_fit     boolean NOT NULL DEFAULT false,
    miss         boolean NOT NULL DEFAULT false
);
CREATE INDEX outcomes_discovery ON outcomes (discovery_id);

-- +goose Down
DROP TABLE outcomes;
DROP TABLE discoveries;
DROP TRIGGER card_changes_notify ON card_changes;
DROP FUNCTION cardex_notify_change();
DROP TABLE card_changes;
DROP TABLE change_counter;
DROP TABLE cards;
