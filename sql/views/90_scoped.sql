-- The public, tenant-scoped analyst views, one per internal view analyst._<name> of the files before
-- this one (docs/analyst.md, "Who sees what"). For each name below:
--
--   analyst._<name>_row        a row type with the internal view's columns (made from them, not the
--                              view's own row type: a function returning a view's row type made Citus
--                              refuse to distribute the schema, "circular dependencies")
--   analyst._<name>_rows(all_tenants, tenant)
--                              reads the internal view with the owner's rights, every tenant or one by
--                              name (on a cluster a scoped read then goes to the one node holding it);
--                              Citus sends shard queries as the calling role, which has no grant on the
--                              tables (citusdata/citus#1683)
--   analyst.<name>             the view analysts query: the caller's scope (analyst.visible_scope(),
--                              evaluated as the caller) passed to the reader; a security barrier, so a
--                              caller's own WHERE functions see only rows already in scope
--
-- The comments written on the internal view and its columns are copied onto the public view, and
-- episodes_analyst gets SELECT on it (episodes_operator is a member).
DO $do$
DECLARE
    name text;
    col record;
BEGIN
    FOREACH name IN ARRAY ARRAY['decisions', 'preferences', 'open_questions', 'commitments', 'episode_timeline',
                                'entity_mentions', 'failures', 'model_cost_daily', 'decisions_by_branch']
    LOOP
        EXECUTE format('REVOKE ALL ON analyst.%I FROM PUBLIC', '_' || name);
        EXECUTE (
            SELECT format('CREATE TYPE analyst.%I AS (%s)', '_' || name || '_row',
                          string_agg(format('%I %s', a.attname, format_type(a.atttypid, a.atttypmod)), ', '
                                     ORDER BY a.attnum))
            FROM pg_attribute a
            WHERE a.attrelid = format('analyst.%I', '_' || name)::regclass AND a.attnum > 0 AND NOT a.attisdropped);
        EXECUTE format($f$
            CREATE FUNCTION analyst.%1$I(all_tenants boolean, tenant text) RETURNS SETOF analyst.%2$I
            LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp
            AS $body$
            BEGIN
                IF all_tenants THEN
                    RETURN QUERY SELECT * FROM analyst.%3$I;
                ELSE
                    RETURN QUERY SELECT * FROM analyst.%3$I WHERE tenant_id = tenant;
                END IF;
            END
            $body$ $f$, '_' || name || '_rows', '_' || name || '_row', '_' || name);
        EXECUTE format('REVOKE ALL ON FUNCTION analyst.%I(boolean, text) FROM PUBLIC', '_' || name || '_rows');
        EXECUTE format('GRANT EXECUTE ON FUNCTION analyst.%I(boolean, text) TO episodes_analyst', '_' || name || '_rows');
        EXECUTE format('CREATE VIEW analyst.%I WITH (security_barrier = true) AS '
                       'SELECT r.* FROM analyst.visible_scope() s, analyst.%I(s.all_tenants, s.tenant) r',
                       name, '_' || name || '_rows');
        EXECUTE format('COMMENT ON VIEW analyst.%I IS %L', name,
                       obj_description(format('analyst.%I', '_' || name)::regclass, 'pg_class'));
        FOR col IN
            SELECT a.attname, col_description(a.attrelid, a.attnum) AS comment
            FROM pg_attribute a
            WHERE a.attrelid = format('analyst.%I', '_' || name)::regclass AND a.attnum > 0 AND NOT a.attisdropped
        LOOP
            EXECUTE format('COMMENT ON COLUMN analyst.%I.%I IS %L', name, col.attname, col.comment);
        END LOOP;
        EXECUTE format('GRANT SELECT ON analyst.%I TO episodes_analyst', name);
    END LOOP;
END
$do$;
