-- 0013: what recall's in-process text score (ts_rank, jobs/recall/text_rank.py) needs of search_tsv,
-- kept beside it in a form a reader takes whole, so that a user's first recall in a process parses
-- nothing row by row (jobs/recall/index.py).
--
-- ts_rank(search_tsv, q, 1) needs, per lexeme, its number of positions (search_tsv is always
-- to_tsvector(...), so every position has weight D and their count decides the lexeme's term) and
-- the document's total. The lexemes come cheaply from the server as tsvector's binary form without
-- positions (tsvectorsend(strip(search_tsv)), every lexeme ending in NUL bytes, so one split
-- separates a user's whole set). The counts were to be had only from the text form, parsed in
-- Python, or from unnest(search_tsv) at every read (~5 us a row).
--
-- search_tf: one byte per lexeme of search_tsv, in its stored order: its number of positions minus
-- one (a tsvector keeps 1 .. 256 positions a lexeme; one stored without positions counts 1, so 0).
-- Empty when search_tsv is.
--
-- Kept by a BEFORE INSERT OR UPDATE OF search_tsv trigger, not a stored generated column: adding a
-- generated column rewrites the whole table under an exclusive lock (14 s for 500,000 episodes on a
-- 2-core machine). Adding a nullable column without a default is a catalogue change only; rows
-- written before this migration keep NULL, and recall computes their counts on the server as it
-- reads them (coalesce in sql/recall.sql; ~5 us a row, only until the row is next written). An
-- operator may backfill in small batches while the system runs (row locks only; each batch is seen
-- by in-process copies as changed rows):
--   UPDATE episodes SET search_tf = episodes_search_tf(search_tsv)
--   WHERE id IN (SELECT id FROM episodes WHERE search_tf IS NULL LIMIT 10000);

CREATE FUNCTION episodes_search_tf(tsv tsvector) RETURNS bytea
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT coalesce(string_agg(set_byte('\x00'::bytea, 0, coalesce(cardinality(u.positions), 1) - 1),
                               ''::bytea ORDER BY u.n), ''::bytea)
    FROM unnest(tsv) WITH ORDINALITY AS u(lexeme, positions, weights, n)
$$;

ALTER TABLE episodes ADD COLUMN search_tf bytea;

CREATE FUNCTION episodes_keep_search_tf() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.search_tf := episodes_search_tf(NEW.search_tsv);
    RETURN NEW;
END
$$;
CREATE TRIGGER episodes_keep_search_tf BEFORE INSERT OR UPDATE OF search_tsv ON episodes
    FOR EACH ROW EXECUTE FUNCTION episodes_keep_search_tf();
