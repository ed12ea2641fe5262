-- Question: How many sessions were summarised each week, for how many users, with how many key events?
-- Scope: tenant
-- Weeks are ISO weeks (Monday, UTC) of the session's end; weeks without sessions are left out.
SELECT week,
       count(*) AS episodes,
       count(DISTINCT user_id) AS users,
       sum(decisions) AS decisions,
       sum(open_questions) AS open_questions,
       sum(commitments) AS commitments,
       sum(surprises) AS surprises
FROM analyst.episode_timeline
WHERE kind = 'session'
GROUP BY week
ORDER BY week;
