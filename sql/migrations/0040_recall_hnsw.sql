-- 0040: approximate nearest-neighbour indexes for the recall of heavy users (issue 47, "Cost, under load";
-- sql/recall.sql recall_scores and recall_lines, docs/recall.md "Scale").
--
-- A user with more than RecallConfig.index_above episodes is searched through these HNSW indexes (pgvector
-- >= 0.8, cosine distance, iterative scans so a per-user filter never returns too few rows) instead of
-- scoring every episode and every line of the user row by row; everyone else is still scored exactly.
--
-- 1. episodes_embedding_hnsw: over episodes.embedding, a vector(dim) column (0001; `episodes reembed`
--    drops it and renames embedding_next in its place, and the index goes with the old column).
-- 2. episode_lines_embedding_hnsw_<dim>: over embedding::vector(dim) of the lines that have the recorded
--    dimension (episode_lines.embedding has none fixed, 0032: reembed rewrites the lines after its switch,
--    and a line of another dimension must still be writable, so the index is partial on vector_dims).
--
-- episodes_recall_indexes() creates what is missing for the dimension episodes_settings records and drops a
-- lines index of another one; this migration calls it, and so does `episodes reembed` after it has
-- rewritten the lines (jobs/lifecycle/reembed.py). Until then a heavy user's recall still answers (the
-- statements fall back to scanning), only slower. Building over many rows is slow (bench/api_load.py's
-- 1.5M lines: docs/benchmarks.md); give the session more maintenance_work_mem for a large table.
-- Through EXECUTE, as 0037 does: on a cluster already distributed, Citus sends a CREATE INDEX's text on,
-- and as a statement of this file that text would be the whole file.
CREATE FUNCTION episodes_recall_indexes() RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    dim int := (SELECT value::int FROM episodes_settings WHERE key = 'embedding_dim');
    old record;
BEGIN
    EXECUTE 'CREATE INDEX IF NOT EXISTS episodes_embedding_hnsw ON episodes USING hnsw (embedding vector_cosine_ops)';
    FOR old IN
        SELECT indexname FROM pg_indexes
        WHERE schemaname = current_schema() AND tablename = 'episode_lines'
          AND indexname LIKE 'episode\_lines\_embedding\_hnsw\_%' AND indexname <> 'episode_lines_embedding_hnsw_' || dim
    LOOP
        EXECUTE format('DROP INDEX %I', old.indexname);
    END LOOP;
    EXECUTE format('CREATE INDEX IF NOT EXISTS %I ON episode_lines USING hnsw ((embedding::vector(%s)) vector_cosine_ops) '
                   'WHERE vector_dims(embedding) = %s', 'episode_lines_embedding_hnsw_' || dim, dim, dim);
END
$$;
COMMENT ON FUNCTION episodes_recall_indexes() IS
    'Creates the HNSW indexes of heavy users'' recall for the recorded embedding dimension (migration 0040).';

SELECT episodes_recall_indexes();
