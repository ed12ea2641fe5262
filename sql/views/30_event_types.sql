-- analyst.event_types: the lookup of event types (no tenant data, so no scope; not a security barrier).
-- On a Citus cluster public.event_types is a reference table, read through an owner-rights function
-- as the scoped views read theirs (analyst has no grant on public's tables).

CREATE TYPE analyst._event_types_row AS (name text, description text);

CREATE FUNCTION analyst._event_types_rows() RETURNS SETOF analyst._event_types_row
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp
AS $$ SELECT name, description FROM public.event_types $$;
REVOKE ALL ON FUNCTION analyst._event_types_rows() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION analyst._event_types_rows() TO episodes_analyst;

CREATE VIEW analyst.event_types AS
SELECT name, description FROM analyst._event_types_rows();

COMMENT ON VIEW analyst.event_types IS 'The typed key events an episode can record.';
COMMENT ON COLUMN analyst.event_types.name IS 'Type name (decision, open_question, commitment, surprise, ...).';
COMMENT ON COLUMN analyst.event_types.description IS 'What the type means.';
GRANT SELECT ON analyst.event_types TO episodes_analyst;
