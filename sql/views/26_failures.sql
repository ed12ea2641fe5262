-- analyst.failures: its query and its comments. The view analysts query, analyst.failures, is made by
-- 90_scoped.sql over this internal one (read with the owner's rights, scoped to the caller's tenant) and
-- gets these comments. Every join includes tenant_id, so the query runs on a Citus cluster too.

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

COMMENT ON VIEW analyst._failures IS
    'What went wrong: dead-lettered transcripts (given up after EPISODES_MAX_ATTEMPTS or a permanent error; '
    '`episodes retry` requeues them), transcripts waiting for a retry after a failure, and every model call '
    'whose outcome was not ok.';
COMMENT ON COLUMN analyst._failures.tenant_id IS 'Tenant.';
COMMENT ON COLUMN analyst._failures.user_id IS 'User of the transcript or call.';
COMMENT ON COLUMN analyst._failures.session_id IS 'Session of the transcript (NULL for a call without one).';
COMMENT ON COLUMN analyst._failures.source IS
    'dead_letter (transcript given up), retrying (transcript queued again after a failure) or model_call (one '
    'failed call; the SDK or the job may have retried it successfully).';
COMMENT ON COLUMN analyst._failures.failed_at IS
    'Model calls: when the call was made. Transcripts: the later of the last content change and the last model'
    ' call for it (the time of the failure itself is not stored).';
COMMENT ON COLUMN analyst._failures.attempts IS 'Transcripts: attempts made so far.';
COMMENT ON COLUMN analyst._failures.outcome IS 'Model calls: invalid, refusal, max_tokens, transient or error.';
COMMENT ON COLUMN analyst._failures.error IS 'The error message (transcripts: the last one).';
COMMENT ON COLUMN analyst._failures.next_attempt_at IS 'Retrying transcripts: when the next attempt is due.';
COMMENT ON COLUMN analyst._failures.template IS 'Model calls: the prompt template.';
COMMENT ON COLUMN analyst._failures.model IS 'Model calls: the model.';
