-- Question: How many decisions were made each month, by how many users, in how many sessions?
-- Scope: tenant
SELECT date_trunc('month', decided_at AT TIME ZONE 'UTC')::date AS month,
       count(*) AS decisions,
       count(DISTINCT user_id) AS users,
       count(DISTINCT episode_id) AS sessions
FROM analyst.decisions
GROUP BY 1
ORDER BY 1;
