-- cardex schema, version 8: co-usage ("companions"), learned from use and
-- shared by every replica.
--
-- One row per card that was used together with other tools of its tenant:
-- its table (cards.Companions as JSON: the time the counts are as of, and up
-- to 16 companions with decayed "before" and "after" counts; counts only,
-- no subject, no query). It goes with the card. A change of a card's table
-- moves the card's card_changes row to a new seq (its version stays), as a
-- change of its learned phrasings does, so every replica reloads the card.

-- +goose Up
CREATE TABLE card_companions (
    tenant     text COLLATE "C" NOT NULL,
    server     text COLLATE "C" NOT NULL,
    name       text COLLATE "C" NOT NULL,
    companions jsonb NOT NULL,
    PRIMARY KEY (tenant, server, name),
    FOREIGN KEY (tenant, server, name) REFERENCES cards ON DELETE CASCADE
);

-- +goose Down
DROP TABLE card_companions;
