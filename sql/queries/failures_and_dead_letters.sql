-- Question: Which transcripts were dead-lettered or are waiting for a retry, and which model calls failed, per tenant?
-- Scope: operator
-- Dead letters are requeued with `episodes retry` once the cause is fixed.
SELECT tenant_id,
       source,
       count(*) AS failures,
       count(DISTINCT session_id) AS sessions,
       max(failed_at) AS latest,
       (array_agg(coalesce(outcome || ': ', '') || left(error, 200) ORDER BY failed_at DESC))[1] AS latest_error
FROM analyst.failures
GROUP BY tenant_id, source
ORDER BY tenant_id, source;
