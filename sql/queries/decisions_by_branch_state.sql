-- Question: Per repository, how many current decisions are in force, pending on an unmerged branch, or stale?
-- Scope: tenant
SELECT repository,
       branch_state,
       count(*) AS decisions,
       count(DISTINCT branch) AS branches,
       string_agg(DISTINCT branch, ', ' ORDER BY branch) FILTER (WHERE branch_state <> 'in force') AS on_branches,
       max(decided_at) AS last_decided_at
FROM analyst.decisions_by_branch
WHERE current
GROUP BY repository, branch_state
ORDER BY repository, branch_state;
