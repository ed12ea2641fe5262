-- 0027: owner-rights functions trust nothing from the session; the link secret is the database's own
-- (issue 35; docs/security.md).
--
-- 1. episodes_bump_version, episodes_drop_pack and episodes_pack_at_version (0021, 0023) ran as the owner
--    with `SET search_path = public`. A search path that does not name pg_temp searches it FIRST, so a
--    caller's temporary table (or view) named recall_versions or recall_packs was what they wrote to, and
--    a trigger on it (or a function in the view) ran as the owner: on the embedded server a superuser. As
--    episodes_service: SET LOCAL ROLE episodes_app, a temporary recall_versions with a trigger, one call of
--    episodes_bump_version, and the login role was a superuser. Redefined below with their bodies of 0023,
--    every table and function named by schema and the search path pinned as the others have it:
--    pg_catalog first (no operator or function of another schema shadows a built-in), pg_temp last (and
--    functions and operators are never looked up there). Then every other owner-rights function in
--    public and analyst whose search path does not end with pg_temp gets that path, so none is missed;
--    tests/test_definer_functions.py finds them through pg_proc, so a later one is held to it too.
-- 2. The tenant-facing roles may create no temporary object at all: TEMPORARY on this database is revoked
--    from PUBLIC (which every role is in) and from each of our roles; the owner keeps it. Nothing of ours
--    makes temporary tables as those roles. A database-level privilege lives outside the schema: a copy
--    made with CREATE DATABASE ... TEMPLATE or restored from a dump without --create has PostgreSQL's
--    defaults again, which is why 1 must hold on its own. CREATE on schema public is revoked from PUBLIC
--    too (PostgreSQL 15's default; a database upgraded from an older server may still grant it).
-- 3. The memory-link signing secret was the first caller's candidate (episodes_link_secret(text), 0023):
--    whoever asked first, the login role or anyone who had taken it over, chose the key that signs every
--    memory link. episodes_link_secret() now takes nothing and draws the secret inside the database:
--    SHA-256 of three gen_random_uuid() values (366 random bits from the server's strong random source;
--    core since PostgreSQL 13, no pgcrypto), 64 hex characters as before. A secret stored before this
--    migration may have been a caller's choice: it is dropped, so the next ask draws a new one (links
--    handed out before, 15 minutes at most, stop working). EPISODES_LINK_SECRET, when set, still wins.

-- 1 ---------------------------------------------------------------------------------------------
-- As 0023.
CREATE OR REPLACE FUNCTION public.episodes_bump_version(tenant text, usr text, deleting boolean) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    -- A variable, so the statements below hold no volatile call (Citus plans them on the worker).
    me xid := pg_current_xact_id()::xid;
    v bigint;
BEGIN
    PERFORM public.episodes_check_tenant(tenant);
    LOOP
        -- Waits for a concurrent writer of the same user, then sees its committed row (READ COMMITTED).
        -- A deletion after this transaction's own bump marks that version, without another bump.
        UPDATE public.recall_versions AS r
        SET version = r.version + CASE WHEN r.xmin = me THEN 0 ELSE 1 END,
            deleted_version = CASE WHEN deleting THEN r.version + CASE WHEN r.xmin = me THEN 0 ELSE 1 END
                                   ELSE r.deleted_version END
        WHERE r.tenant_id = tenant AND r.user_id = usr
          AND (r.xmin <> me OR (deleting AND r.deleted_version <> r.version))
        RETURNING r.version INTO v;
        IF v IS NOT NULL THEN
            RETURN v;
        END IF;
        -- No row changed: this transaction already bumped (reuse its value), or the user has no counter.
        SELECT r.version INTO v FROM public.recall_versions r WHERE r.tenant_id = tenant AND r.user_id = usr;
        IF v IS NOT NULL THEN
            RETURN v;
        END IF;
        INSERT INTO public.recall_versions (tenant_id, user_id, version, deleted_version, epoch)
        VALUES (tenant, usr, 1, CASE WHEN deleting THEN 1 ELSE 0 END, gen_random_uuid())
        ON CONFLICT (tenant_id, user_id) DO NOTHING
        RETURNING version INTO v;
        IF v IS NOT NULL THEN
            RETURN v;
        END IF;
        -- A concurrent transaction created the counter first (and has committed): bump that one.
    END LOOP;
END
$$;

-- As 0023.
CREATE OR REPLACE FUNCTION public.episodes_drop_pack(tenant text, usr text) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
BEGIN
    PERFORM public.episodes_check_tenant(tenant);
    DELETE FROM public.recall_packs p WHERE p.tenant_id = tenant AND p.user_id = usr;
END
$$;

-- As 0023.
CREATE OR REPLACE FUNCTION public.episodes_pack_at_version() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
BEGIN
    PERFORM public.episodes_check_tenant(NEW.tenant_id);
    PERFORM FROM public.recall_versions r
    WHERE r.tenant_id = NEW.tenant_id AND r.user_id = NEW.user_id
      AND r.version = NEW.version AND r.epoch IS NOT DISTINCT FROM NEW.epoch
    FOR SHARE;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    RETURN NEW;
END
$$;

-- Any other owner-rights function of ours whose own search path is missing or does not end with pg_temp.
DO $$
DECLARE
    fn regprocedure;
BEGIN
    FOR fn IN
        SELECT p.oid::regprocedure
        FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
        WHERE p.prosecdef AND n.nspname IN ('public', 'analyst')
          AND NOT EXISTS (SELECT FROM pg_depend d WHERE d.classid = 'pg_proc'::regclass AND d.objid = p.oid
                          AND d.deptype = 'e')
          AND NOT EXISTS (SELECT FROM unnest(p.proconfig) c WHERE c ~ '^search_path=pg_catalog, .*pg_temp$')
    LOOP
        EXECUTE format('ALTER FUNCTION %s SET search_path = pg_catalog, public, pg_temp', fn);
    END LOOP;
END
$$;

-- 2 ---------------------------------------------------------------------------------------------
-- Only the database's owner (or a member with its privileges, or a superuser) may revoke; each of them
-- keeps TEMPORARY through the owner's own grant. Another migrating role is told what to run.
DO $$
DECLARE
    db text := current_database();
    dba oid := (SELECT d.datdba FROM pg_database d WHERE d.datname = current_database());
    superuser boolean := (SELECT r.rolsuper FROM pg_roles r WHERE r.rolname = current_user);
BEGIN
    IF superuser OR pg_has_role(current_user, dba, 'USAGE') THEN
        EXECUTE format('REVOKE TEMPORARY ON DATABASE %I FROM PUBLIC, episodes_service, episodes_app, '
                       'episodes_analyst, episodes_operator', db);
    ELSE
        RAISE WARNING 'episodes: % is neither the owner of database % nor a superuser, so the tenant-facing '
                      'roles keep TEMPORARY on it', current_user, db
            USING HINT = format('As the owner of the database, run: REVOKE TEMPORARY ON DATABASE %I FROM PUBLIC, '
                                'episodes_service, episodes_app, episodes_analyst, episodes_operator', db);
    END IF;
    IF superuser OR pg_has_role(current_user, (SELECT n.nspowner FROM pg_namespace n WHERE n.nspname = 'public'),
                                'USAGE') THEN
        REVOKE CREATE ON SCHEMA public FROM PUBLIC;
    END IF;
END
$$;

-- 3 ---------------------------------------------------------------------------------------------
DROP FUNCTION public.episodes_link_secret(text);

-- The memory-link signing secret (EPISODES_LINK_SECRET unset): drawn here on the first ask and kept; every
-- later ask (any worker, any restart) gets that one. Each statement sees a concurrent first write.
CREATE FUNCTION public.episodes_link_secret() RETURNS text
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    found text;
BEGIN
    SELECT s.value INTO found FROM public.episodes_secrets s WHERE s.key = 'memory_link_secret';
    IF found IS NOT NULL THEN
        RETURN found;
    END IF;
    INSERT INTO public.episodes_secrets (key, value)
    VALUES ('memory_link_secret',
            encode(sha256(uuid_send(gen_random_uuid()) || uuid_send(gen_random_uuid())
                          || uuid_send(gen_random_uuid())), 'hex'))
    ON CONFLICT (key) DO NOTHING;
    SELECT s.value INTO found FROM public.episodes_secrets s WHERE s.key = 'memory_link_secret';
    RETURN found;
END
$$;
COMMENT ON FUNCTION public.episodes_link_secret() IS
    'The memory-link signing secret, drawn by the database on the first ask (EPISODES_LINK_SECRET unset).';
REVOKE ALL ON FUNCTION public.episodes_link_secret() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION public.episodes_link_secret() TO episodes_service;

DELETE FROM public.episodes_secrets WHERE key = 'memory_link_secret';
