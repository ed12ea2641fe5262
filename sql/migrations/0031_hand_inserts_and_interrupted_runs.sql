-- 0031: rows inserted by hand, and runs stopped by the operator (issue 35, items 8 and 9).
--
-- 1. A host that INSERTs into transcripts need not compute content_hash: left out (NULL), it is the
--    SHA-256 of the row's content as inserted (user, agent, purpose, start, messages, metadata), in
--    hex. The hash only has to change when the content does; it need not equal the one `episodes
--    ingest` computes from the normalised record (a later ingest of the same session then counts as
--    a change, once). Its messages may be in any shape ingest accepts: the summarizer normalises
--    them when it claims the row (jobs.summarize.claim) and dead-letters, with the reason, what it
--    cannot read.
-- 2. A job run stopped by Ctrl-C or SIGTERM (`episodes run`) is recorded as 'interrupted', not 'ok'.

CREATE FUNCTION episodes_transcript_hash() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    NEW.content_hash := encode(sha256(convert_to(jsonb_build_object(
        'user_id', NEW.user_id, 'agent_id', NEW.agent_id, 'purpose', NEW.purpose, 'started_at', NEW.started_at,
        'messages', NEW.messages, 'metadata', NEW.metadata)::text, 'UTF8')), 'hex');
    RETURN NEW;
END
$$;

CREATE TRIGGER transcripts_content_hash BEFORE INSERT ON transcripts
    FOR EACH ROW WHEN (NEW.content_hash IS NULL) EXECUTE FUNCTION episodes_transcript_hash();

COMMENT ON COLUMN transcripts.content_hash IS
    'Identity of the content (a re-ingest of the same content is a no-op). Left NULL in an INSERT, the database computes it.';

DO $$
BEGIN
    -- Through EXECUTE: on a cluster Citus sends an ALTER TABLE of a reference table to its placements
    -- as the statement's text, which in a migration file is the whole file (see 0026).
    EXECUTE 'ALTER TABLE job_runs DROP CONSTRAINT job_runs_status_check';
    EXECUTE 'ALTER TABLE job_runs ADD CONSTRAINT job_runs_status_check '
            'CHECK (status IN (''running'', ''ok'', ''failed'', ''interrupted''))';
END
$$;
