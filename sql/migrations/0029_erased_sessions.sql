-- 0029: an erasure stays erased (issue 35, items 3 and 6; docs/privacy.md "An erasure stays erased").
--
-- 1. Until now `episodes forget` deleted a user's transcripts and nothing remembered them: the next
--    `episodes ingest` of the same file, POST /v1/transcripts, `claude-code sync` (which re-reads a
--    resumed session file whole) or a hand INSERT stored them again as new, to be summarised again.
--    Now the erasure records each erased session as a keyed hash of (tenant, session id) in
--    erased_sessions, and a trigger refuses any transcript row whose session is recorded there, on
--    every path into the table. Keyed by the session id alone, not the user: a session is one row of
--    transcripts per (tenant, session id), so the same session sent back under another user id (a sync
--    under another login name) is refused too. A new session (another id) is accepted.
--    The key is a random secret per tenant (erasure_keys), not the database's erasure salt: on a Citus
--    cluster the trigger runs on the worker holding the tenant's shard, where episodes_secrets (the
--    coordinator's alone) is not, so the key is a co-located tenant table, owner only like the salt.
--    Both tables are written by the owner alone, through the owner-rights trigger functions below (which
--    pin search_path with pg_temp last and name every relation by schema); the app role reads no key and
--    only its own tenant's hashes (row-level security; see the grant below).
-- 2. forget marks its transaction (SET LOCAL episodes.erasing = 'user', which reaches the workers as the
--    tenant setting does); a row trigger records every transcript the transaction deletes or keeps
--    (UPDATE, --keep-transcripts). Outside an erasure nothing is recorded: an operator's own DELETE of a
--    transcript lets it be loaded again.
-- 3. job_runs records the tenants a run touched (tenants: those of its model calls, written when the
--    run finishes, jobs.runs), and the erasure scrub of 0026 blanks only runs of the erasing tenant: a run
--    that touched it, or whose text names the user as `<tenant>/<user>` (how compress names a group; the
--    only attribution that runs recorded before this migration carry). Before, the scrub (and its dry run's
--    count) reached every tenant's run history.

-- 1 ---------------------------------------------------------------------------------------------
CREATE TABLE erasure_keys (
    tenant_id text PRIMARY KEY,
    key       text NOT NULL CHECK (key ~ '^[0-9a-f]{64}$')
);
COMMENT ON TABLE erasure_keys IS
    'Owner only: the secret per tenant that erased_sessions hashes session ids with (made at the first erasure).';

CREATE TABLE erased_sessions (
    tenant_id    text NOT NULL,
    session_hash text NOT NULL CHECK (session_hash ~ '^[0-9a-f]{64}$'),
    erased_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, session_hash)
);
COMMENT ON TABLE erased_sessions IS
    'Owner only: sessions erased by `episodes forget`, as sha256(key || 0 || tenant || 0 || session id), never '
    'stored again (transcripts_stay_erased).';

REVOKE ALL ON erasure_keys, erased_sessions FROM PUBLIC;
DO $$
BEGIN
    -- Through EXECUTE, as 0026 does: on a cluster already distributed, Citus sends an ALTER TABLE's query
    -- text on, and as a statement of this file that text is the whole file.
    EXECUTE 'ALTER TABLE erasure_keys ENABLE ROW LEVEL SECURITY';
    EXECUTE 'ALTER TABLE erased_sessions ENABLE ROW LEVEL SECURITY';
END
$$;
-- The app role may SELECT both, and sees through their policies no key at all and its own tenant's
-- hashes only; it may write neither. The grant is for Citus: the recall route (jobs.citus.routes) asks,
-- as the app role, get_shard_id_for_distribution_column for every table co-located with transcripts, and
-- Citus wants SELECT on each.
GRANT SELECT ON erasure_keys, erased_sessions TO episodes_app;
CREATE POLICY nobody ON erasure_keys TO episodes_app USING (false) WITH CHECK (false);
CREATE POLICY tenant_isolation ON erased_sessions TO episodes_app
    USING (tenant_id = current_setting('episodes.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('episodes.tenant_id', true));

-- Refuses a transcript row whose session was erased (BEFORE INSERT, so also an INSERT ... ON CONFLICT DO
-- UPDATE onto a transcript kept by --keep-transcripts). Raised, not skipped: ingest, POST /v1/transcripts
-- and sync report the record as refused with this message, and a hand INSERT fails with it; nothing says
-- "stored". SQLSTATE 23000 with the constraint name erased_sessions, for code that tells it apart (on a
-- Citus cluster the coordinator passes on the SQLSTATE and the message, not the constraint name).
CREATE FUNCTION transcripts_stay_erased() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    erased timestamptz;
BEGIN
    SELECT e.erased_at INTO erased
    FROM public.erased_sessions e
    JOIN public.erasure_keys k ON k.tenant_id = e.tenant_id
    WHERE e.tenant_id = NEW.tenant_id AND k.tenant_id = NEW.tenant_id
      AND e.session_hash = encode(sha256(convert_to(k.key, 'UTF8') || '\x00'::bytea
                                         || convert_to(NEW.tenant_id, 'UTF8') || '\x00'::bytea
                                         || convert_to(NEW.session_id, 'UTF8')), 'hex');
    IF erased IS NOT NULL THEN
        RAISE EXCEPTION 'session % was erased on % (episodes forget): an erased session is not stored again',
            NEW.session_id, to_char(erased AT TIME ZONE 'UTC', 'YYYY-MM-DD')
            USING ERRCODE = 'integrity_constraint_violation', CONSTRAINT = 'erased_sessions',
                  HINT = 'Send a new session (another session id) to be remembered again.';
    END IF;
    RETURN NEW;
END
$$;
REVOKE ALL ON FUNCTION transcripts_stay_erased() FROM PUBLIC;
CREATE TRIGGER transcripts_stay_erased BEFORE INSERT ON transcripts
    FOR EACH ROW EXECUTE FUNCTION transcripts_stay_erased();

-- 2 ---------------------------------------------------------------------------------------------
-- Records the session of a transcript an erasure deletes (OLD) or keeps (NEW), with the tenant's key
-- (made here at its first erasure). Fires only inside an erasure's transaction (the WHEN below).
CREATE FUNCTION transcripts_note_erased() RETURNS trigger
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    row_tenant text := CASE WHEN TG_OP = 'DELETE' THEN OLD.tenant_id ELSE NEW.tenant_id END;
    row_session text := CASE WHEN TG_OP = 'DELETE' THEN OLD.session_id ELSE NEW.session_id END;
    fresh text := encode(sha256(convert_to(gen_random_uuid()::text || gen_random_uuid()::text, 'UTF8')), 'hex');
    secret text;
BEGIN
    SELECT k.key INTO secret FROM public.erasure_keys k WHERE k.tenant_id = row_tenant;
    IF secret IS NULL THEN
        INSERT INTO public.erasure_keys (tenant_id, key) VALUES (row_tenant, fresh) ON CONFLICT (tenant_id) DO NOTHING;
        SELECT k.key INTO secret FROM public.erasure_keys k WHERE k.tenant_id = row_tenant;
    END IF;
    INSERT INTO public.erased_sessions (tenant_id, session_hash)
    VALUES (row_tenant, encode(sha256(convert_to(secret, 'UTF8') || '\x00'::bytea || convert_to(row_tenant, 'UTF8')
                                      || '\x00'::bytea || convert_to(row_session, 'UTF8')), 'hex'))
    ON CONFLICT (tenant_id, session_hash) DO NOTHING;
    RETURN NULL;
END
$$;
REVOKE ALL ON FUNCTION transcripts_note_erased() FROM PUBLIC;
CREATE TRIGGER transcripts_note_erased AFTER DELETE OR UPDATE ON transcripts
    FOR EACH ROW WHEN (current_setting('episodes.erasing', true) = 'user')
    EXECUTE FUNCTION transcripts_note_erased();

-- 3 ---------------------------------------------------------------------------------------------
ALTER TABLE job_runs ADD COLUMN tenants text[];
COMMENT ON COLUMN job_runs.tenants IS
    'The tenants the run touched (those of its model calls), written when it finishes; NULL for older runs.';
-- finish_run reads a run's model calls by run (and summarize its token totals).
CREATE INDEX model_calls_job_run_idx ON model_calls (job_run_id) WHERE job_run_id IS NOT NULL;

-- As 0026, scoped to the erasing tenant's runs (see 3 above); the dry run counts the same rows.
CREATE OR REPLACE FUNCTION episodes_scrub_job_runs(tenant text, usr text, dry boolean) RETURNS integer
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    -- Every character that is not a letter or digit escaped: the id is matched literally.
    quoted_user text := regexp_replace(usr, '([^[:alnum:]])', '\\\1', 'g');
    word text := '(^|[^[:alnum:]_-])' || quoted_user || '($|[^[:alnum:]_-])';
    -- The user named with the tenant, as compress names a group ("acme/u-1 2023: ...").
    named text := '(^|[^[:alnum:]_-])' || regexp_replace(coalesce(tenant, ''), '([^[:alnum:]])', '\\\1', 'g')
                  || '/' || quoted_user || '($|[^[:alnum:]_-])';
    n integer;
    erased text;  -- the user's hash, computed here: the salt is on the coordinator only (0023)
BEGIN
    PERFORM public.episodes_check_tenant(tenant);
    IF coalesce(usr, '') = '' THEN
        RAISE EXCEPTION 'no user given' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF dry THEN
        SELECT count(*) INTO n FROM public.job_runs r
        WHERE ((strpos(coalesce(r.error, ''), usr) > 0 AND r.error ~ word)
               OR (strpos(r.counts::text, usr) > 0 AND r.counts::text ~ word))
          AND (tenant = ANY (r.tenants) OR coalesce(r.error, '') ~ named OR r.counts::text ~ named);
        RETURN n;
    END IF;
    erased := public.episodes_user_hash(tenant, usr);
    IF NOT EXISTS (SELECT FROM public.erasures e WHERE e.tenant_id = tenant AND e.user_hash = erased) THEN
        RAISE EXCEPTION 'user of tenant % has no erasure recorded: nothing to scrub for', tenant
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    UPDATE public.job_runs r
    SET error = CASE WHEN strpos(coalesce(r.error, ''), usr) > 0 AND r.error ~ word
                     THEN 'error text removed by an erasure' ELSE r.error END,
        counts = CASE WHEN strpos(r.counts::text, usr) > 0 AND r.counts::text ~ word THEN '{}'::jsonb ELSE r.counts END
    WHERE ((strpos(coalesce(r.error, ''), usr) > 0 AND r.error ~ word)
           OR (strpos(r.counts::text, usr) > 0 AND r.counts::text ~ word))
      AND (tenant = ANY (r.tenants) OR coalesce(r.error, '') ~ named OR r.counts::text ~ named);
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n;
END
$$;
REVOKE ALL ON FUNCTION episodes_scrub_job_runs(text, text, boolean) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION episodes_scrub_job_runs(text, text, boolean) TO episodes_service;
