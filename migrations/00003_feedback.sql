-- cardex schema, version 3: what kind of signal an outcomes row records —
-- an orchestrator's ReportOutcome ('outcome') or an implicit miss
-- ('implicit_miss': a tool described or authorized that no recent shortlist
-- of the session held). Low-confidence discoveries are flagged on their
-- discoveries row.

-- +goose Up
ALTER TABLE outcomes ADD COLUMN source text NOT NULL DEFAULT 'outcome';

-- +goose Down
ALTER TABLE outcomes DROP COLUMN source;
