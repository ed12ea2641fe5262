-- Question: Which topics came up most in each quarter?
-- Scope: tenant
-- The three most frequent topic tags of session episodes per quarter (UTC), ties alphabetical.
WITH counts AS (
    SELECT date_trunc('quarter', ended_at AT TIME ZONE 'UTC')::date AS quarter,
           tag AS topic,
           count(*) AS episodes
    FROM analyst.episode_timeline, unnest(topic_tags) AS tag
    WHERE kind = 'session'
    GROUP BY 1, 2
)
SELECT quarter, topic, episodes
FROM (SELECT *, row_number() OVER (PARTITION BY quarter ORDER BY episodes DESC, topic) AS rank FROM counts) ranked
WHERE rank <= 3
ORDER BY quarter, episodes DESC, topic;
