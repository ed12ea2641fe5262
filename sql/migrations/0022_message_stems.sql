-- 0022: the word stems of an opening message, as one function (recall's open items, sql/recall.sql).
--
-- A stale open item is shown only when it shares a word stem with the opening message: a lexeme of
-- to_tsvector('english') of 3+ letters (stop words are dropped by the parser). Recall read the stems
-- with a subquery inside its open-items statement; a function call keeps that statement one table with
-- no subquery, which Citus plans on its fast path (planned once, not deparsed): on the worker holding
-- the tenant the statement took 1.02 ms joined in CTEs and 0.57 ms in this form (median, a typical
-- user; README "Scaling out"). IMMUTABLE, as to_tsvector with a fixed configuration is: with a
-- constant argument the planner computes it once per statement.

CREATE FUNCTION episodes_message_stems(message text) RETURNS text[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT ARRAY(SELECT l FROM unnest(tsvector_to_array(to_tsvector('english'::regconfig, message))) l
                 WHERE l ~ '^[[:alpha:]]{3,}$')
$$;
COMMENT ON FUNCTION episodes_message_stems(text) IS
    'The lexemes of to_tsvector(''english'', message) that are word stems of 3 or more letters: what a '
    'stale open item must share with an opening message to be recalled.';
