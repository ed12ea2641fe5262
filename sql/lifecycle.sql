-- Named queries of memory over years (jobs/lifecycle/): re-summarising on purpose, transcript
-- retention and pins. Same format as sql/queries.sql: each block starts with "-- name: <name>".

-- name: prompt_versions_below
-- The prompt versions "below" %(below)s: those that differ from it and whose first session episode
-- was written before its first (every version is below one that has not been used yet). Read once
-- per command, not per requeued batch: it groups every session episode.
WITH versions AS (
    SELECT prompt_version, min(created_at) AS first_at FROM episodes WHERE kind = 'session' GROUP BY prompt_version
)
SELECT coalesce(array_agg(prompt_version), '{}') AS versions
FROM versions
WHERE prompt_version <> %(below)s::text
  AND first_at < coalesce((SELECT first_at FROM versions WHERE prompt_version = %(below)s::text), 'infinity')

-- name: resummarize_counts
-- What `episodes resummarize` would do with the sessions chosen by the filters: sessions with a
-- current session episode, by what happens to them. gone: the message bodies were removed by
-- retention (skipped); queued: already waiting or in work; dead: dead-lettered (`episodes retry`);
-- current: the episode was made with %(current)s already; requeue: the rest. For those, the message
-- characters and count (the input estimate) and the output tokens their episodes took (0 = offline).
-- %(versions)s: the prompt versions to take (prompt_versions_below), null for any.
WITH chosen AS (
    SELECT t.id, t.status, t.messages_pruned_at IS NOT NULL AS gone, e.prompt_version = %(current)s AS current,
           t.message_count, e.output_tokens, t.messages
    FROM transcripts t
    JOIN episodes e ON e.tenant_id = t.tenant_id AND e.session_id = t.session_id
                   AND e.kind = 'session' AND e.status = 'current'
    WHERE (%(tenant)s::text IS NULL OR t.tenant_id = %(tenant)s::text)
      AND (%(user)s::text IS NULL OR t.user_id = %(user)s::text)
      AND (%(since)s::timestamptz IS NULL OR t.ended_at >= %(since)s::timestamptz)
      AND (%(until)s::timestamptz IS NULL OR t.ended_at < %(until)s::timestamptz)
      AND (%(versions)s::text[] IS NULL OR e.prompt_version = ANY(%(versions)s::text[]))
)
SELECT count(*) FILTER (WHERE gone) AS gone,
       count(*) FILTER (WHERE NOT gone AND status IN ('pending', 'running')) AS queued,
       count(*) FILTER (WHERE NOT gone AND status = 'dead') AS dead,
       count(*) FILTER (WHERE NOT gone AND status = 'done' AND current) AS current,
       count(*) FILTER (WHERE NOT gone AND status = 'done' AND NOT current) AS requeue,
       coalesce(sum((SELECT sum(length(m ->> 'content')) FROM jsonb_array_elements(c.messages) m))
                FILTER (WHERE NOT gone AND status = 'done' AND NOT current), 0)::bigint AS chars,
       coalesce(sum(message_count) FILTER (WHERE NOT gone AND status = 'done' AND NOT current), 0)::bigint AS messages,
       avg(output_tokens) FILTER (WHERE NOT gone AND status = 'done' AND NOT current AND output_tokens > 0)::float8
           AS mean_output_tokens
FROM chosen c

-- name: resummarize_tenants
-- The tenants with sessions to requeue (the "requeue" rows of resummarize_counts, before the limit).
-- The requeue then goes tenant by tenant: on a Citus cluster a FOR UPDATE works only in a statement
-- that stays on one shard, and a tenant's rows are on one shard.
SELECT DISTINCT t.tenant_id
FROM transcripts t
JOIN episodes e ON e.tenant_id = t.tenant_id AND e.session_id = t.session_id
               AND e.kind = 'session' AND e.status = 'current'
WHERE t.status = 'done' AND t.messages_pruned_at IS NULL AND e.prompt_version <> %(current)s::text
  AND (%(tenant)s::text IS NULL OR t.tenant_id = %(tenant)s::text)
  AND (%(user)s::text IS NULL OR t.user_id = %(user)s::text)
  AND (%(since)s::timestamptz IS NULL OR t.ended_at >= %(since)s::timestamptz)
  AND (%(until)s::timestamptz IS NULL OR t.ended_at < %(until)s::timestamptz)
  AND (%(versions)s::text[] IS NULL OR e.prompt_version = ANY(%(versions)s::text[]))
ORDER BY t.tenant_id

-- name: resummarize_requeue
-- Requeue up to %(limit)s of the chosen sessions of tenant %(tenant_id)s (the "requeue" rows of
-- resummarize_counts) for a new episode: back to pending, due now (the caller notifies `serve`).
-- Only summarised ('done') rows are taken and locked, so a running claim is never touched, and a
-- session requeued once is not taken again (a second run finds it pending); rows whose bodies
-- retention removed are left alone.
WITH picked AS (
    SELECT t.id
    FROM transcripts t
    JOIN episodes e ON e.tenant_id = t.tenant_id AND e.session_id = t.session_id
                   AND e.kind = 'session' AND e.status = 'current'
    WHERE t.tenant_id = %(tenant_id)s AND e.tenant_id = %(tenant_id)s
      AND t.status = 'done' AND t.messages_pruned_at IS NULL AND e.prompt_version <> %(current)s::text
      AND (%(user)s::text IS NULL OR t.user_id = %(user)s::text)
      AND (%(since)s::timestamptz IS NULL OR t.ended_at >= %(since)s::timestamptz)
      AND (%(until)s::timestamptz IS NULL OR t.ended_at < %(until)s::timestamptz)
      AND (%(versions)s::text[] IS NULL OR e.prompt_version = ANY(%(versions)s::text[]))
    ORDER BY t.id
    LIMIT %(limit)s
    FOR UPDATE OF t
)
UPDATE transcripts t
SET status = 'pending', attempts = 0, next_attempt_at = now(), last_error = NULL
FROM picked
WHERE t.tenant_id = %(tenant_id)s AND t.id = picked.id AND t.status = 'done'
RETURNING t.id

-- name: retention_candidates
-- What a prune would remove now: summarised transcripts that ended before %(before)s and still hold
-- their bodies, and the bytes those bodies take (pg_column_size: as stored, after compression).
SELECT count(*) AS transcripts, coalesce(sum(pg_column_size(messages)), 0)::bigint AS bytes
FROM transcripts
WHERE status = 'done' AND messages_pruned_at IS NULL AND ended_at < %(before)s::timestamptz
  AND (%(tenant)s::text IS NULL OR tenant_id = %(tenant)s::text)

-- name: retention_tenants
-- The tenants holding such transcripts. The prune goes tenant by tenant: on a Citus cluster
-- FOR UPDATE SKIP LOCKED works only in a statement that stays on one shard (one tenant's rows).
SELECT DISTINCT tenant_id
FROM transcripts
WHERE status = 'done' AND messages_pruned_at IS NULL AND ended_at < %(before)s::timestamptz
  AND (%(tenant)s::text IS NULL OR tenant_id = %(tenant)s::text)
ORDER BY tenant_id

-- name: retention_prune_batch
-- Remove the bodies of up to %(limit)s such transcripts of tenant %(tenant_id)s in one short
-- transaction: each message keeps only its role (the count and the content hash stay). Rows locked
-- by someone else (a re-ingest, a requeue) are skipped for the next batch; the WHERE is checked again
-- on the locked row. The new size is measured outside the UPDATE (Citus allows no STABLE function
-- such as pg_column_size in the RETURNING of a distributed UPDATE).
WITH picked AS (
    SELECT id, pg_column_size(messages) AS bytes_before
    FROM transcripts
    WHERE tenant_id = %(tenant_id)s
      AND status = 'done' AND messages_pruned_at IS NULL AND ended_at < %(before)s::timestamptz
    ORDER BY ended_at
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
),
pruned AS (
    UPDATE transcripts t
    SET messages = (SELECT jsonb_agg(jsonb_build_object('role', m -> 'role') ORDER BY i)
                    FROM jsonb_array_elements(t.messages) WITH ORDINALITY AS a (m, i)),
        messages_pruned_at = now()
    FROM picked
    WHERE t.tenant_id = %(tenant_id)s AND t.id = picked.id
    RETURNING picked.bytes_before, t.messages
)
SELECT bytes_before, pg_column_size(messages) AS bytes_after FROM pruned

-- name: pin_episode
-- Pin a current session episode of the tenant; a compressed one comes back to recall (its super is
-- rebuilt without it by the caller). Returns the episode's user, whether it was pinned already, and
-- the period of the super it was compressed into.
-- (now() is read in the CTE: Citus refuses it inside COALESCE of an UPDATE.)
WITH old AS (
    SELECT id, pinned_at, compressed_into, now() AS at FROM episodes
    WHERE id = %(id)s AND tenant_id = %(tenant_id)s AND kind = 'session' AND status = 'current'
    FOR UPDATE
)
UPDATE episodes e
SET pinned_at = coalesce(old.pinned_at, old.at), compressed_into = NULL
FROM old
WHERE e.tenant_id = %(tenant_id)s AND e.id = old.id
RETURNING e.user_id, old.pinned_at IS NOT NULL AS was_pinned,
          (SELECT s.period_start FROM episodes s
           WHERE s.tenant_id = %(tenant_id)s AND s.id = old.compressed_into) AS super_start,
          (SELECT s.period_end FROM episodes s
           WHERE s.tenant_id = %(tenant_id)s AND s.id = old.compressed_into) AS super_end

-- name: unpin_episode
WITH old AS (
    SELECT id, pinned_at FROM episodes
    WHERE id = %(id)s AND tenant_id = %(tenant_id)s AND kind = 'session' AND status = 'current'
    FOR UPDATE
)
UPDATE episodes e SET pinned_at = NULL FROM old WHERE e.tenant_id = %(tenant_id)s AND e.id = old.id
RETURNING e.user_id, old.pinned_at IS NOT NULL AS was_pinned

-- name: episode_identity
-- Why an episode id could not be pinned: absent (or another tenant's: row-level security hides it),
-- a super-summary, or superseded by a re-run.
SELECT kind, status, superseded_by FROM episodes WHERE id = %(id)s AND tenant_id = %(tenant_id)s
