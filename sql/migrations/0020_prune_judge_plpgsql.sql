-- 0020: the pruning policy's functions (0012, 0015) in a form a Citus cluster runs.
--
-- * On a coordinator a LANGUAGE sql function whose parameters reach a query of a distributed table
--   cannot be planned ("parameterized queries for SQL functions referencing distributed tables are not
--   supported"): episodes_prune_judge is now PL/pgSQL, whose RETURN QUERY hands Citus the values.
-- * A function of the whole row (episodes_may_prune(e episodes), ...) cannot run on a worker, where
--   the row is of the shard's type (episodes_102016): each rule now has a form over the columns it
--   reads, which the queries use; the row forms stay (one PostgreSQL, operators' own policies) and
--   call them, so there is one rule.
-- Same rows, same rights (the caller's: row-level security applies).

CREATE FUNCTION episodes_may_prune(pinned_at timestamptz) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT pinned_at IS NULL $$;
CREATE OR REPLACE FUNCTION episodes_may_prune(e episodes) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT episodes_may_prune(e.pinned_at) $$;

CREATE FUNCTION episodes_policy_selects(ended_at timestamptz, importance real, clause jsonb, at timestamptz)
RETURNS boolean LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
SELECT (NOT clause ? 'newer_than' OR ended_at > at - make_interval(secs => (clause ->> 'newer_than')::float8))
   AND (NOT clause ? 'older_than' OR ended_at <= at - make_interval(secs => (clause ->> 'older_than')::float8))
   AND (NOT clause ? 'importance' OR CASE clause ->> 'op'
            WHEN '<' THEN importance < (clause ->> 'importance')::real
            WHEN '<=' THEN importance <= (clause ->> 'importance')::real
            WHEN '>' THEN importance > (clause ->> 'importance')::real
            WHEN '>=' THEN importance >= (clause ->> 'importance')::real
        END)
$$;
CREATE OR REPLACE FUNCTION episodes_policy_selects(e episodes, clause jsonb, at timestamptz) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT episodes_policy_selects(e.ended_at, e.importance, clause, at) $$;

CREATE FUNCTION episodes_prune_deletable(kind text, status text, pinned_at timestamptz, ended_at timestamptz,
                                         importance real, policy jsonb, at timestamptz) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
SELECT kind = 'session' AND status = 'current' AND episodes_may_prune(pinned_at)
   AND EXISTS (SELECT FROM jsonb_array_elements(policy) c
               WHERE c ->> 'action' = 'delete' AND episodes_policy_selects(ended_at, importance, c, at))
   AND NOT EXISTS (SELECT FROM jsonb_array_elements(policy) c
                   WHERE c ->> 'action' = 'keep' AND episodes_policy_selects(ended_at, importance, c, at))
$$;
CREATE OR REPLACE FUNCTION episodes_prune_deletable(e episodes, policy jsonb, at timestamptz) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT episodes_prune_deletable(e.kind, e.status, e.pinned_at, e.ended_at, e.importance, policy, at) $$;

CREATE OR REPLACE FUNCTION episodes_prune_judge(policy jsonb, at timestamptz, only_tenant text)
RETURNS TABLE (episode_id bigint, tenant_id text, user_id text, pinned boolean, deletes int[], keeps int[])
LANGUAGE plpgsql STABLE
AS $$
BEGIN
    RETURN QUERY
    SELECT j.* FROM (
        SELECT e.id, e.tenant_id, e.user_id, NOT episodes_may_prune(e.pinned_at),
               ARRAY(SELECT (c ->> 'n')::int FROM jsonb_array_elements(policy) c
                     WHERE c ->> 'action' = 'delete' AND episodes_policy_selects(e.ended_at, e.importance, c, at)
                     ORDER BY 1),
               ARRAY(SELECT (c ->> 'n')::int FROM jsonb_array_elements(policy) c
                     WHERE c ->> 'action' = 'keep' AND episodes_policy_selects(e.ended_at, e.importance, c, at)
                     ORDER BY 1)
        FROM episodes e
        WHERE e.kind = 'session' AND e.status = 'current' AND (only_tenant IS NULL OR e.tenant_id = only_tenant)
    ) j (id, tenant_id, user_id, pinned, deletes, keeps)
    WHERE cardinality(j.deletes) > 0;
END
$$;
COMMENT ON FUNCTION episodes_prune_judge(jsonb, timestamptz, text) IS
    'The candidates a pruning policy selects, with the numbers of the delete clauses that select and the keep clauses that protect each.';
