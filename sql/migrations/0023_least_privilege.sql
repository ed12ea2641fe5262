-- 0023: least privilege (issue 29; README "Database roles").
--
-- Until now every process connected as the owner and tenant work did SET LOCAL ROLE episodes_app:
-- RESET ROLE gave the owner back, episodes_settings (readable by episodes_app) held the memory-link
-- secret and the erasure salt, two owner-rights functions were executable by PUBLIC for any tenant,
-- and job_runs (error texts can name users of every tenant) had no row-level security.
--
-- 1. episodes_service: the role the tenant-facing processes (`episodes api`, `episodes mcp`) log in
--    as. Not a superuser, owns nothing, NOINHERIT: it holds no privilege of episodes_app until it
--    does SET ROLE episodes_app (Database.tenant), so after RESET ROLE it can read no table at all.
--    Of its own it may read schema_migrations (readiness) and run the functions of 3. Made NOLOGIN
--    here; `episodes init` gives it LOGIN on the embedded server (trust on a private Unix socket),
--    an operator elsewhere gives it a password (README).
-- 2. The link secret and the erasure salt move to episodes_secrets, the owner's alone (no grant, and
--    row-level security with no policy should one be granted by mistake). A plain table: on a Citus
--    cluster it stays on the coordinator, where every process connects (api_keys does the same).
--    episodes_settings (a reference table there) keeps the embedder and the dimension only.
-- 3. What the service needs of owner-only data, through owner-rights functions granted to it alone:
--    verifying a key (and marking it used), whether a key is live, the link secret, the queue depth.
-- 4. Every SECURITY DEFINER function: EXECUTE revoked from PUBLIC, granted to the one role that
--    needs it, search_path pinned, and the tenant it is given checked against the transaction's
--    tenant setting (episodes_check_tenant); with no tenant setting, only a session logged in as
--    (a member of) the owner passes, as operator work across tenants does (reembed, prune).
--    The analyst functions of 0017 are left as they are: granted to episodes_analyst only, whose
--    scope is the tenant setting it chooses itself, so a check there would hold nobody back.
-- Not here: job_runs (no tenant column) keeps episodes_app's privileges, as forget scrubs job-run
-- texts naming its user inside the tenant's transaction. An owner-rights function cannot do it there on
-- a Citus cluster: the coordinator replays the transaction's SET LOCAL ROLE on the connections to the
-- reference table's placements, so the UPDATE runs as episodes_app on the workers (measured, Citus 13).

-- 1 ---------------------------------------------------------------------------------------------
DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'episodes_service') THEN
        CREATE ROLE episodes_service NOLOGIN NOINHERIT NOBYPASSRLS;
    END IF;
END
$$;
COMMENT ON ROLE episodes_service IS
    'Login role of episodes api / episodes mcp: may SET ROLE episodes_app and run the functions granted to it; owns nothing.';
GRANT episodes_app TO episodes_service;
GRANT USAGE ON SCHEMA public TO episodes_service;
GRANT SELECT ON schema_migrations TO episodes_service;

-- 2 ---------------------------------------------------------------------------------------------
CREATE TABLE episodes_secrets (
    key   text PRIMARY KEY,
    value text NOT NULL
);
COMMENT ON TABLE episodes_secrets IS
    'Owner only: the memory-link secret and the erasure salt, reached through episodes_link_secret / episodes_user_hash.';
REVOKE ALL ON episodes_secrets FROM PUBLIC;
ALTER TABLE episodes_secrets ENABLE ROW LEVEL SECURITY;
INSERT INTO episodes_secrets (key, value)
SELECT key, value FROM episodes_settings WHERE key IN ('erasure_salt', 'memory_link_secret');
DELETE FROM episodes_settings WHERE key IN ('erasure_salt', 'memory_link_secret');

-- 4 (the check the others call) -----------------------------------------------------------------
-- Raises unless `tenant` is the transaction's tenant (episodes.tenant_id); with no tenant setting,
-- unless the session's login role is (a member of) the owner of the schema's tables. session_user,
-- not current_user: inside an owner-rights function current_user is always the owner.
CREATE FUNCTION episodes_check_tenant(tenant text) RETURNS void
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    setting text := coalesce(current_setting('episodes.tenant_id', true), '');
BEGIN
    IF setting = '' THEN
        IF pg_has_role(session_user, (SELECT relowner FROM pg_class WHERE oid = 'public.transcripts'::regclass),
                       'USAGE') THEN
            RETURN;
        END IF;
        RAISE EXCEPTION 'no tenant set for this transaction (episodes.tenant_id)'
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF tenant IS DISTINCT FROM setting THEN
        RAISE EXCEPTION 'tenant % is not this transaction''s tenant', tenant
            USING ERRCODE = 'insufficient_privilege';
    END IF;
END
$$;

-- 3 ---------------------------------------------------------------------------------------------
-- A live key by its hash, marked used; no row for an unknown or revoked key. The hash is the
-- credential, so no tenant is checked: the answer names the key's tenant. The key is looked up first
-- and only a live one found is marked used: an unknown or revoked key (anyone's guess) costs no write,
-- no transaction id and no WAL.
CREATE FUNCTION episodes_verify_key(hash bytea)
RETURNS TABLE (id bigint, prefix text, tenant_id text, name text, scopes text[], rate_limit real)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    live public.api_keys%ROWTYPE;
BEGIN
    SELECT * INTO live FROM public.api_keys k WHERE k.key_hash = hash AND k.revoked_at IS NULL;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    UPDATE public.api_keys k SET last_used_at = now() WHERE k.id = live.id AND k.revoked_at IS NULL;
    IF NOT FOUND THEN  -- revoked in between
        RETURN;
    END IF;
    RETURN QUERY SELECT live.id, live.prefix, live.tenant_id, live.name, live.scopes, live.rate_limit;
END
$$;

-- Whether a key exists and is not revoked (a memory link dies with the key that issued it).
CREATE FUNCTION episodes_key_is_live(key_id bigint) RETURNS boolean
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
    SELECT EXISTS (SELECT FROM public.api_keys k WHERE k.id = key_id AND k.revoked_at IS NULL)
$$;

-- The memory-link signing secret (EPISODES_LINK_SECRET unset): the first caller's candidate is kept,
-- every later one (any worker, any restart) gets that one. Each statement sees a concurrent first write.
CREATE FUNCTION episodes_link_secret(candidate text) RETURNS text
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    found text;
BEGIN
    INSERT INTO public.episodes_secrets (key, value) VALUES ('memory_link_secret', candidate)
    ON CONFLICT (key) DO NOTHING;
    SELECT s.value INTO found FROM public.episodes_secrets s WHERE s.key = 'memory_link_secret';
    RETURN found;
END
$$;

-- Transcripts waiting to be summarised, across tenants: a count, for /metrics.
CREATE FUNCTION episodes_queue_depth() RETURNS bigint
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
    SELECT count(*) FROM public.transcripts WHERE ended_at IS NOT NULL AND status IN ('pending', 'running')
$$;

REVOKE ALL ON FUNCTION episodes_verify_key(bytea), episodes_key_is_live(bigint), episodes_link_secret(text),
    episodes_queue_depth() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION episodes_verify_key(bytea), episodes_key_is_live(bigint), episodes_link_secret(text),
    episodes_queue_depth() TO episodes_service;

-- 4 ---------------------------------------------------------------------------------------------
-- How an erasure names a user: sha256(salt || NUL || tenant || NUL || user), hex (0003), for the
-- transaction's tenant only; the salt itself never leaves the function.
CREATE FUNCTION episodes_user_hash(tenant text, usr text) RETURNS text
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    salt text;
BEGIN
    PERFORM public.episodes_check_tenant(tenant);
    SELECT s.value INTO salt FROM public.episodes_secrets s WHERE s.key = 'erasure_salt';
    IF salt IS NULL THEN
        RETURN NULL;
    END IF;
    RETURN encode(sha256(convert_to(salt, 'UTF8') || '\x00'::bytea || convert_to(tenant, 'UTF8') || '\x00'::bytea
                         || convert_to(usr, 'UTF8')), 'hex');
END
$$;

REVOKE ALL ON FUNCTION episodes_user_hash(text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION episodes_user_hash(text, text) TO episodes_app;

-- As 0019, checking the tenant first. Called by the triggers of episodes (as the writing role).
CREATE OR REPLACE FUNCTION episodes_bump_version(tenant text, usr text, deleting boolean) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
DECLARE
    -- A variable, so the statements below hold no volatile call (Citus plans them on the worker).
    me xid := pg_current_xact_id()::xid;
    v bigint;
BEGIN
    PERFORM episodes_check_tenant(tenant);
    LOOP
        UPDATE recall_versions AS r
        SET version = r.version + CASE WHEN r.xmin = me THEN 0 ELSE 1 END,
            deleted_version = CASE WHEN deleting THEN r.version + CASE WHEN r.xmin = me THEN 0 ELSE 1 END
                                   ELSE r.deleted_version END
        WHERE r.tenant_id = tenant AND r.user_id = usr
          AND (r.xmin <> me OR (deleting AND r.deleted_version <> r.version))
        RETURNING r.version INTO v;
        IF v IS NOT NULL THEN
            RETURN v;
        END IF;
        SELECT r.version INTO v FROM recall_versions r WHERE r.tenant_id = tenant AND r.user_id = usr;
        IF v IS NOT NULL THEN
            RETURN v;
        END IF;
        INSERT INTO recall_versions (tenant_id, user_id, version, deleted_version, epoch)
        VALUES (tenant, usr, 1, CASE WHEN deleting THEN 1 ELSE 0 END, gen_random_uuid())
        ON CONFLICT (tenant_id, user_id) DO NOTHING
        RETURNING version INTO v;
        IF v IS NOT NULL THEN
            RETURN v;
        END IF;
    END LOOP;
END
$$;
REVOKE ALL ON FUNCTION episodes_bump_version(text, text, boolean) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION episodes_bump_version(text, text, boolean) TO episodes_app;

-- As 0021, checking the tenant first.
CREATE OR REPLACE FUNCTION episodes_drop_pack(tenant text, usr text) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
BEGIN
    PERFORM episodes_check_tenant(tenant);
    DELETE FROM recall_packs WHERE tenant_id = tenant AND user_id = usr;
END
$$;

CREATE OR REPLACE FUNCTION episodes_pack_at_version() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
BEGIN
    PERFORM episodes_check_tenant(NEW.tenant_id);
    PERFORM FROM recall_versions r
    WHERE r.tenant_id = NEW.tenant_id AND r.user_id = NEW.user_id
      AND r.version = NEW.version AND r.epoch IS NOT DISTINCT FROM NEW.epoch
    FOR SHARE;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    RETURN NEW;
END
$$;
REVOKE ALL ON FUNCTION episodes_pack_at_version() FROM PUBLIC;
