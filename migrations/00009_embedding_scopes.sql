-- cardex schema, version 9: each card vector carries its card's required
-- scopes and whether the card is active, so that a restricted caller's
-- vector search selects its candidates from card_embeddings alone (the
-- caller's covered scopes against required_scopes, an array containment)
-- instead of joining every row the search visits to cards.
--
-- The copies follow the cards by trigger, whatever writes them: a vector
-- written takes its card's values; a card whose scopes or status change
-- passes them to its vectors in the same transaction.

-- +goose Up
ALTER TABLE card_embeddings
    ADD COLUMN required_scopes text[] NOT NULL DEFAULT '{}',
    ADD COLUMN active boolean NOT NULL DEFAULT false;

-- The existing vectors take their cards' values with the HNSW indexes
-- dropped and rebuilt after: updating every row would otherwise insert each
-- vector into each index again, one at a time, far slower than a build.
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
    UPDATE card_embeddings e SET required_scopes = c.required_scopes, active = (c.status = 'active')
        FROM cards c WHERE c.tenant = e.tenant AND c.server = e.server AND c.name = e.name;
    FOREACH def IN ARRAY defs LOOP
        EXECUTE def;
    END LOOP;
END
$$;
-- +goose StatementEnd

-- A caller whose scopes select few of a large tenant's vectors reads them
-- through this index (required_scopes <@ covered) instead of every row.
CREATE INDEX card_embeddings_scopes ON card_embeddings USING gin (required_scopes);

-- SET search_path FROM CURRENT: the schema this migration runs in, so that
-- the functions find their tables whatever the session's search_path is.
-- +goose StatementBegin
CREATE FUNCTION cardex_embedding_from_card() RETURNS trigger LANGUAGE plpgsql
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
CREATE FUNCTION cardex_card_to_embeddings() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
    UPDATE card_embeddings SET required_scopes = NEW.required_scopes, active = (NEW.status = 'active')
        WHERE tenant = NEW.tenant AND server = NEW.server AND name = NEW.name;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER card_embeddings_from_card BEFORE INSERT OR UPDATE OF tenant, server, name, embedding
    ON card_embeddings FOR EACH ROW EXECUTE FUNCTION cardex_embedding_from_card();

CREATE TRIGGER cards_to_embeddings AFTER UPDATE OF required_scopes, status ON cards FOR EACH ROW
    WHEN (OLD.required_scopes IS DISTINCT FROM NEW.required_scopes OR OLD.status IS DISTINCT FROM NEW.status)
    EXECUTE FUNCTION cardex_card_to_embeddings();

-- +goose Down
DROP TRIGGER cards_to_embeddings ON cards;
DROP TRIGGER card_embeddings_from_card ON card_embeddings;
DROP FUNCTION cardex_card_to_embeddings();
DROP FUNCTION cardex_embedding_from_card();
DROP INDEX card_embeddings_scopes;
ALTER TABLE card_embeddings DROP COLUMN active, DROP COLUMN required_scopes;
