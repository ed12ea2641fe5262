-- 0036: an erasure touches nothing of another tenant's run history, covers forked sessions' turns, and tells
-- an ingest key no date (issue 46, items 3, 6 and 13; docs/privacy.md "An erasure stays erased").
--
-- 1. Run history (item 3). A run of `serve` or `compress` goes across tenants. 0029 blanked the whole error
--    text (and counted it in a dry run) of every run that touched the erasing tenant and named the user as a
--    word, so a tenant's admin key learned whether a user id of the same spelling appeared in another tenant's
--    part of a shared run (`DELETE /v1/users/{w}?dry_run=true`: job_runs_scrubbed 1 or 0), and blanked that
--    part. Now an error text is read part by part (compress joins its groups' errors with "; ", each led by
--    `<tenant>/<user> <period>:`): a part led by the erasing tenant's name is scrubbed when it names the user;
--    a part led by another tenant's name is never touched; a part led by no tenant's name is scrubbed only
--    when the run touched the erasing tenant alone (job_runs.tenants). The counts of a run are blanked only for
--    a run of the erasing tenant alone. What is counted is what is changed: the erasing tenant's own parts.
-- 2. The erasure date (item 13). The refusal of an erased session named the day of the erasure in its
--    message, which POST /v1/transcripts passes on to any key that may ingest. The message now says only
--    that the session is refused; the day is in the DETAIL, which the operator's `episodes ingest` and sync
--    print and the HTTP API does not return.
-- 3. Forks (item 6). `claude --resume <id> --fork-session` starts a new session id whose file copies the
--    earlier lines (same uuids, times and text). Refused by session id only, the erased turns came back
--    with the fork. Now an erasure also records each erased message that has a time, as a keyed hash of
--    (tenant, role, time, text) in erased_messages (the same tenant key as erased_sessions), and a trigger
--    drops such messages from any transcript row written later (INSERT, or an UPDATE of its messages: the
--    fork file grown and synced again); a row left with no message is refused like an erased session.
--    Messages without a time are not recorded: a bare "yes" must not vanish from every later session.

-- 1 ---------------------------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION episodes_scrub_job_runs(tenant text, usr text, dry boolean) RETURNS integer
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    removed constant text := 'error text removed by an erasure';
    -- The user as a whole word, every character that is not a letter or digit escaped (matched literally).
    word text := '(^|[^[:alnum:]_-])' || regexp_replace(usr, '([^[:alnum:]])', '\\\1', 'g') || '($|[^[:alnum:]_-])';
    -- A part led by the erasing tenant's name, as compress leads a group's error ("acme/u-1 2023: ...").
    ours text := '^' || regexp_replace(coalesce(tenant, ''), '([^[:alnum:]])', '\\\1', 'g') || '/';
    -- A part led by some tenant's name (another's when not ours), unless it is led by the user id itself.
    led text := '^[^[:space:]/;]+/';
    r record;
    new_error text;
    new_counts jsonb;
    n integer := 0;
    erased text;  -- the user's hash, computed here: the salt is on the coordinator only (0023)
BEGIN
    PERFORM public.episodes_check_tenant(tenant);
    IF coalesce(usr, '') = '' THEN
        RAISE EXCEPTION 'no user given' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF NOT dry THEN
        erased := public.episodes_user_hash(tenant, usr);
        IF NOT EXISTS (SELECT FROM public.erasures e WHERE e.tenant_id = tenant AND e.user_hash = erased) THEN
            RAISE EXCEPTION 'user of tenant % has no erasure recorded: nothing to scrub for', tenant
                USING ERRCODE = 'insufficient_privilege';
        END IF;
    END IF;
    FOR r IN
        SELECT j.id, j.error, j.counts, coalesce(j.tenants = ARRAY[tenant], false) AS alone
        FROM public.job_runs j
        WHERE strpos(coalesce(j.error, ''), usr) > 0 OR strpos(j.counts::text, usr) > 0
        ORDER BY j.id
    LOOP
        SELECT string_agg(
                   CASE WHEN s.part ~ word
                             AND (s.part ~ ours OR (r.alone AND (s.part !~ led OR strpos(s.part, usr) = 1)))
                        THEN removed ELSE s.part END,
                   '; ' ORDER BY s.i)
        INTO new_error
        FROM regexp_split_to_table(r.error, '; ') WITH ORDINALITY AS s(part, i);
        new_counts := CASE WHEN r.alone AND r.counts::text ~ word THEN '{}'::jsonb ELSE r.counts END;
        IF new_error IS DISTINCT FROM r.error OR new_counts IS DISTINCT FROM r.counts THEN
            n := n + 1;
            IF NOT dry THEN
                UPDATE public.job_runs SET error = new_error, counts = new_counts WHERE id = r.id;
            END IF;
        END IF;
    END LOOP;
    RETURN n;
END
$$;
REVOKE ALL ON FUNCTION episodes_scrub_job_runs(text, text, boolean) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION episodes_scrub_job_runs(text, text, boolean) TO episodes_service;

-- 2 ---------------------------------------------------------------------------------------------
-- As 0029, the day moved from the message to the DETAIL.
CREATE OR REPLACE FUNCTION transcripts_stay_erased() RETURNS trigger
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
        RAISE EXCEPTION 'session % was erased (episodes forget): an erased session is not stored again',
            NEW.session_id
            USING ERRCODE = 'integrity_constraint_violation', CONSTRAINT = 'erased_sessions',
                  DETAIL = 'erased on ' || to_char(erased AT TIME ZONE 'UTC', 'YYYY-MM-DD'),
                  HINT = 'Send a new session (another session id) to be remembered again.';
    END IF;
    RETURN NEW;
END
$$;
REVOKE ALL ON FUNCTION transcripts_stay_erased() FROM PUBLIC;

-- 3 ---------------------------------------------------------------------------------------------
CREATE TABLE erased_messages (
    tenant_id    text NOT NULL,
    message_hash text NOT NULL CHECK (message_hash ~ '^[0-9a-f]{64}$'),
    erased_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, message_hash)
);
COMMENT ON TABLE erased_messages IS
    'Owner only: messages (with a time) of sessions erased by `episodes forget`, as sha256(key || 0 || tenant || 0 '
    '|| role || 0 || ts || 0 || content); dropped from any transcript written later (transcripts_drop_erased_turns).';
REVOKE ALL ON erased_messages FROM PUBLIC;
-- As erased_sessions (0029): the app role reads its own tenant's hashes only (Citus' shard lookup of the recall
-- route wants SELECT on every table co-located with transcripts) and writes none.
GRANT SELECT ON erased_messages TO episodes_app;
DO $$
BEGIN
    EXECUTE 'ALTER TABLE erased_messages ENABLE ROW LEVEL SECURITY';
    -- On a Citus coordinator whose tables are distributed already, the new table joins them (co-located,
    -- as jobs/citus/cluster.py TENANT_TABLES lists it).
    IF EXISTS (SELECT FROM pg_extension WHERE extname = 'citus')
       AND EXISTS (SELECT FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
                   WHERE n.nspname = 'pg_catalog' AND c.relname = 'pg_dist_partition') THEN
        IF EXISTS (SELECT FROM pg_dist_partition WHERE logicalrelid = 'public.erased_sessions'::regclass) THEN
            PERFORM create_distributed_table('public.erased_messages', 'tenant_id', colocate_with => 'transcripts');
        END IF;
    END IF;
END
$$;
CREATE POLICY tenant_isolation ON erased_messages TO episodes_app
    USING (tenant_id = current_setting('episodes.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('episodes.tenant_id', true));

-- As 0029, and the erased transcript's messages that have a time go to erased_messages.
CREATE OR REPLACE FUNCTION transcripts_note_erased() RETURNS trigger
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    row_tenant text := CASE WHEN TG_OP = 'DELETE' THEN OLD.tenant_id ELSE NEW.tenant_id END;
    row_session text := CASE WHEN TG_OP = 'DELETE' THEN OLD.session_id ELSE NEW.session_id END;
    row_messages jsonb := CASE WHEN TG_OP = 'DELETE' THEN OLD.messages ELSE NEW.messages END;
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
    INSERT INTO public.erased_messages (tenant_id, message_hash)
    SELECT DISTINCT row_tenant,
           encode(sha256(convert_to(secret, 'UTF8') || '\x00'::bytea || convert_to(row_tenant, 'UTF8')
                         || '\x00'::bytea || convert_to(coalesce(m ->> 'role', ''), 'UTF8')
                         || '\x00'::bytea || convert_to(m ->> 'ts', 'UTF8')
                         || '\x00'::bytea || convert_to(coalesce(m ->> 'content', ''), 'UTF8')), 'hex')
    FROM jsonb_array_elements(CASE WHEN jsonb_typeof(row_messages) = 'array' THEN row_messages ELSE '[]' END) AS a(m)
    WHERE jsonb_typeof(m) = 'object' AND m ->> 'ts' IS NOT NULL
    ON CONFLICT (tenant_id, message_hash) DO NOTHING;
    RETURN NULL;
END
$$;
REVOKE ALL ON FUNCTION transcripts_note_erased() FROM PUBLIC;

-- Drops the erased messages from a transcript row being written (any path: ingest, POST /v1/transcripts,
-- sync, hooks, a hand INSERT); refuses the row when none is left. One look-up per row for a tenant without
-- erased messages.
CREATE FUNCTION transcripts_drop_erased_turns() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    secret text;
    kept jsonb;
    dropped bigint;
BEGIN
    IF jsonb_typeof(NEW.messages) IS DISTINCT FROM 'array'
       OR NOT EXISTS (SELECT FROM public.erased_messages e WHERE e.tenant_id = NEW.tenant_id) THEN
        RETURN NEW;
    END IF;
    SELECT k.key INTO secret FROM public.erasure_keys k WHERE k.tenant_id = NEW.tenant_id;
    IF secret IS NULL THEN
        RETURN NEW;
    END IF;
    SELECT coalesce(jsonb_agg(x.m ORDER BY x.i) FILTER (WHERE NOT x.erased), '[]'::jsonb),
           count(*) FILTER (WHERE x.erased)
    INTO kept, dropped
    FROM (
        SELECT a.m, a.i,
               (jsonb_typeof(a.m) = 'object' AND a.m ->> 'ts' IS NOT NULL AND EXISTS (
                   SELECT FROM public.erased_messages e
                   WHERE e.tenant_id = NEW.tenant_id
                     AND e.message_hash = encode(sha256(
                         convert_to(secret, 'UTF8') || '\x00'::bytea || convert_to(NEW.tenant_id, 'UTF8')
                         || '\x00'::bytea || convert_to(coalesce(a.m ->> 'role', ''), 'UTF8')
                         || '\x00'::bytea || convert_to(a.m ->> 'ts', 'UTF8')
                         || '\x00'::bytea || convert_to(coalesce(a.m ->> 'content', ''), 'UTF8')), 'hex'))) AS erased
        FROM jsonb_array_elements(NEW.messages) WITH ORDINALITY AS a(m, i)
    ) x;
    IF dropped = 0 THEN
        RETURN NEW;
    END IF;
    IF NOT EXISTS (SELECT FROM jsonb_array_elements(kept) AS k(m) WHERE btrim(coalesce(k.m ->> 'content', '')) <> '')
    THEN
        RAISE EXCEPTION 'session % repeats only erased messages (episodes forget): an erased session is not stored again',
            NEW.session_id
            USING ERRCODE = 'integrity_constraint_violation', CONSTRAINT = 'erased_sessions',
                  HINT = 'Send a new session (another session id) to be remembered again.';
    END IF;
    NEW.messages := kept;
    RETURN NEW;
END
$$;
REVOKE ALL ON FUNCTION transcripts_drop_erased_turns() FROM PUBLIC;
CREATE TRIGGER transcripts_drop_erased_turns BEFORE INSERT OR UPDATE OF messages ON transcripts
    FOR EACH ROW EXECUTE FUNCTION transcripts_drop_erased_turns();
