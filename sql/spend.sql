-- Spend per back end (jobs/llm/spend.py) and the backlog a dry run prices (jobs/summarize/backlog.py).

-- name: backend_spend_since
-- What one back end spent since %(since)s (the start of the UTC day, for the daily caps): tokens in and
-- out (cache reads and writes included), the sessions it was called for, the cost. A model-call row
-- names its back end in its model: "openai:llama3.2:3b", "claude-code:claude-haiku-4-5"; a bare model id
-- is the anthropic back end (jobs.llm.spend.label). Grouped by tenant first, so on a Citus cluster each
-- shard counts its own sessions; index model_calls_created_idx (migration 0033) finds the day's rows.
SELECT coalesce(sum(tokens), 0)::bigint AS tokens, count(transcript_id) AS sessions,
       coalesce(sum(usd), 0)::float8 AS usd
FROM (
    SELECT tenant_id, transcript_id,
           sum(input_tokens + output_tokens + cache_read_tokens + cache_write_tokens) AS tokens, sum(cost_usd) AS usd
    FROM model_calls
    WHERE created_at >= %(since)s
      AND CASE WHEN strpos(model, ':') > 0 THEN split_part(model, ':', 1) ELSE 'anthropic' END = %(backend)s
    GROUP BY tenant_id, transcript_id
) per_session

-- name: backlog_size
-- The sessions `episodes run` would take now (as count_eligible counts them), with their message
-- characters and count: what a dry run prices.
SELECT count(*) AS sessions,
       coalesce(sum((SELECT sum(length(m ->> 'content')) FROM jsonb_array_elements(messages) m)), 0)::bigint AS chars,
       coalesce(sum(message_count), 0)::bigint AS messages
FROM transcripts
WHERE ((status = 'pending' AND ended_at IS NOT NULL AND next_attempt_at <= now())
       OR (status = 'running' AND lease_until < now()))
  AND (%(tenant)s::text IS NULL OR tenant_id = %(tenant)s::text)
  AND (%(since)s::timestamptz IS NULL OR ended_at >= %(since)s::timestamptz)

-- name: recent_output_tokens
-- The mean output tokens of the latest session episodes made by a model (0 = offline): a dry run's
-- estimate of what one more episode takes.
SELECT avg(output_tokens)::float8 AS mean
FROM (SELECT output_tokens FROM episodes WHERE kind = 'session' AND output_tokens > 0
      ORDER BY created_at DESC LIMIT 200) latest

-- name: in_flight_sessions
-- The sessions being summarised now by any process (claimed, lease still running), but one (%(tenant_id)s,
-- %(id)s: the caller's own), and the characters of their messages as stored (JSON: a little over their text).
-- The daily token cap counts them before a claimed session's first call (jobs.summarize.worker): with none
-- recorded yet today every claim read 0 tokens spent. Index transcripts_lease_idx (status = 'running').
SELECT count(*) AS sessions, coalesce(sum(length(messages::text)), 0)::bigint AS chars
FROM transcripts
WHERE status = 'running' AND lease_until > now() AND NOT (tenant_id = %(tenant_id)s AND id = %(id)s)
