-- Named runtime queries. Code asks for them by name: query("upsert_transcript").
-- Each block starts with a line "-- name: <name>"; the text up to the next such line is the query.

-- name: upsert_transcript
-- Insert a transcript, or replace it when its content changed (then it is summarised again).
-- Returns no row when the stored content is identical (a no-op).
INSERT INTO transcripts (tenant_id, user_id, session_id, agent_id, purpose, started_at, ended_at,
                         messages, content_hash, source)
VALUES (%(tenant_id)s, %(user_id)s, %(session_id)s, %(agent_id)s, %(purpose)s, %(started_at)s,
        %(ended_at)s, %(messages)s, %(content_hash)s, %(source)s)
ON CONFLICT (tenant_id, session_id) DO UPDATE SET
    user_id = EXCLUDED.user_id,
    agent_id = EXCLUDED.agent_id,
    purpose = EXCLUDED.purpose,
    started_at = EXCLUDED.started_at,
    ended_at = EXCLUDED.ended_at,
    messages = EXCLUDED.messages,
    content_hash = EXCLUDED.content_hash,
    source = EXCLUDED.source,
    updated_at = now(),
    status = 'pending',
    attempts = 0,
    next_attempt_at = now(),
    lease_owner = NULL,
    lease_until = NULL,
    last_error = NULL
WHERE transcripts.content_hash IS DISTINCT FROM EXCLUDED.content_hash
RETURNING (xmax = 0) AS inserted

-- name: status_transcripts
SELECT CASE WHEN ended_at IS NULL AND status = 'pending' THEN 'open' ELSE status END AS state,
       count(*) AS n
FROM transcripts
GROUP BY 1
ORDER BY 1

-- name: status_episodes
SELECT kind, status, count(*) AS n,
       coalesce(sum(dropped_events), 0) AS dropped_events,
       coalesce(sum(dropped_entities), 0) AS dropped_entities,
       coalesce(sum(input_tokens), 0) AS input_tokens,
       coalesce(sum(output_tokens), 0) AS output_tokens,
       coalesce(sum(cost_usd), 0) AS cost_usd
FROM episodes
GROUP BY kind, status
ORDER BY kind, status

-- name: status_job_runs
SELECT job, worker, started_at, finished_at, status, counts, error
FROM job_runs
ORDER BY started_at DESC
LIMIT %(limit)s

-- name: status_dead_letters
SELECT tenant_id, session_id, attempts, last_error, updated_at
FROM transcripts
WHERE status = 'dead'
ORDER BY updated_at DESC
LIMIT %(limit)s
