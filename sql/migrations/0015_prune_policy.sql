-- 0015: the optional pruning policy (issue 17): `episodes prune --policy`, EPISODES_PRUNE_POLICY.
--
-- jobs/prune_policy.py parses a policy into clauses and passes them here as a JSON array of
-- {"n": 1, "action": "keep" | "delete", "newer_than": s, "older_than": s, "op": "<", "importance": 0.5}
-- (absent keys are not tested). An episode is deleted when some delete clause selects it, no keep
-- clause protects it and episodes_may_prune(e) (0012) allows it; only current session episodes are
-- candidates. The erasure itself is jobs.privacy.erase_episodes, audited with scope 'policy'.

-- Does one clause match the episode at time `at`? Age is the time since the session ended.
-- Importance is compared as real (its column type), so "importance>=0.7" matches a stored 0.7.
CREATE FUNCTION episodes_policy_selects(e episodes, clause jsonb, at timestamptz) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
SELECT (NOT clause ? 'newer_than' OR e.ended_at > at - make_interval(secs => (clause ->> 'newer_than')::float8))
   AND (NOT clause ? 'older_than' OR e.ended_at <= at - make_interval(secs => (clause ->> 'older_than')::float8))
   AND (NOT clause ? 'importance' OR CASE clause ->> 'op'
            WHEN '<' THEN e.importance < (clause ->> 'importance')::real
            WHEN '<=' THEN e.importance <= (clause ->> 'importance')::real
            WHEN '>' THEN e.importance > (clause ->> 'importance')::real
            WHEN '>=' THEN e.importance >= (clause ->> 'importance')::real
        END)
$$;
COMMENT ON FUNCTION episodes_policy_selects(episodes, jsonb, timestamptz) IS
    'True when one pruning-policy clause (jobs/prune_policy.py, as JSON) matches the episode at the given time.';

-- Which clauses select (delete) and protect (keep) each candidate; only episodes some delete clause
-- selects are returned. Runs with the caller's rights, so row-level security applies to the app role.
CREATE FUNCTION episodes_prune_judge(policy jsonb, at timestamptz, only_tenant text)
RETURNS TABLE (episode_id bigint, tenant_id text, user_id text, pinned boolean, deletes int[], keeps int[])
LANGUAGE sql STABLE
AS $$
SELECT j.* FROM (
    SELECT e.id, e.tenant_id, e.user_id, NOT episodes_may_prune(e),
           ARRAY(SELECT (c ->> 'n')::int FROM jsonb_array_elements(policy) c
                 WHERE c ->> 'action' = 'delete' AND episodes_policy_selects(e, c, at) ORDER BY 1),
           ARRAY(SELECT (c ->> 'n')::int FROM jsonb_array_elements(policy) c
                 WHERE c ->> 'action' = 'keep' AND episodes_policy_selects(e, c, at) ORDER BY 1)
    FROM episodes e
    WHERE e.kind = 'session' AND e.status = 'current' AND (only_tenant IS NULL OR e.tenant_id = only_tenant)
) j (id, tenant_id, user_id, pinned, deletes, keeps)
WHERE cardinality(j.deletes) > 0
$$;
COMMENT ON FUNCTION episodes_prune_judge(jsonb, timestamptz, text) IS
    'The candidates a pruning policy selects, with the numbers of the delete clauses that select and the keep clauses that protect each.';

-- The verdict on one (locked) row: the same rule, checked again just before the erasure.
CREATE FUNCTION episodes_prune_deletable(e episodes, policy jsonb, at timestamptz) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
SELECT e.kind = 'session' AND e.status = 'current' AND episodes_may_prune(e)
   AND EXISTS (SELECT FROM jsonb_array_elements(policy) c
               WHERE c ->> 'action' = 'delete' AND episodes_policy_selects(e, c, at))
   AND NOT EXISTS (SELECT FROM jsonb_array_elements(policy) c
                   WHERE c ->> 'action' = 'keep' AND episodes_policy_selects(e, c, at))
$$;

-- A policy's erasures are audited like the user's own ("episode") and the operator's ("user"), with their own scope.
ALTER TABLE erasures DROP CONSTRAINT erasures_scope_check;
ALTER TABLE erasures ADD CONSTRAINT erasures_scope_check CHECK (scope IN ('user', 'episode', 'policy'));
