-- Question: Which people, organisations and products are mentioned in the most sessions?
-- Scope: tenant
-- Spellings that differ only in case are counted together (entity_key).
SELECT min(entity) AS entity,
       mode() WITHIN GROUP (ORDER BY kind) AS kind,
       count(DISTINCT episode_id) AS sessions,
       count(DISTINCT user_id) AS users,
       (min(mentioned_at) AT TIME ZONE 'UTC')::date AS first_mentioned,
       (max(mentioned_at) AT TIME ZONE 'UTC')::date AS last_mentioned
FROM analyst.entity_mentions
GROUP BY entity_key
ORDER BY sessions DESC, entity
LIMIT 20;
