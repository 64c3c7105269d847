-- cardex schema, version 10: a restricted caller's vectors read through an
-- index, and vectors kept in their rows.
--
-- Each distinct set of required scopes in a tenant gets a number
-- (card_scope_sets, never changed once written); each card and each of its
-- vectors carries its set's number (scope_set, kept by the triggers of
-- version 9 and one here), and the tenant's active vectors are indexed by
-- it. A restricted caller's exact search selects the sets that its covered
-- scopes contain (a few rows) and reads the vectors of those sets only,
-- instead of reading every vector row of the tenant to test its scopes.
--
-- A row over about 2 kB (a vector of more than ~450 dimensions, such as the
-- built-in embedder's 584) had its vector moved out of line to the TOAST
-- table, which every distance then read back from there: toast_tuple_target
-- keeps the vector in the row unless the row would not fit in a page.

-- +goose Up
CREATE TABLE card_scope_sets (
    id     bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant text COLLATE "C" NOT NULL,
    scopes text[] NOT NULL,
    UNIQUE (tenant, scopes)
);

-- The number of a tenant's set of scopes, added if new. Cards take it in
-- their writes, which serialise on the change counter.
-- +goose StatementBegin
CREATE FUNCTION cardex_scope_set(t text, s text[]) RETURNS bigint LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
DECLARE
    n bigint;
BEGIN
    SELECT id INTO n FROM card_scope_sets WHERE tenant = t AND scopes = s;
    IF n IS NULL THEN
        INSERT INTO card_scope_sets (tenant, scopes) VALUES (t, s) ON CONFLICT DO NOTHING RETURNING id INTO n;
        IF n IS NULL THEN
            SELECT id INTO n FROM card_scope_sets WHERE tenant = t AND scopes = s;
        END IF;
    END IF;
    RETURN n;
END
$$;
-- +goose StatementEnd

ALTER TABLE cards ADD COLUMN scope_set bigint;
UPDATE cards SET scope_set = cardex_scope_set(tenant, required_scopes);

-- +goose StatementBegin
CREATE FUNCTION cardex_card_scope_set() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
    NEW.scope_set := cardex_scope_set(NEW.tenant, NEW.required_scopes);
    RETURN NEW;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER cards_scope_set BEFORE INSERT OR UPDATE OF tenant, required_scopes ON cards
    FOR EACH ROW EXECUTE FUNCTION cardex_card_scope_set();

-- Version 9's functions, passing the set's number along with the scopes.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION cardex_embedding_from_card() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
DECLARE
    c record;
BEGIN
    SELECT required_scopes, status, scope_set INTO c FROM cards
        WHERE tenant = NEW.tenant AND server = NEW.server AND name = NEW.name;
    IF FOUND THEN
        NEW.required_scopes := c.required_scopes;
        NEW.active := c.status = 'active';
        NEW.scope_set := c.scope_set;
    ELSE
        NEW.required_scopes := '{}';
        NEW.active := false;
        NEW.scope_set := NULL;
    END IF;
    RETURN NEW;
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION cardex_card_to_embeddings() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
    UPDATE card_embeddings SET required_scopes = NEW.required_scopes, active = (NEW.status = 'active'),
        scope_set = NEW.scope_set
        WHERE tenant = NEW.tenant AND server = NEW.server AND name = NEW.name;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

ALTER TABLE card_embeddings ADD COLUMN scope_set bigint;

-- Rows up to a page stay whole: the largest toast_tuple_target (the page
-- size less its header).
-- +goose StatementBegin
DO $$
BEGIN
    EXECUTE format('ALTER TABLE card_embeddings SET (toast_tuple_target = %s)',
        current_setting('block_size')::int - 32);
END
$$;
-- +goose StatementEnd

-- Every vector row written again (its trigger takes its card's set; the
-- vector, copied, goes back into the row), with the HNSW indexes dropped
-- and built again after, as in version 9.
-- +goose StatementBegin
DO $$
DECLARE
    defs text[];
    def text;
BEGIN
    SELECT coalesce(array_agg(pg_get_indexdef(x.indexrelid)), '{}') INTO defs
        FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_am a ON a.oid = i.relam
        WHERE x.indrelid = 'card_embeddings'::regclass AND a.amname = 'hnsw';
    FOR def IN SELECT i.oid::regclass::text
        FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_am a ON a.oid = i.relam
        WHERE x.indrelid = 'card_embeddings'::regclass AND a.amname = 'hnsw'
    LOOP
        EXECUTE 'DROP INDEX ' || def;
    END LOOP;
    UPDATE card_embeddings SET embedding = embedding::real[]::vector;
    FOREACH def IN ARRAY defs LOOP
        EXECUTE def;
    END LOOP;
END
$$;
-- +goose StatementEnd

-- A restricted caller's exact search reads its vectors through this index;
-- version 9's index of the scopes has no more use.
CREATE INDEX card_embeddings_scope_set ON card_embeddings (tenant, model, scope_set) WHERE active;
DROP INDEX card_embeddings_scopes;

-- +goose Down
CREATE INDEX card_embeddings_scopes ON card_embeddings USING gin (required_scopes);
DROP INDEX card_embeddings_scope_set;
ALTER TABLE card_embeddings RESET (toast_tuple_target);
ALTER TABLE card_embeddings DROP COLUMN scope_set;

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION cardex_embedding_from_card() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
DECLARE
    c record;
BEGIN
    SELECT required_scopes, status INTO c FROM cards
        WHERE tenant = NEW.tenant AND server = NEW.server AND name = NEW.name;
    IF FOUND THEN
        NEW.required_scopes := c.required_scopes;
        NEW.active := c.status = 'active';
    ELSE
        NEW.required_scopes := '{}';
        NEW.active := false;
    END IF;
    RETURN NEW;
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION cardex_card_to_embeddings() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
    UPDATE card_embeddings SET required_scopes = NEW.required_scopes, active = (NEW.status = 'active')
        WHERE tenant = NEW.tenant AND server = NEW.server AND name = NEW.name;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

DROP TRIGGER cards_scope_set ON cards;
DROP FUNCTION cardex_card_scope_set();
ALTER TABLE cards DROP COLUMN scope_set;
DROP FUNCTION cardex_scope_set(text, text[]);
DROP TABLE card_scope_sets;
