-- Applied first, on every `episodes init` (jobs.migrate.apply_views): drops what the files after it
-- create, so that they run on a database in any state and it ends with exactly their views.
--
-- Dropped: every view in the schema analyst, every function returning one of its composite row types
-- (the owner-rights readers analyst._<view>_rows) and those row types. Not dropped: the functions the
-- views call (analyst.visible_scope, analyst.stale_grace, analyst.stale_age, episodes_item_stale),
-- which the numbered migrations define. Without CASCADE: a view of someone else's over an analyst
-- view stops the drop, and with it the whole re-apply (the previous views stay).
DO $$
DECLARE
    views text := (SELECT string_agg(c.oid::regclass::text, ', ')
                   FROM pg_class c
                   WHERE c.relnamespace = 'analyst'::regnamespace AND c.relkind = 'v');
    readers text := (SELECT string_agg(p.oid::regprocedure::text, ', ')
                     FROM pg_proc p
                     JOIN pg_type t ON t.oid = p.prorettype
                     JOIN pg_class c ON c.oid = t.typrelid
                     WHERE c.relnamespace = 'analyst'::regnamespace AND c.relkind = 'c');
    row_types text := (SELECT string_agg(c.oid::regclass::text, ', ')
                       FROM pg_class c
                       WHERE c.relnamespace = 'analyst'::regnamespace AND c.relkind = 'c');
BEGIN
    IF views IS NOT NULL THEN
        EXECUTE 'DROP VIEW ' || views;  -- one statement: views that read each other go together
    END IF;
    IF readers IS NOT NULL THEN
        EXECUTE 'DROP FUNCTION ' || readers;
    END IF;
    IF row_types IS NOT NULL THEN
        EXECUTE 'DROP TYPE ' || row_types;
    END IF;
END
$$;
