-- Named queries of forget and export (jobs/forget.py, jobs/export.py).
-- Same format as sql/queries.sql: each block starts with "-- name: <name>".
-- Every query runs inside Database.tenant(): row-level security already hides other tenants. Every
-- statement still names the tenant on each tenant table it reads or writes: for the planner, for
-- readers, and on a Citus cluster to route the whole statement to the node holding the tenant
-- (row-level security does not route).

-- name: privacy_user_hash
-- How an erasure names a user, computed by the owner-rights function of 0023 for the transaction's tenant
-- only: the salt is the owner's alone (episodes_secrets) and never leaves the database.
SELECT episodes_user_hash(%(tenant_id)s, %(user_id)s) AS user_hash

-- name: forget_lock_transcripts
-- Lock the user's transcripts first: a summarize worker completes a transcript by updating this
-- row, so it either committed before (and its episode is found below) or finds the row gone. Their
-- session ids go to the CLI (the Claude Code files of this machine named by them) and are never logged.
SELECT id, session_id
FROM transcripts
WHERE tenant_id = %(tenant_id)s AND user_id = %(user_id)s
ORDER BY id
FOR UPDATE

-- name: forget_episodes
-- The user's episodes (also any made from the user's transcripts under an older user id), and every
-- super-summary whose lineage includes one of them, whoever it belongs to.
WITH own AS (
    SELECT id
    FROM episodes
    WHERE tenant_id = %(tenant_id)s
      AND (user_id = %(user_id)s OR transcript_id = ANY (%(transcript_ids)s::bigint[]))
),
supers AS (
    SELECT l.super_episode_id AS id
    FROM episode_lineage l
    WHERE l.tenant_id = %(tenant_id)s AND l.source_episode_id IN (SELECT id FROM own)
)
SELECT e.id, e.kind, e.user_id, e.period_start, e.period_end, (e.user_id = %(user_id)s) AS own
FROM episodes e
WHERE e.tenant_id = %(tenant_id)s AND e.id IN (SELECT id FROM own UNION SELECT id FROM supers)
ORDER BY e.id
FOR UPDATE

-- name: forget_delete_events
DELETE FROM episode_events
WHERE tenant_id = %(tenant_id)s AND (user_id = %(user_id)s OR episode_id = ANY (%(episode_ids)s::bigint[]))

-- name: forget_delete_entities
DELETE FROM episode_entities
WHERE tenant_id = %(tenant_id)s AND (user_id = %(user_id)s OR episode_id = ANY (%(episode_ids)s::bigint[]))

-- name: forget_delete_lineage
DELETE FROM episode_lineage
WHERE tenant_id = %(tenant_id)s
  AND (user_id = %(user_id)s OR super_episode_id = ANY (%(episode_ids)s::bigint[])
       OR source_episode_id = ANY (%(episode_ids)s::bigint[]))

-- name: forget_delete_lines
-- The episodes' verbatim lines (migration 0032): they would go with their episodes (ON DELETE CASCADE), but
-- deleted here first so the erasure counts them (issue 46, item 13).
DELETE FROM episode_lines
WHERE tenant_id = %(tenant_id)s AND (user_id = %(user_id)s OR episode_id = ANY (%(episode_ids)s::bigint[]))

-- name: forget_delete_episodes
-- release_references has cleared other rows pointing here (superseded_by, compressed_into,
-- resolved_by, source_event_id): the remaining sources of a removed super return to recall.
DELETE FROM episodes
WHERE tenant_id = %(tenant_id)s AND (user_id = %(user_id)s OR id = ANY (%(episode_ids)s::bigint[]))

-- name: forget_delete_model_calls
DELETE FROM model_calls
WHERE tenant_id = %(tenant_id)s
  AND (user_id = %(user_id)s OR transcript_id = ANY (%(transcript_ids)s::bigint[]))

-- name: forget_delete_transcripts
-- Batch items of these transcripts go with them (ON DELETE CASCADE).
DELETE FROM transcripts
WHERE tenant_id = %(tenant_id)s AND id = ANY (%(transcript_ids)s::bigint[])

-- name: forget_keep_transcripts
-- Kept transcripts are marked done and forgotten (migration 0011's trigger holds them at done), so no
-- worker, retry or lease rescue summarises them again (that would re-create what was erased); a worker
-- holding a claim loses it and writes nothing. now(), not coalesce(forgotten_at, now()): Citus refuses a
-- STABLE function called with a column in an UPDATE of a distributed table.
UPDATE transcripts
SET status = 'done', lease_owner = NULL, lease_until = NULL, last_error = NULL, next_attempt_at = now(),
    forgotten_at = now()
WHERE tenant_id = %(tenant_id)s AND id = ANY (%(transcript_ids)s::bigint[])

-- name: forget_scrub_job_runs
-- After the erasure committed (or, with dry, was rolled back), in a transaction with the tenant set and
-- no role switched (migration 0026): job_runs is the owner's alone.
SELECT episodes_scrub_job_runs(%(tenant_id)s, %(user_id)s, %(dry)s) AS n

-- name: job_run_tenants
-- The tenants a job run touched: those of its model calls (jobs.runs.finish_run, as the owner). An
-- erasure scrubs the error texts of its own tenant's runs only (episodes_scrub_job_runs, migration 0029).
SELECT DISTINCT tenant_id FROM model_calls WHERE job_run_id = %(id)s ORDER BY tenant_id

-- name: record_job_run_tenants
UPDATE job_runs SET tenants = %(tenants)s WHERE id = %(id)s

-- name: insert_erasure
INSERT INTO erasures (tenant_id, user_hash, counts, kept_transcripts)
VALUES (%(tenant_id)s, %(user_hash)s, %(counts)s, %(kept_transcripts)s)
RETURNING id, requested_at

-- name: erasures_of
SELECT id, requested_at, counts, kept_transcripts
FROM erasures
WHERE tenant_id = %(tenant_id)s AND user_hash = %(user_hash)s
ORDER BY requested_at, id

-- name: export_user
-- Everything held about one user, as one JSON document built in one statement (one snapshot).
WITH t AS (
    SELECT * FROM transcripts WHERE tenant_id = %(tenant_id)s AND user_id = %(user_id)s
),
e AS (
    SELECT *
    FROM episodes
    WHERE tenant_id = %(tenant_id)s AND (user_id = %(user_id)s OR transcript_id IN (SELECT id FROM t))
),
ev AS (
    SELECT episode_id,
           jsonb_agg(jsonb_build_object(
               'id', id, 'type', type, 'what', what, 'who', who, 'due', due, 'occurred_at', occurred_at,
               'evidence', to_jsonb(evidence), 'evidence_quote', evidence_quote, 'status', status,
               'resolved_by', resolved_by, 'resolved_at', resolved_at, 'source_event_id', source_event_id
           ) ORDER BY ordinal) AS events
    FROM episode_events
    WHERE tenant_id = %(tenant_id)s AND episode_id IN (SELECT id FROM e)
    GROUP BY episode_id
),
en AS (
    SELECT episode_id, jsonb_agg(jsonb_build_object('name', name, 'kind', kind) ORDER BY name, kind) AS entities
    FROM episode_entities
    WHERE tenant_id = %(tenant_id)s AND episode_id IN (SELECT id FROM e)
    GROUP BY episode_id
),
ln AS (
    SELECT episode_id, jsonb_agg(jsonb_strip_nulls(jsonb_build_object(
               'message_index', message_index, 'speaker', speaker, 'said_at', said_at, 'text', text
           )) ORDER BY ordinal) AS lines
    FROM episode_lines
    WHERE tenant_id = %(tenant_id)s AND episode_id IN (SELECT id FROM e)
    GROUP BY episode_id
),
li AS (
    SELECT super_episode_id, jsonb_agg(source_episode_id ORDER BY source_episode_id) AS sources
    FROM episode_lineage
    WHERE tenant_id = %(tenant_id)s AND super_episode_id IN (SELECT id FROM e)
    GROUP BY super_episode_id
),
docs AS (
    SELECT e.kind, e.started_at, e.id,
           jsonb_strip_nulls(jsonb_build_object(
               'id', e.id, 'kind', e.kind, 'session_id', e.session_id, 'purpose', e.purpose,
               'summary', e.summary, 'topic_tags', to_jsonb(e.topic_tags), 'importance', e.importance,
               'started_at', e.started_at, 'ended_at', e.ended_at,
               'period_start', e.period_start, 'period_end', e.period_end,
               'status', e.status, 'superseded_by', e.superseded_by, 'compressed_into', e.compressed_into,
               'replaces', li.sources, 'model', e.model, 'prompt_version', e.prompt_version,
               'created_at', e.created_at,
               'embedding', CASE WHEN %(with_embeddings)s THEN to_jsonb(e.embedding::real[]) END
           )) || jsonb_build_object('events', coalesce(ev.events, '[]'::jsonb),
                                    'entities', coalesce(en.entities, '[]'::jsonb),
                                    'lines', coalesce(ln.lines, '[]'::jsonb)) AS doc
    FROM e
    LEFT JOIN ev ON ev.episode_id = e.id
    LEFT JOIN en ON en.episode_id = e.id
    LEFT JOIN ln ON ln.episode_id = e.id
    LEFT JOIN li ON li.super_episode_id = e.id
)
SELECT jsonb_build_object(
    'transcripts', coalesce((
        SELECT jsonb_agg(jsonb_strip_nulls(jsonb_build_object(
                   'session_id', t.session_id, 'agent_id', t.agent_id, 'purpose', t.purpose,
                   'started_at', t.started_at, 'ended_at', t.ended_at, 'source', t.source,
                   'created_at', t.created_at, 'updated_at', t.updated_at, 'status', t.status,
                   'attempts', t.attempts, 'last_error', t.last_error
               )) || jsonb_build_object('metadata', t.metadata, 'messages', t.messages)
               ORDER BY t.started_at NULLS LAST, t.id)
        FROM t), '[]'::jsonb),
    'episodes', coalesce((SELECT jsonb_agg(doc ORDER BY started_at, id) FROM docs WHERE kind = 'session'),
                         '[]'::jsonb),
    'super_summaries', coalesce((SELECT jsonb_agg(doc ORDER BY started_at, id) FROM docs WHERE kind = 'super'),
                                '[]'::jsonb),
    'model_calls', coalesce((
        SELECT jsonb_agg(jsonb_strip_nulls(jsonb_build_object(
                   'created_at', m.created_at, 'template', m.template, 'model', m.model, 'batch', m.batch,
                   'session_id', (SELECT t.session_id FROM t WHERE t.id = m.transcript_id),
                   'input_tokens', m.input_tokens, 'output_tokens', m.output_tokens,
                   'cache_read_tokens', m.cache_read_tokens, 'cache_write_tokens', m.cache_write_tokens,
                   'cost_usd', m.cost_usd, 'latency_ms', m.latency_ms, 'outcome', m.outcome, 'error', m.error
               )) ORDER BY m.created_at, m.id)
        FROM model_calls m
        WHERE m.tenant_id = %(tenant_id)s
          AND (m.user_id = %(user_id)s OR m.transcript_id IN (SELECT id FROM t))), '[]'::jsonb)
) AS doc
