-- 0039: explicit groups of repositories that share memory (issue 49; docs/claude-code.md).
--
-- A Claude Code project is its git repository (purpose `cc-<name>-<16 hex>`, jobs/repository/identity.py) and
-- recall sees a project's own purpose (and `general`). A user may group repositories whose work belongs together
-- (a service and its client library): a session in any of them then recalls the episodes of all of them
-- (jobs/claude_code/groups.py). `episodes claude-code share | unshare | shared` write and read this table.
--
-- Per user: recall is per user, the choice is the user's (made on their machine, from their folders), and an
-- erasure removes the user's rows (jobs/rights/forget.py). A repository is in at most one group of a user; two
-- repositories not grouped never share. `repository` is what the command resolved (the normalised remote URL,
-- the repository's common folder, or a folder outside git), shown by `shared`; recall reads `purpose` only.

CREATE TABLE repository_groups (
    tenant_id  text NOT NULL,
    user_id    text NOT NULL,
    name       text NOT NULL CHECK (name ~ '^[a-z0-9][a-z0-9._-]{0,62}$'),
    purpose    text NOT NULL CHECK (length(purpose) BETWEEN 1 AND 64),
    repository text NOT NULL CHECK (length(repository) BETWEEN 1 AND 4096),
    added_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, user_id, purpose)
);
CREATE INDEX repository_groups_by_name ON repository_groups (tenant_id, user_id, name);
COMMENT ON TABLE repository_groups IS
    'Groups of repositories whose Claude Code sessions share memory, per user (issue 49): recall in one member '
    'sees the episodes of every member (`episodes claude-code share`).';

GRANT SELECT, INSERT, UPDATE, DELETE ON repository_groups TO episodes_app;
-- An erasure removes the branch states of repositories only the erased user worked in (jobs/rights/forget.py);
-- 0038 granted no DELETE on them.
GRANT DELETE ON repository_branches TO episodes_app;
DO $$
BEGIN
    -- Through EXECUTE, as 0032 and 0038 do (Citus sends an ALTER TABLE's query text on).
    EXECUTE 'ALTER TABLE repository_groups ENABLE ROW LEVEL SECURITY';
    -- On a Citus coordinator whose tables are distributed already, the new table joins them (co-located, as
    -- jobs/citus/cluster.py TENANT_TABLES lists it).
    IF EXISTS (SELECT FROM pg_extension WHERE extname = 'citus')
       AND EXISTS (SELECT FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
                   WHERE n.nspname = 'pg_catalog' AND c.relname = 'pg_dist_partition') THEN
        IF EXISTS (SELECT FROM pg_dist_partition WHERE logicalrelid = 'public.transcripts'::regclass) THEN
            PERFORM create_distributed_table('public.repository_groups', 'tenant_id', colocate_with => 'transcripts');
        END IF;
    END IF;
END
$$;
CREATE POLICY tenant_isolation ON repository_groups TO episodes_app
    USING (tenant_id = current_setting('episodes.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('episodes.tenant_id', true));
