-- 0038: the state of a repository's branches, as Claude Code sessions last saw it (issue 49; docs/analyst.md).
--
-- A project is its git repository (purpose `cc-<name>-<16 hex>`, jobs/repository/identity.py) and each
-- session keeps where it ended in git (transcripts.metadata: git_branch, git_head; no schema change). Which
-- branches are merged, still open or deleted unmerged is known only to git on the user's machine: the local
-- SessionStart hook works it out for the branches of the sessions it recalls (jobs/repository/ancestry.py)
-- and records it here, so analysts can sort decisions by branch state (analyst.decisions_by_branch).
--
-- One row per (tenant, repository purpose, branch): `merged` (its sessions' commits are in the history of
-- the branch it was seen from), `open` (not merged there: its decisions are pending), `deleted` (gone
-- without being merged: stale). Rewritten only when the state changes. No user's words: branch names only.

CREATE TABLE repository_branches (
    tenant_id text NOT NULL,
    purpose   text NOT NULL CHECK (length(purpose) BETWEEN 1 AND 64),
    branch    text NOT NULL CHECK (length(branch) BETWEEN 1 AND 255),
    state     text NOT NULL CHECK (state IN ('merged', 'open', 'deleted')),
    seen_from text CHECK (length(seen_from) <= 255),
    seen_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, purpose, branch)
);
COMMENT ON TABLE repository_branches IS
    'The state of a repository''s branches as the last Claude Code session start saw it (issue 49): merged into '
    'the branch seen_from, open (not merged: its sessions'' decisions are pending) or deleted unmerged (stale).';

GRANT SELECT, INSERT, UPDATE ON repository_branches TO episodes_app;
DO $$
BEGIN
    -- Through EXECUTE, as 0032 does: on a cluster already distributed, Citus sends an ALTER TABLE's query text
    -- on, and as a statement of this file that text would be the whole file.
    EXECUTE 'ALTER TABLE repository_branches ENABLE ROW LEVEL SECURITY';
    -- On a Citus coordinator whose tables are distributed already, the new table joins them (co-located, as
    -- jobs/citus/cluster.py TENANT_TABLES lists it).
    IF EXISTS (SELECT FROM pg_extension WHERE extname = 'citus')
       AND EXISTS (SELECT FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
                   WHERE n.nspname = 'pg_catalog' AND c.relname = 'pg_dist_partition') THEN
        IF EXISTS (SELECT FROM pg_dist_partition WHERE logicalrelid = 'public.transcripts'::regclass) THEN
            PERFORM create_distributed_table('public.repository_branches', 'tenant_id', colocate_with => 'transcripts');
        END IF;
    END IF;
END
$$;
CREATE POLICY tenant_isolation ON repository_branches TO episodes_app
    USING (tenant_id = current_setting('episodes.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('episodes.tenant_id', true));
