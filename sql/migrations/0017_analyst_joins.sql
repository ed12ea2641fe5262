-- 0017: the analyst views on a Citus cluster too (issue 18, README "Scaling out").
--
-- Two things kept the views of 0004, 0008, 0009 and 0012 from running on a cluster:
--
-- 1. They joined episodes, events, entities, transcripts and model calls on their ids alone. On one
--    PostgreSQL that is the same thing (ids are unique across tenants), but Citus shards these tables
--    by tenant_id and runs a cross-tenant query on every shard at once; it can do so only when every
--    join between two tenant tables, and every grouped subquery joined in, is on tenant_id as well
--    ("complex joins are only supported when all distributed tables are co-located and joined on
--    their distribution columns"). Below, every join has tenant_id equality and the grouped
--    subqueries group by tenant_id too; the rows are the same.
-- 2. The views read the base tables with their owner's rights (0004: the analyst roles have no grant
--    on the tables). Citus sends the shard queries to the workers as the role running the statement,
--    so there an analyst was refused every shard ("permission denied for table episodes_102016"; a
--    known Citus limitation, citusdata/citus#1683 and #6161). So the query of each view now lives in
--    an internal view analyst._<name>, read through a SECURITY DEFINER function
--    analyst._<name>_rows(all_tenants, tenant) that runs as the owner, on one node as on a cluster.
--    The public view passes the caller's scope (analyst.visible_scope(), evaluated as the caller) and
--    stays a security barrier: a caller's own WHERE functions see only rows already in scope, and on
--    a cluster they run on the coordinator, not on the workers. A scoped analyst's read names its
--    tenant, so on a cluster it goes to the one node holding the tenant.
--
-- analyst.event_types (a lookup; a reference table on a cluster) is read through such a function too.
-- The public views keep their columns, rows, grants and comments (CREATE OR REPLACE).
--
-- analyst._event_resolution gains a tenant_id column (appended, as CREATE OR REPLACE requires) so it
-- joins on (tenant_id, event_id); a compressed item's resolved copy is in the same tenant (0016's
-- source_event_id key).
--
-- On a cluster the analyst's role must be switched with SET ROLE, not SET LOCAL ROLE: Citus replays a
-- transaction's SET LOCAL commands on its worker connections (citus.propagate_set_commands), and a
-- replayed SET LOCAL ROLE would turn the owner's reads back into the analyst's
-- (jobs.report.analyst_connection).

CREATE OR REPLACE VIEW analyst._event_resolution AS
SELECT ev.id AS event_id,
       CASE WHEN ev.status IN ('resolved', 'done') THEN ev.status ELSE coalesce(c.status, ev.status) END AS status,
       CASE WHEN ev.status IN ('resolved', 'done') THEN ev.resolved_by ELSE c.resolved_by END AS resolved_by,
       CASE WHEN ev.status IN ('resolved', 'done') THEN ev.resolved_at ELSE c.resolved_at END AS resolved_at,
       ev.tenant_id
FROM episode_events ev
LEFT JOIN (
    SELECT DISTINCT ON (tenant_id, source_event_id) tenant_id, source_event_id, status, resolved_by, resolved_at
    FROM episode_events
    WHERE source_event_id IS NOT NULL AND status IN ('resolved', 'done')
    ORDER BY tenant_id, source_event_id, resolved_at NULLS LAST, id
) c ON c.tenant_id = ev.tenant_id AND c.source_event_id = ev.id
WHERE ev.type IN ('open_question', 'commitment');

CREATE VIEW analyst._decisions AS
SELECT ev.tenant_id,
       ev.user_id,
       ev.occurred_at AS decided_at,
       ev.what,
       ev.who,
       e.topic_tags,
       ev.episode_id,
       e.session_id,
       e.purpose,
       ev.evidence_quote,
       ev.evidence,
       ev.id AS event_id,
       ev.superseded_by,
       nx.type AS superseded_by_type,
       nx.occurred_at AS superseded_at,
       ne.session_id AS superseded_by_session_id,
       ev.superseded_by IS NULL AS current
FROM episode_events ev
JOIN episodes e ON e.tenant_id = ev.tenant_id AND e.id = ev.episode_id
LEFT JOIN episode_events nx ON nx.tenant_id = ev.tenant_id AND nx.id = ev.superseded_by
LEFT JOIN episodes ne ON ne.tenant_id = nx.tenant_id AND ne.id = nx.episode_id
WHERE ev.type = 'decision'
  AND e.kind = 'session' AND e.status = 'current';

CREATE VIEW analyst._preferences AS
SELECT ev.tenant_id,
       ev.user_id,
       ev.occurred_at AS stated_at,
       ev.what,
       ev.who,
       e.topic_tags,
       ev.episode_id,
       e.session_id,
       e.purpose,
       ev.evidence_quote,
       ev.evidence,
       ev.id AS event_id,
       ev.superseded_by,
       nx.type AS superseded_by_type,
       nx.occurred_at AS superseded_at,
       ne.session_id AS superseded_by_session_id,
       ev.superseded_by IS NULL AS current
FROM episode_events ev
JOIN episodes e ON e.tenant_id = ev.tenant_id AND e.id = ev.episode_id
LEFT JOIN episode_events nx ON nx.tenant_id = ev.tenant_id AND nx.id = ev.superseded_by
LEFT JOIN episodes ne ON ne.tenant_id = nx.tenant_id AND ne.id = nx.episode_id
WHERE ev.type = 'preference'
  AND e.kind = 'session' AND e.status = 'current';

CREATE VIEW analyst._open_questions AS
SELECT ev.tenant_id,
       ev.user_id,
       ev.what AS question,
       ev.who AS asked_by,
       ev.occurred_at AS raised_at,
       r.status,
       r.resolved_at,
       r.resolved_by,
       rb.session_id AS resolved_by_session_id,
       floor(extract(epoch FROM coalesce(r.resolved_at, now()) - ev.occurred_at) / 86400)::integer AS days_open,
       e.topic_tags,
       ev.episode_id,
       e.session_id,
       e.purpose,
       ev.evidence_quote,
       ev.id AS event_id,
       (r.status = 'open' AND episodes_item_stale(ev.due, ev.occurred_at, now(), analyst.stale_grace(), analyst.stale_age())) AS stale
FROM episode_events ev
JOIN episodes e ON e.tenant_id = ev.tenant_id AND e.id = ev.episode_id
JOIN analyst._event_resolution r ON r.tenant_id = ev.tenant_id AND r.event_id = ev.id
LEFT JOIN episodes rb ON rb.tenant_id = ev.tenant_id AND rb.id = r.resolved_by
WHERE ev.type = 'open_question'
  AND e.kind = 'session' AND e.status = 'current';

CREATE VIEW analyst._commitments AS
SELECT ev.tenant_id,
       ev.user_id,
       ev.what,
       ev.who AS committed_by,
       ev.occurred_at AS committed_at,
       ev.due,
       CASE
           WHEN r.status IN ('done', 'resolved') THEN 'done'
           WHEN ev.due < (now() AT TIME ZONE 'UTC')::date THEN 'overdue'
           ELSE 'open'
       END AS status,
       CASE
           WHEN r.status IN ('done', 'resolved') OR ev.due IS NULL THEN NULL
           ELSE greatest((now() AT TIME ZONE 'UTC')::date - ev.due, 0)
       END AS days_overdue,
       r.resolved_at AS done_at,
       r.resolved_by AS done_by,
       rb.session_id AS done_by_session_id,
       e.topic_tags,
       ev.episode_id,
       e.session_id,
       e.purpose,
       ev.evidence_quote,
       ev.id AS event_id,
       (r.status NOT IN ('done', 'resolved') AND episodes_item_stale(ev.due, ev.occurred_at, now(), analyst.stale_grace(), analyst.stale_age())) AS stale
FROM episode_events ev
JOIN episodes e ON e.tenant_id = ev.tenant_id AND e.id = ev.episode_id
JOIN analyst._event_resolution r ON r.tenant_id = ev.tenant_id AND r.event_id = ev.id
LEFT JOIN episodes rb ON rb.tenant_id = ev.tenant_id AND rb.id = r.resolved_by
WHERE ev.type = 'commitment'
  AND e.kind = 'session' AND e.status = 'current';

CREATE VIEW analyst._episode_timeline AS
SELECT e.tenant_id,
       e.user_id,
       e.id AS episode_id,
       e.kind,
       e.session_id,
       e.purpose,
       e.started_at,
       e.ended_at,
       date_trunc('week', e.ended_at AT TIME ZONE 'UTC')::date AS week,
       e.summary,
       e.topic_tags,
       e.importance,
       coalesce(ev.decisions, 0) AS decisions,
       coalesce(ev.open_questions, 0) AS open_questions,
       coalesce(ev.commitments, 0) AS commitments,
       coalesce(ev.surprises, 0) AS surprises,
       coalesce(en.entities, 0) AS entities,
       e.compressed_into,
       e.period_start,
       e.period_end,
       e.model,
       e.prompt_version,
       e.input_tokens,
       e.output_tokens,
       e.cost_usd,
       e.created_at,
       e.pinned_at IS NOT NULL AS pinned,
       e.pinned_at
FROM episodes e
LEFT JOIN (
    SELECT tenant_id,
           episode_id,
           count(*) FILTER (WHERE type = 'decision') AS decisions,
           count(*) FILTER (WHERE type = 'open_question') AS open_questions,
           count(*) FILTER (WHERE type = 'commitment') AS commitments,
           count(*) FILTER (WHERE type = 'surprise') AS surprises
    FROM episode_events
    GROUP BY tenant_id, episode_id
) ev ON ev.tenant_id = e.tenant_id AND ev.episode_id = e.id
LEFT JOIN (SELECT tenant_id, episode_id, count(*) AS entities FROM episode_entities GROUP BY tenant_id, episode_id) en
    ON en.tenant_id = e.tenant_id AND en.episode_id = e.id
WHERE e.status = 'current';

CREATE VIEW analyst._entity_mentions AS
SELECT en.tenant_id,
       en.user_id,
       en.name AS entity,
       lower(en.name) AS entity_key,
       en.kind,
       en.episode_id,
       e.session_id,
       e.ended_at AS mentioned_at,
       e.topic_tags
FROM episode_entities en
JOIN episodes e ON e.tenant_id = en.tenant_id AND e.id = en.episode_id
WHERE e.kind = 'session' AND e.status = 'current';

CREATE VIEW analyst._failures AS
SELECT t.tenant_id,
       t.user_id,
       t.session_id,
       CASE WHEN t.status = 'dead' THEN 'dead_letter' ELSE 'retrying' END AS source,
       greatest(t.updated_at, mc.last_call_at) AS failed_at,
       t.attempts,
       NULL::text AS outcome,
       t.last_error AS error,
       t.next_attempt_at,
       NULL::text AS template,
       NULL::text AS model
FROM transcripts t
LEFT JOIN (SELECT tenant_id, transcript_id, max(created_at) AS last_call_at
           FROM model_calls GROUP BY tenant_id, transcript_id) mc
    ON mc.tenant_id = t.tenant_id AND mc.transcript_id = t.id
WHERE (t.status = 'dead' OR (t.status = 'pending' AND t.last_error IS NOT NULL))
UNION ALL
SELECT m.tenant_id,
       m.user_id,
       t.session_id,
       'model_call' AS source,
       m.created_at AS failed_at,
       NULL::integer AS attempts,
       m.outcome,
       m.error,
       NULL::timestamptz AS next_attempt_at,
       m.template,
       m.model
FROM model_calls m
LEFT JOIN transcripts t ON t.tenant_id = m.tenant_id AND t.id = m.transcript_id
WHERE m.outcome <> 'ok';

CREATE VIEW analyst._model_cost_daily AS
SELECT tenant_id,
       (created_at AT TIME ZONE 'UTC')::date AS day,
       CASE WHEN batch THEN 'batch' ELSE 'live' END AS mode,
       count(*) AS calls,
       count(*) FILTER (WHERE outcome <> 'ok') AS failed_calls,
       sum(input_tokens)::bigint AS input_tokens,
       sum(output_tokens)::bigint AS output_tokens,
       sum(cache_read_tokens)::bigint AS cache_read_tokens,
       sum(cache_write_tokens)::bigint AS cache_write_tokens,
       sum(cost_usd) AS cost_usd,
       array_agg(DISTINCT model ORDER BY model) AS models
FROM model_calls
GROUP BY tenant_id, (created_at AT TIME ZONE 'UTC')::date, batch;

-- Internal: read only through the functions below.
REVOKE ALL ON analyst._decisions, analyst._preferences, analyst._open_questions, analyst._commitments,
    analyst._episode_timeline, analyst._entity_mentions, analyst._model_cost_daily, analyst._failures FROM PUBLIC;

-- Who is asking, evaluated as the caller (inside a view current_user is still the querying role):
-- every tenant for a role with the privileges of episodes_operator, else the tenant in
-- episodes.tenant_id (none when it is unset). Replaces analyst.visible_tenant, the same rule as a
-- row filter.
CREATE FUNCTION analyst.visible_scope(OUT all_tenants boolean, OUT tenant text)
LANGUAGE sql STABLE PARALLEL SAFE
AS $$ SELECT pg_has_role('episodes_operator', 'USAGE'), current_setting('episodes.tenant_id', true) $$;
COMMENT ON FUNCTION analyst.visible_scope() IS
    'The rows the current role may see in the analyst views: all tenants (a role with the privileges of '
    'episodes_operator) or the tenant in episodes.tenant_id; a role with neither sees none.';
REVOKE ALL ON FUNCTION analyst.visible_scope() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION analyst.visible_scope() TO episodes_analyst;

-- Per view: a row type with the internal view's columns, the owner-rights function that reads it
-- (all tenants, or one tenant by name, so a scoped read goes to the one node holding it), and the
-- public view over the caller's scope. The row type is made from the internal view's columns rather
-- than being the view's own row type: a function returning a view's row type made Citus refuse to
-- distribute the schema ("circular dependencies between distributed objects").
DO $do$
DECLARE
    name text;
BEGIN
    FOREACH name IN ARRAY ARRAY['decisions', 'preferences', 'open_questions', 'commitments', 'episode_timeline',
                                'entity_mentions', 'model_cost_daily', 'failures']
    LOOP
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
        EXECUTE format('CREATE OR REPLACE VIEW analyst.%I WITH (security_barrier = true) AS '
                       'SELECT r.* FROM analyst.visible_scope() s, analyst.%I(s.all_tenants, s.tenant) r',
                       name, '_' || name || '_rows');
    END LOOP;
END
$do$;

-- The lookup of event types is a reference table on a cluster, read the same way (every role may
-- see all of it, so no scope; not a security barrier, as before).
CREATE TYPE analyst._event_types_row AS (name text, description text);
CREATE FUNCTION analyst._event_types_rows() RETURNS SETOF analyst._event_types_row
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp
AS $$ SELECT name, description FROM public.event_types $$;
REVOKE ALL ON FUNCTION analyst._event_types_rows() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION analyst._event_types_rows() TO episodes_analyst;
CREATE OR REPLACE VIEW analyst.event_types AS
SELECT name, description FROM analyst._event_types_rows();

DROP FUNCTION analyst.visible_tenant(text);
