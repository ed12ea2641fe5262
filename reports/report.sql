-- Queries behind `episodes report`, asked for by name (jobs/report/data.py). They read only the
-- analyst views, as episodes_analyst scoped to one tenant or as episodes_operator (all tenants),
-- so the report can never show more than an analyst could query. Aggregation happens in pandas.
-- %(since)s is a timestamptz or NULL (no lower bound).

-- name: episodes
SELECT tenant_id, user_id, episode_id, session_id, ended_at, week, topic_tags, model,
       decisions, open_questions, commitments, surprises
FROM analyst.episode_timeline
WHERE kind = 'session'
  AND (%(since)s::timestamptz IS NULL OR ended_at >= %(since)s::timestamptz)
ORDER BY ended_at, episode_id

-- name: decisions
SELECT tenant_id, user_id, decided_at, what, who, topic_tags, session_id, evidence_quote
FROM analyst.decisions
WHERE %(since)s::timestamptz IS NULL OR decided_at >= %(since)s::timestamptz
ORDER BY decided_at DESC, event_id DESC

-- name: open_questions
SELECT tenant_id, user_id, question, raised_at, status, resolved_at, resolved_by_session_id, days_open,
       session_id
FROM analyst.open_questions
WHERE %(since)s::timestamptz IS NULL OR raised_at >= %(since)s::timestamptz
ORDER BY raised_at, event_id

-- name: commitments
SELECT tenant_id, user_id, what, committed_by, committed_at, due, status, days_overdue, session_id
FROM analyst.commitments
WHERE %(since)s::timestamptz IS NULL OR committed_at >= %(since)s::timestamptz
ORDER BY committed_at, event_id

-- name: entities
SELECT tenant_id, entity_key, entity, kind, episode_id, user_id
FROM analyst.entity_mentions
WHERE %(since)s::timestamptz IS NULL OR mentioned_at >= %(since)s::timestamptz

-- name: cost
SELECT tenant_id, day, mode, calls, failed_calls, input_tokens, output_tokens, cache_read_tokens,
       cache_write_tokens, cost_usd
FROM analyst.model_cost_daily
WHERE %(since)s::timestamptz IS NULL OR day >= (%(since)s::timestamptz AT TIME ZONE 'UTC')::date
ORDER BY day, tenant_id, mode

-- name: failures
SELECT tenant_id, user_id, session_id, source, failed_at, attempts, outcome, error, next_attempt_at
FROM analyst.failures
WHERE %(since)s::timestamptz IS NULL OR failed_at >= %(since)s::timestamptz
ORDER BY failed_at DESC NULLS LAST
