-- 0031: rows inserted by hand, and runs stopped by the operator (issue 35, items 8 and 9).
--
-- 1. A host that INSERTs into transcripts need not compute content_hash: left out (NULL), it is the
--    SHA-256 of the row's content as inserted (user, agent, purpose, start, messages, metadata), in
--    hex. The hash only has to change when the content does; it need not equal the one `episodes
--    ingest` computes from the normalised record (a later ingest of the same session then counts as
--    a change, once). Its messages may be in any shape ingest accepts: the summarizer normalises
--    them when it claims the row (jobs.summarize.claim) and dead-letters, with the reason, what it
--    cannot read.
--    A message's `ts` that is not a time no longer fails the idle close of every open session (serve's
--    maintenance, every 30 s): episodes_last_message_time reads it as none, and the row is dead-lettered
--    with its reason when claimed.
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

-- The latest ts of a session's messages, or ``otherwise`` when none has one (idle_close, sql/queries.sql).
-- Declared IMMUTABLE for Citus, which calls no STABLE function with column references in an UPDATE
-- (a ts without a zone is read in the session's TimeZone, as the cast in the statement was before; the
-- function is in no index). A ts that is not a time counts as none. One cast of them all first, in a block that catches a
-- malformed one (one subtransaction a row, not a message); only then, message by message.
CREATE FUNCTION episodes_last_message_time(messages jsonb, otherwise timestamptz) RETURNS timestamptz
LANGUAGE plpgsql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    latest timestamptz;
    ts text;
BEGIN
    BEGIN
        SELECT max((m ->> 'ts')::timestamptz) INTO latest FROM jsonb_array_elements(messages) m;
        RETURN coalesce(latest, otherwise);
    EXCEPTION WHEN data_exception THEN
        latest := NULL;  -- some ts is not a time: the others count
    END;
    FOR ts IN SELECT m ->> 'ts' FROM jsonb_array_elements(messages) m WHERE m ->> 'ts' IS NOT NULL LOOP
        BEGIN
            latest := greatest(latest, ts::timestamptz);
        EXCEPTION WHEN data_exception THEN
            NULL;
        END;
    END LOOP;
    RETURN coalesce(latest, otherwise);
END
$$;

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
