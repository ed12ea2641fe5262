-- Queries of the memory service (jobs/service): API keys (managed as the owner, verified through the
-- functions of migration 0023; api_keys is a plain table on a Citus coordinator) and the tenant-scoped
-- reads (as episodes_app under row-level security, so another tenant's rows are never found). Each
-- tenant-scoped read also names the tenant on every table and joins on tenant_id: on a Citus cluster it
-- then goes whole to the node holding the tenant (router query).

-- name: api_key_insert
INSERT INTO api_keys (prefix, key_hash, tenant_id, name, scopes, rate_limit)
VALUES (%(prefix)s, %(key_hash)s, %(tenant_id)s, %(name)s, %(scopes)s, %(rate_limit)s)
RETURNING id, prefix, tenant_id, name, scopes, rate_limit, created_at, last_used_at, revoked_at

-- name: api_key_list
SELECT id, prefix, tenant_id, name, scopes, rate_limit, created_at, last_used_at, revoked_at
FROM api_keys ORDER BY id

-- name: api_key_revoke
-- By id or prefix; revoking twice keeps the first time.
UPDATE api_keys SET revoked_at = coalesce(revoked_at, now())
WHERE id::text = %(ref)s OR prefix = %(ref)s
RETURNING id, prefix, tenant_id, name, scopes, rate_limit, created_at, last_used_at, revoked_at

-- name: api_key_verify
-- A live key by its hash, marking it used; no row for an unknown or revoked key. Through the owner-rights
-- function (0023): the service's role has no privilege on api_keys.
SELECT id, prefix, tenant_id, name, scopes, rate_limit FROM episodes_verify_key(%(key_hash)s)

-- name: api_key_is_live
-- Whether a key still exists and is not revoked (a memory link dies with the key that issued it).
SELECT episodes_key_is_live(%(key_id)s) AS live

-- name: api_key_tenant_known
-- Whether the tenant holds anything yet (`keys create` warns when not: a likely misspelling).
SELECT EXISTS (SELECT 1 FROM transcripts WHERE tenant_id = %(tenant_id)s)
    OR EXISTS (SELECT 1 FROM episodes WHERE tenant_id = %(tenant_id)s) AS known

-- name: service_role_strength
-- Whether the role this process logged in as could leave episodes_app for more (jobs.db.service_role_warning).
SELECT current_user AS role,
       (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) AS superuser,
       pg_has_role(current_user, (SELECT relowner FROM pg_class WHERE oid = 'transcripts'::regclass), 'USAGE') AS owner

-- name: service_list_episodes
-- A user's episodes, newest first, keyset-paginated on (ended_at, id); q: full text over what
-- search_tsv indexes (summary, tags, events, entities; web-search syntax), null for all.
SELECT id, kind, session_id, purpose, summary, topic_tags, importance, started_at, ended_at,
       period_start, period_end, status, model, compressed_into, created_at
FROM episodes
WHERE tenant_id = %(tenant_id)s AND user_id = %(user_id)s
  AND (%(kind)s::text IS NULL OR kind = %(kind)s)
  AND (%(since)s::timestamptz IS NULL OR ended_at >= %(since)s)
  AND (%(until)s::timestamptz IS NULL OR ended_at < %(until)s)
  AND (%(include_superseded)s OR status = 'current')
  AND (%(q)s::text IS NULL OR search_tsv @@ websearch_to_tsquery('english', %(q)s))
  AND (%(after_ended)s::timestamptz IS NULL OR (ended_at, id) < (%(after_ended)s, %(after_id)s::bigint))
ORDER BY ended_at DESC, id DESC
LIMIT %(limit)s

-- name: service_get_episode
SELECT e.id, e.user_id, e.kind, e.session_id, e.purpose, e.summary, e.topic_tags, e.importance,
       e.started_at, e.ended_at, e.period_start, e.period_end, e.status, e.model, e.prompt_version,
       e.superseded_by, e.compressed_into, e.created_at,
       coalesce((SELECT jsonb_agg(jsonb_build_object(
                    'id', ev.id, 'type', ev.type, 'what', ev.what, 'who', ev.who, 'due', ev.due,
                    'occurred_at', ev.occurred_at, 'evidence', to_jsonb(ev.evidence),
                    'evidence_quote', ev.evidence_quote, 'status', ev.status,
                    'resolved_by', ev.resolved_by, 'superseded_by', ev.superseded_by) ORDER BY ev.ordinal)
                 FROM episode_events ev WHERE ev.tenant_id = e.tenant_id AND ev.episode_id = e.id), '[]'::jsonb) AS events,
       coalesce((SELECT jsonb_agg(jsonb_build_object('name', en.name, 'kind', en.kind) ORDER BY en.name)
                 FROM episode_entities en WHERE en.tenant_id = e.tenant_id AND en.episode_id = e.id), '[]'::jsonb) AS entities,
       coalesce((SELECT array_agg(l.source_episode_id ORDER BY l.source_episode_id)
                 FROM episode_lineage l WHERE l.tenant_id = e.tenant_id AND l.super_episode_id = e.id), '{}') AS replaces
FROM episodes e
WHERE e.tenant_id = %(tenant_id)s AND e.id = %(id)s

-- name: service_search_events
-- Typed events by full text over the event's own words (what, who, evidence quote), newest first,
-- with a status derived as of now: superseded (a later decision replaced it, or its episode was),
-- resolved (resolved or done), stale (open and stale, migration 0009), open otherwise.
SELECT * FROM (
    SELECT ev.id, ev.episode_id, ev.user_id, ev.type, ev.what, ev.who, ev.due, ev.occurred_at,
           ev.evidence, ev.evidence_quote, e.session_id, e.purpose,
           CASE WHEN ev.superseded_by IS NOT NULL OR e.status = 'superseded' THEN 'superseded'
                WHEN ev.status IN ('resolved', 'done') THEN 'resolved'
                WHEN ev.type IN ('open_question', 'commitment')
                     AND episodes_item_stale(ev.due, ev.occurred_at, now(), %(grace)s::interval, %(age)s::interval)
                     THEN 'stale'
                ELSE 'open' END AS status
    FROM episode_events ev
    JOIN episodes e ON e.tenant_id = ev.tenant_id AND e.id = ev.episode_id
    WHERE ev.tenant_id = %(tenant_id)s AND e.kind = 'session'
      AND (%(user_id)s::text IS NULL OR ev.user_id = %(user_id)s)
      AND (%(type)s::text IS NULL OR ev.type = %(type)s)
      AND (%(since)s::timestamptz IS NULL OR ev.occurred_at >= %(since)s)
      AND (%(q)s::text IS NULL
           OR to_tsvector('english', concat_ws(' ', ev.what, ev.who, ev.evidence_quote))
              @@ websearch_to_tsquery('english', %(q)s))
) found
WHERE (%(status)s::text IS NULL OR found.status = %(status)s)
  AND (%(after_occurred)s::timestamptz IS NULL OR (occurred_at, id) < (%(after_occurred)s, %(after_id)s::bigint))
ORDER BY occurred_at DESC, id DESC
LIMIT %(limit)s

-- name: service_queue_depth
-- Transcripts waiting to be summarised (closed, pending or running), across tenants: a count through an
-- owner-rights function (0023), as the service's role reads no table.
SELECT episodes_queue_depth() AS n

-- name: service_user_known
-- Whether the tenant holds anything about the user (a transcript or an episode).
SELECT EXISTS (SELECT 1 FROM transcripts WHERE tenant_id = %(tenant_id)s AND user_id = %(user_id)s)
    OR EXISTS (SELECT 1 FROM episodes WHERE tenant_id = %(tenant_id)s AND user_id = %(user_id)s) AS known
