-- cardex schema, version 2: card embeddings with pgvector.

-- +goose Up
-- In public (unless an administrator installed it elsewhere already): the
-- type must be on every connection's search_path, while this migration runs
-- with search_path set to cardex's own schema first.
CREATE EXTENSION IF NOT EXISTS vector SCHEMA public;

-- Card vectors, one per (card, embedder model). The column has no fixed
-- dimension so that models of any size share the table; each model gets a
-- partial HNSW index (cosine) over embedding::vector(dim), created by
-- cardex for the configured model (cards/postgres.Vectors.EnsureIndex). The
-- built-in embedder's index is created here.
CREATE TABLE card_embeddings (
    tenant    text COLLATE "C" NOT NULL,
    server    text COLLATE "C" NOT NULL,
    name      text COLLATE "C" NOT NULL,
    model     text NOT NULL,
    text_hash text NOT NULL,
    embedding vector NOT NULL,
    PRIMARY KEY (tenant, server, name, model),
    FOREIGN KEY (tenant, server, name) REFERENCES cards ON DELETE CASCADE
);

CREATE INDEX card_embeddings_hnsw_cardex_hashed_v1_384_384
    ON card_embeddings USING hnsw ((embedding::vector(384)) vector_cosine_ops)
    WHERE model = 'cardex-hashed-v1-384';

-- +goose Down
DROP TABLE card_embeddings;
