-- 0032: an episode keeps the lines of its session that carry the facts, and a `fact` event type
-- (issue 36; docs/concepts.md "Episode lines", docs/benchmarks.md "Answer coverage").
--
-- 1. episode_lines: what the user and the agent said in the session, as short verbatim lines (the
--    canonical messages' text, never tool traffic, hook output or a compaction summary; redacted when
--    redaction is on; at most a few dozen per episode, those carrying specifics first:
--    jobs/extract/lines.py), each with its embedding. Recall gives a relevant episode the lines that
--    best match the opening message, so the block holds what was said, not only a summary of it.
--    The lines belong to the episode: they go with it (ON DELETE CASCADE: forget, erasing one episode,
--    a re-run's superseded episode when it is purged) and they outlive the transcript (retention), as
--    the episode does. The embedding column has no fixed dimension: `episodes reembed` rewrites the lines
--    after the episodes, and recall compares only vectors of the query's dimension.
-- 2. `fact`: a specific the user states (a stack and its versions, a name, a number, a setting). Neither
--    open nor standing: it does not appear in "still open" and no later event replaces it.

INSERT INTO event_types (name, description) VALUES
    ('fact', 'A specific the user states (stack and versions, names, numbers, dates, settings), verbatim.')
ON CONFLICT (name) DO NOTHING;

CREATE TABLE episode_lines (
    tenant_id     text NOT NULL,
    user_id       text NOT NULL,
    episode_id    bigint NOT NULL,
    ordinal       integer NOT NULL CHECK (ordinal >= 0),         -- the line's place in the session
    message_index integer NOT NULL CHECK (message_index >= 0),   -- the transcript message it is from
    speaker       text NOT NULL CHECK (length(speaker) BETWEEN 1 AND 200),
    said_at       timestamptz,
    text          text NOT NULL CHECK (length(text) BETWEEN 1 AND 1000),
    embedding     vector,
    PRIMARY KEY (tenant_id, episode_id, ordinal)
);
COMMENT ON TABLE episode_lines IS
    'Verbatim lines of a session episode that carry its facts (jobs/extract/lines.py); recall quotes the ones '
    'that best match the opening message. Deleted with their episode.';
CREATE INDEX episode_lines_user_idx ON episode_lines (tenant_id, user_id, episode_id);
ALTER TABLE episode_lines ALTER COLUMN embedding SET STORAGE MAIN;

GRANT SELECT, INSERT, DELETE ON episode_lines TO episodes_app;
DO $$
BEGIN
    -- Through EXECUTE, as 0026 and 0029 do: on a cluster already distributed, Citus sends an ALTER
    -- TABLE's query text on, and as a statement of this file that text is the whole file.
    EXECUTE 'ALTER TABLE episode_lines ENABLE ROW LEVEL SECURITY';
    -- On a Citus coordinator whose tables are distributed already, the new table joins them (co-located,
    -- as jobs/citus/cluster.py TENANT_TABLES lists it) before its foreign key to a distributed table.
    IF EXISTS (SELECT FROM pg_extension WHERE extname = 'citus')
       AND EXISTS (SELECT FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
                   WHERE n.nspname = 'pg_catalog' AND c.relname = 'pg_dist_partition') THEN
        IF EXISTS (SELECT FROM pg_dist_partition WHERE logicalrelid = 'public.episodes'::regclass) THEN
            PERFORM create_distributed_table('public.episode_lines', 'tenant_id', colocate_with => 'transcripts');
        END IF;
    END IF;
    EXECUTE 'ALTER TABLE episode_lines ADD CONSTRAINT episode_lines_episode_id_fkey FOREIGN KEY (tenant_id, episode_id) '
            'REFERENCES episodes (tenant_id, id) ON DELETE CASCADE';
END
$$;
CREATE POLICY tenant_isolation ON episode_lines TO episodes_app
    USING (tenant_id = current_setting('episodes.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('episodes.tenant_id', true));
