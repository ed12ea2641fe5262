-- Named queries of the pruning policy (jobs/lifecycle/policy.py); the rule itself is in
-- migrations 0015 and 0020 (episodes_prune_judge, episodes_prune_deletable). Same format as sql/queries.sql.

-- name: prune_policy_candidates
-- How many current session episodes the policy looks at (of one tenant, or all).
SELECT count(*) AS n FROM episodes
WHERE kind = 'session' AND status = 'current' AND (%(tenant)s::text IS NULL OR tenant_id = %(tenant)s::text)

-- name: prune_policy_clauses
-- Per clause: a delete clause's "hits" are the candidates it selects; a keep clause's are the
-- selected, unpinned candidates it protects (one episode may be protected by several keep clauses).
SELECT c.n, count(j.episode_id) FILTER (
           WHERE CASE WHEN c.action = 'delete' THEN c.n = ANY (j.deletes) ELSE c.n = ANY (j.keeps) AND NOT j.pinned END
       ) AS hits
FROM (SELECT (x ->> 'n')::int AS n, x ->> 'action' AS action FROM jsonb_array_elements(%(policy)s::jsonb) x) c
LEFT JOIN episodes_prune_judge(%(policy)s::jsonb, %(at)s::timestamptz, %(tenant)s::text) j ON true
GROUP BY c.n
ORDER BY c.n

-- name: prune_policy_totals
-- What the policy would do: deleted (selected, unprotected, unpinned), saved by a keep clause, saved
-- by a pin (whatever the keep clauses say); the deletable ones per tenant.
SELECT tenant_id,
       count(*) FILTER (WHERE NOT pinned AND cardinality(keeps) = 0) AS deleted,
       count(*) FILTER (WHERE NOT pinned AND cardinality(keeps) > 0) AS kept,
       count(*) FILTER (WHERE pinned) AS pinned
FROM episodes_prune_judge(%(policy)s::jsonb, %(at)s::timestamptz, %(tenant)s::text)
GROUP BY tenant_id
ORDER BY tenant_id

-- name: prune_policy_ids
-- The ids the policy deletes in one tenant, in order (the run erases them in batches).
SELECT episode_id FROM episodes_prune_judge(%(policy)s::jsonb, %(at)s::timestamptz, %(tenant)s::text)
WHERE NOT pinned AND cardinality(keeps) = 0
ORDER BY episode_id

-- name: prune_policy_lock_batch
-- Lock one batch of those ids in the tenant's transaction, checking the rule again on the locked
-- rows: an episode pinned, re-summarised or already erased since the ids were listed is left alone.
SELECT e.id FROM episodes e
WHERE e.id = ANY (%(ids)s::bigint[]) AND e.tenant_id = %(tenant_id)s
  AND episodes_prune_deletable(e.kind, e.status, e.pinned_at, e.ended_at, e.importance, %(policy)s::jsonb,
                               %(at)s::timestamptz)
ORDER BY e.id
FOR UPDATE
