-- cardex schema, version 7: search examples on cards — requests a tool
-- serves, written by a person or by a language model at registration
-- (searched and embedded, never sent to an agent) — and their provenance:
-- {"author": "person"|"model", "model", "prompt_version", "card_hash"}.
-- Both are bounded by cardex (32 examples of at most 200 characters). Cards
-- written before this version have none.

-- +goose Up
ALTER TABLE cards
    ADD COLUMN search_examples        text[] NOT NULL DEFAULT '{}',
    ADD COLUMN search_examples_source jsonb;

-- +goose Down
ALTER TABLE cards
    DROP COLUMN search_examples_source,
    DROP COLUMN search_examples;
