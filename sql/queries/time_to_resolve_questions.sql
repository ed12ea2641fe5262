-- Question: How long did questions stay open before a later session answered them, and which session did?
-- Scope: tenant
SELECT user_id,
       question,
       (raised_at AT TIME ZONE 'UTC')::date AS raised_on,
       (resolved_at AT TIME ZONE 'UTC')::date AS resolved_on,
       days_open AS days_to_resolve,
       resolved_by_session_id
FROM analyst.open_questions
WHERE status = 'resolved'
ORDER BY days_open DESC, user_id;
