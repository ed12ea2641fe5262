-- Named queries of the compress job (jobs/compress/). Same format as sql/queries.sql: each block
-- starts with "-- name: <name>". Periods are calendar periods in UTC: a session episode belongs to
-- the period that contains its ended_at; period_end is the period's last day (inclusive).
-- compress_plan and compress_purge_embeddings run as the owner across tenants (on a Citus cluster:
-- on every shard, so they join tenant tables only on equal tenant_id). Every other query runs inside
-- Database.tenant() and names the tenant on every table it touches: row-level security confines it
-- to one tenant, and the explicit filter lets a cluster route the whole statement to the tenant's node
-- (a correlated subquery too names the tenant itself: Citus does not route on equality to the outer row).

-- name: compress_try_lock
-- One compress runner at a time: a session-level advisory lock, held for the whole run and released
-- with the connection if the process dies.
SELECT pg_try_advisory_lock(%(key)s::bigint) AS locked

-- name: compress_unlock
SELECT pg_advisory_unlock(%(key)s::bigint) AS unlocked

-- name: compress_lock_user
-- Serialises the writers of one user's super-summaries (a compress run, rebuild_period from an
-- erasure) until the transaction ends. The two-key form does not overlap the run lock's key space.
SELECT pg_advisory_xact_lock(%(namespace)s::int, hashtext(%(tenant_id)s::text || '/' || %(user_id)s::text))

-- name: compress_plan
-- Every (tenant, user, period) that might need work: the current session episodes that ended
-- before %(boundary)s grouped by period (with the supers they are compressed into), full-joined
-- with the current super-summaries of exactly such a period (a super whose sources are gone still
-- shows up, with no sources, so it can be removed). The job decides per row what to do.
WITH src AS (
    SELECT tenant_id, user_id, id, compressed_into,
           date_trunc(%(unit)s, ended_at AT TIME ZONE 'UTC')::date AS period_start
    FROM episodes
    WHERE kind = 'session' AND status = 'current' AND ended_at < %(boundary)s::timestamptz
      AND pinned_at IS NULL  -- pinned episodes stay in recall as themselves (migration 0012)
      AND (%(tenant)s::text IS NULL OR tenant_id = %(tenant)s::text)
      AND (%(user)s::text IS NULL OR user_id = %(user)s::text)
),
groups AS (
    SELECT tenant_id, user_id, period_start,
           array_agg(id ORDER BY id) AS source_ids,
           array_agg(DISTINCT compressed_into) FILTER (WHERE compressed_into IS NOT NULL) AS into_ids,
           count(*) FILTER (WHERE compressed_into IS NULL) AS uncompressed
    FROM src
    GROUP BY tenant_id, user_id, period_start
),
supers AS (
    SELECT tenant_id, user_id, period_start, id AS super_id, content_hash AS super_hash
    FROM episodes
    WHERE kind = 'super' AND status = 'current'
      AND period_start = date_trunc(%(unit)s, period_start::timestamp)::date
      AND period_end = (period_start + make_interval(months => %(months)s))::date - 1
      AND period_end < %(boundary)s::date
      AND (%(tenant)s::text IS NULL OR tenant_id = %(tenant)s::text)
      AND (%(user)s::text IS NULL OR user_id = %(user)s::text)
)
SELECT tenant_id, user_id, period_start,
       coalesce(g.source_ids, '{}') AS source_ids, coalesce(g.into_ids, '{}') AS into_ids,
       coalesce(g.uncompressed, 0) AS uncompressed, s.super_id, s.super_hash
FROM groups g
FULL JOIN supers s USING (tenant_id, user_id, period_start)
ORDER BY tenant_id, user_id, period_start

-- name: compress_group_sources
-- The period's current session episodes of one user that are not pinned, oldest first.
SELECT id, purpose, summary, topic_tags, importance, started_at, ended_at, embedding, compressed_into
FROM episodes
WHERE tenant_id = %(tenant_id)s AND user_id = %(user_id)s AND kind = 'session' AND status = 'current'
  AND pinned_at IS NULL
  AND ended_at >= %(start)s::timestamptz AND ended_at < %(end)s::timestamptz
ORDER BY ended_at, id

-- name: compress_lock_group_sources
-- The same set at write time, locked: a concurrent re-summarisation waits until the super commits.
SELECT id, compressed_into
FROM episodes
WHERE tenant_id = %(tenant_id)s AND user_id = %(user_id)s AND kind = 'session' AND status = 'current'
  AND pinned_at IS NULL
  AND ended_at >= %(start)s::timestamptz AND ended_at < %(end)s::timestamptz
ORDER BY id
FOR UPDATE

-- name: compress_source_events
-- The events a super-summary carries: decisions that still stand (not replaced by a later one),
-- and questions and commitments still open.
SELECT id, episode_id, ordinal, type, what, who, due, occurred_at, evidence
FROM episode_events
WHERE tenant_id = %(tenant_id)s AND episode_id = ANY (%(ids)s::bigint[])
  AND ((type = 'decision' AND superseded_by IS NULL) OR (type IN ('open_question', 'commitment') AND status = 'open'))
ORDER BY occurred_at, episode_id, ordinal

-- name: compress_source_entities
SELECT episode_id, name, kind
FROM episode_entities
WHERE tenant_id = %(tenant_id)s AND episode_id = ANY (%(ids)s::bigint[])
ORDER BY episode_id, id

-- name: compress_linked_supers
-- Super-summaries touching the group: those its sources are compressed into, and the current one of
-- exactly this period. Lineage comes along, to tell an intact super from one whose source was erased.
SELECT e.id, e.status, e.period_start, e.period_end, e.content_hash,
       coalesce((SELECT array_agg(l.source_episode_id ORDER BY l.source_episode_id)
                 FROM episode_lineage l
                 WHERE l.tenant_id = %(tenant_id)s AND l.super_episode_id = e.id), '{}') AS lineage
FROM episodes e
WHERE e.tenant_id = %(tenant_id)s AND e.user_id = %(user_id)s AND e.kind = 'super'
  AND (e.id = ANY (%(ids)s::bigint[])
       OR (e.status = 'current' AND e.period_start = %(period_start)s AND e.period_end = %(period_end)s))
ORDER BY e.id
FOR UPDATE OF e

-- name: compress_history_supers
-- Superseded super-summaries inside the period (kept for audit), with their lineage.
SELECT e.id, e.content_hash,
       coalesce((SELECT array_agg(l.source_episode_id ORDER BY l.source_episode_id)
                 FROM episode_lineage l
                 WHERE l.tenant_id = %(tenant_id)s AND l.super_episode_id = e.id), '{}') AS lineage
FROM episodes e
WHERE e.tenant_id = %(tenant_id)s AND e.user_id = %(user_id)s AND e.kind = 'super'
  AND e.status = 'superseded' AND e.period_start >= %(period_start)s AND e.period_end <= %(period_end)s
ORDER BY e.id

-- name: compress_delete_supers
-- Removal (events, entities and lineage cascade); release_references has cleared what pointed here,
-- so the sources' compressed_into is NULL: they are back in recall.
DELETE FROM episodes
WHERE tenant_id = %(tenant_id)s AND user_id = %(user_id)s AND id = ANY (%(ids)s::bigint[]) AND kind = 'super'

-- name: compress_supersede_supers
UPDATE episodes SET status = 'superseded'
WHERE tenant_id = %(tenant_id)s AND id = ANY (%(ids)s::bigint[]) AND kind = 'super'

-- name: compress_link_superseded
UPDATE episodes SET superseded_by = %(new_id)s
WHERE tenant_id = %(tenant_id)s AND id = ANY (%(ids)s::bigint[]) AND kind = 'super'

-- name: compress_event_provenance
-- A super's event is a copy of its source event: same time, evidence quote, status and due date.
-- (The evidence indexes were copied on insert; they index the source session's transcript.)
UPDATE episode_events s
SET occurred_at = src.occurred_at, evidence_quote = src.evidence_quote, status = src.status,
    due = src.due, who = src.who
FROM episode_events src
WHERE s.tenant_id = %(tenant_id)s AND s.episode_id = %(super_id)s
  AND src.tenant_id = s.tenant_id AND src.id = s.source_event_id

-- name: compress_insert_lineage
-- Selected from the source rows themselves (co-located: on a cluster it runs on the tenant's node; an
-- INSERT ... SELECT from an array would be copied in from the coordinator, which Citus refuses under
-- row-level security).
INSERT INTO episode_lineage (tenant_id, user_id, super_episode_id, source_episode_id)
SELECT tenant_id, %(user_id)s, %(super_id)s, id
FROM episodes
WHERE tenant_id = %(tenant_id)s AND id = ANY (%(source_ids)s::bigint[])

-- name: compress_point_sources
UPDATE episodes SET compressed_into = %(super_id)s
WHERE tenant_id = %(tenant_id)s AND id = ANY (%(source_ids)s::bigint[]) AND kind = 'session'

-- name: compress_purge_embeddings
-- --purge-embeddings: drop the vectors of session episodes compressed into a current super.
UPDATE episodes e
SET embedding = NULL
WHERE e.kind = 'session' AND e.compressed_into IS NOT NULL AND e.embedding IS NOT NULL
  AND (%(tenant)s::text IS NULL OR e.tenant_id = %(tenant)s::text)
  AND (%(user)s::text IS NULL OR e.user_id = %(user)s::text)
  AND EXISTS (SELECT 1 FROM episodes s
              WHERE s.tenant_id = e.tenant_id AND s.id = e.compressed_into AND s.status = 'current')
