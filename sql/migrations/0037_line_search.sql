-- 0037: every line of a user's history is searchable by its words (issue 47; docs/recall.md).
--
-- Recall searches all of a user's episode lines (migration 0032), not only those of the episodes it
-- chose first, by two ranks fused in one statement (sql/recall.sql recall_line_hits): cosine distance of
-- the line's embedding, and full text. The text side needs the lines' lexemes stored (computing
-- to_tsvector for every line of a user at each recall costs milliseconds) and an index over them:
--
-- 1. text_tsv: the line's lexemes under the 'english' configuration (stemmed, stop words dropped: the
--    opening message's lexemes are OR-ed, and a stop word would match every line), generated from text,
--    so every writer of lines (summarize, reembed, corrections) keeps it right without knowing of it.
-- 2. episode_lines_tsv_idx: GIN over text_tsv, for a word that only a few of a heavy user's lines hold.
--
-- Through EXECUTE, as 0032 does: on a cluster already distributed, Citus sends an ALTER TABLE's query
-- text on, and as a statement of this file that text would be the whole file.
DO $$
BEGIN
    EXECUTE 'ALTER TABLE episode_lines ADD COLUMN text_tsv tsvector '
            'GENERATED ALWAYS AS (to_tsvector(''english''::regconfig, text)) STORED';
    EXECUTE 'CREATE INDEX episode_lines_tsv_idx ON episode_lines USING gin (text_tsv)';
END
$$;
