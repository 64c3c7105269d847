-- cardex schema, version 4: server entries (what an MCP server, API or
-- database is, as a catalogue entry of its own) and learned phrasings shared
-- by every replica.
--
-- Both follow the change sequence of version 1: a server entry's change is
-- the card_changes row (tenant, server = the entry's name, name = ''), card
-- names are never empty; a change of a card's learned phrasings moves the
-- card's card_changes row to a new seq (its version stays), so every
-- replica reloads the card. No new trigger: card_changes notifies already.

-- +goose Up
CREATE TABLE servers (
    tenant      text COLLATE "C" NOT NULL,
    name        text COLLATE "C" NOT NULL,
    title       text NOT NULL DEFAULT '',
    description text NOT NULL DEFAULT '',
    version     bigint NOT NULL CHECK (version > 0),
    updated_at  timestamptz NOT NULL,
    PRIMARY KEY (tenant, name)
);

-- One row per card that learned something: its phrasings, oldest first,
-- bounded by cardex (32 of at most 200 characters). They go with the card.
CREATE TABLE card_learned (
    tenant  text COLLATE "C" NOT NULL,
    server  text COLLATE "C" NOT NULL,
    name    text COLLATE "C" NOT NULL,
    phrases text[] NOT NULL,
    PRIMARY KEY (tenant, server, name),
    FOREIGN KEY (tenant, server, name) REFERENCES cards ON DELETE CASCADE
);

-- +goose Down
DROP TABLE card_learned;
DROP TABLE servers;
DELETE FROM card_changes WHERE name = '';
