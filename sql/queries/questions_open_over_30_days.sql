-- Question: Which questions have been open for more than 30 days, oldest first?
-- Scope: tenant
-- "Open" means no later episode has resolved the question (status = 'open'); days_open counts
-- from when it was asked until now.
SELECT user_id,
       question,
       (raised_at AT TIME ZONE 'UTC')::date AS raised_on,
       days_open,
       session_id
FROM analyst.open_questions
WHERE status = 'open'
  AND days_open > 30
ORDER BY days_open DESC, user_id;
