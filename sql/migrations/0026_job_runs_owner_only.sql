-- 0026: job_runs out of the tenant-facing roles' reach (issue 29; README "Database roles").
--
-- job_runs records runs of jobs (summarize, compress, maintenance, prune, reembed), nearly all of them
-- across tenants, so it has no tenant column to key row-level security on: a tenant column would be
-- NULL on the very rows that matter, as a compress or summarize failure's text can name a user of any
-- tenant. No tenant-facing process reads or writes it: runs are recorded by the owner (jobs.runs),
-- `episodes status` reads them as the owner. The only writer as episodes_app was forget, scrubbing
-- the texts that name the erased user inside the tenant's transaction. So: episodes_app loses every
-- privilege on it, row-level security is on with no policy (a grant made later by mistake still shows
-- no row to anybody but the owner), and the scrub is episodes_scrub_job_runs below, which forget calls
-- after its transaction committed, with the tenant set and no role switched: an owner-rights UPDATE
-- inside the tenant's transaction fails on a Citus cluster, where the coordinator replays SET LOCAL
-- ROLE episodes_app on its connections to the reference table's placements (measured, Citus 13).
REVOKE ALL ON job_runs FROM episodes_app, PUBLIC;
DO $$
BEGIN
    EXECUTE format('REVOKE ALL ON SEQUENCE %s FROM episodes_app, PUBLIC', pg_get_serial_sequence('job_runs', 'id'));
    -- Through EXECUTE: on a cluster already distributed, Citus sends this ALTER TABLE's query text to the
    -- reference table's placements, and as a statement of this file that text is the whole file.
    EXECUTE 'ALTER TABLE job_runs ENABLE ROW LEVEL SECURITY';
END
$$;

-- Blank the error texts and counts of job runs that name ``usr`` as a whole word (not inside a longer
-- id: letters, digits, _ and - around it continue a word); the number of runs. With ``dry``, only
-- counts them (forget's dry run). Otherwise only for a user with an erasure recorded in ``tenant``, the
-- transaction's tenant: nobody can blank run history for a user that was not erased.
CREATE FUNCTION episodes_scrub_job_runs(tenant text, usr text, dry boolean) RETURNS integer
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    -- Every character that is not a letter or digit escaped: the id is matched literally.
    word text := '(^|[^[:alnum:]_-])' || regexp_replace(usr, '([^[:alnum:]])', '\\\1', 'g') || '($|[^[:alnum:]_-])';
    n integer;
    erased text;  -- the user's hash, computed here: the salt is on the coordinator only (0023)
BEGIN
    PERFORM public.episodes_check_tenant(tenant);
    IF coalesce(usr, '') = '' THEN
        RAISE EXCEPTION 'no user given' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF dry THEN
        SELECT count(*) INTO n FROM public.job_runs r
        WHERE (strpos(coalesce(r.error, ''), usr) > 0 AND r.error ~ word)
           OR (strpos(r.counts::text, usr) > 0 AND r.counts::text ~ word);
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
    WHERE (strpos(coalesce(r.error, ''), usr) > 0 AND r.error ~ word)
       OR (strpos(r.counts::text, usr) > 0 AND r.counts::text ~ word);
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n;
END
$$;
REVOKE ALL ON FUNCTION episodes_scrub_job_runs(text, text, boolean) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION episodes_scrub_job_runs(text, text, boolean) TO episodes_service;
