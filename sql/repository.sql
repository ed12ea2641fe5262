-- Memory follows the git repository (issue 49; jobs/repository). Named queries, as sql/queries.sql.

-- name: rescope_projects
-- The Claude Code projects a tenant's transcripts were stored under: each purpose and the project path
-- (the session's cwd, metadata.project) it was computed from, with how many transcripts.
SELECT purpose, metadata->>'project' AS project, count(*) AS transcripts
FROM transcripts
WHERE tenant_id = %(tenant_id)s AND agent_id = 'claude-code' AND starts_with(purpose, 'cc-')
  AND metadata->>'project' IS NOT NULL
GROUP BY purpose, metadata->>'project'
ORDER BY purpose, metadata->>'project';

-- name: rescope_rows
-- The transcripts of one purpose, with what their content hash is computed from (jobs.models.TranscriptIn).
SELECT id, user_id, session_id, agent_id, purpose, started_at, ended_at, messages, metadata, content_hash
FROM transcripts
WHERE tenant_id = %(tenant_id)s AND purpose = %(old)s
ORDER BY id;

-- name: rescope_transcript
UPDATE transcripts SET purpose = %(new)s, content_hash = %(content_hash)s
WHERE tenant_id = %(tenant_id)s AND id = %(id)s AND purpose = %(old)s;

-- name: rescope_episodes
-- Every episode of the moved purpose (those of its transcripts, and super-summaries or orphans of it).
UPDATE episodes SET purpose = %(new)s
WHERE tenant_id = %(tenant_id)s AND purpose = %(old)s;

-- name: rescope_count_episodes
SELECT count(*) AS n FROM episodes WHERE tenant_id = %(tenant_id)s AND purpose = %(old)s;

-- name: branch_origins
-- Where the sessions of these episodes happened in git (metadata the hooks record, migration 0025; issue 49).
SELECT e.id AS episode_id, t.metadata->>'git_repo' AS repo, t.metadata->>'git_branch' AS branch,
       t.metadata->>'git_head' AS head
FROM episodes e
JOIN transcripts t ON t.tenant_id = e.tenant_id AND t.id = e.transcript_id
WHERE e.tenant_id = %(tenant_id)s AND t.tenant_id = %(tenant_id)s AND e.id = ANY (%(ids)s::bigint[]);

-- name: branch_replacers
-- For these episodes, each later episode holding a decision or preference that replaced one of theirs
-- (later wins, migration 0008; sql/recall.sql recall_replaced), with when it was made.
SELECT old.episode_id AS replaced, new.episode_id AS replacer, new.occurred_at
FROM episode_events old
JOIN episode_events new ON new.tenant_id = old.tenant_id AND new.id = old.superseded_by
WHERE old.tenant_id = %(tenant_id)s AND new.tenant_id = %(tenant_id)s
  AND old.episode_id = ANY (%(ids)s::bigint[]) AND old.superseded_by IS NOT NULL;

-- name: branch_close_stale
-- The open questions and commitments of sessions whose branch was deleted without being merged: closed
-- as no longer applicable (status n/a), as the open-items lifecycle closes what no longer holds.
UPDATE episode_events SET status = 'n/a', resolved_at = now()
WHERE tenant_id = %(tenant_id)s AND episode_id = ANY (%(ids)s::bigint[])
  AND type IN ('open_question', 'commitment') AND status = 'open'
RETURNING id;

-- name: branch_state_upsert
-- A branch's state as a session start saw it (migration 0038); rewritten only when it changed.
INSERT INTO repository_branches (tenant_id, purpose, branch, state, seen_from)
VALUES (%(tenant_id)s, %(purpose)s, %(branch)s, %(state)s, %(seen_from)s)
ON CONFLICT (tenant_id, purpose, branch) DO UPDATE
SET state = EXCLUDED.state, seen_from = EXCLUDED.seen_from, seen_at = EXCLUDED.seen_at
WHERE repository_branches.state IS DISTINCT FROM EXCLUDED.state
   OR repository_branches.seen_from IS DISTINCT FROM EXCLUDED.seen_from;

-- name: branch_states_of
-- The branch states local session starts recorded for these repositories (migration 0038).
SELECT branch, state FROM repository_branches
WHERE tenant_id = %(tenant_id)s AND purpose = ANY (%(purposes)s::text[]);

-- name: purpose_of_folder
-- The purpose the user's latest Claude Code session in this folder was stored under (its hook computed it where
-- the folder is: the repository's, or the folder's own), for a remote hook naming a folder not on this machine.
SELECT purpose FROM transcripts
WHERE tenant_id = %(tenant_id)s AND user_id = %(user_id)s AND agent_id = 'claude-code'
  AND metadata->>'project' = %(folder)s
ORDER BY ended_at DESC NULLS LAST, id DESC
LIMIT 1;

-- name: group_purposes
-- The purposes of every repository in the group of this purpose, for this user (migration 0039): what a recall
-- in that repository may see besides its own (jobs/claude_code/groups.py). None when the purpose is in no group.
SELECT g.purpose
FROM repository_groups mine
JOIN repository_groups g ON g.tenant_id = mine.tenant_id AND g.user_id = mine.user_id AND g.name = mine.name
WHERE mine.tenant_id = %(tenant_id)s AND g.tenant_id = %(tenant_id)s
  AND mine.user_id = %(user_id)s AND mine.purpose = %(purpose)s
ORDER BY g.purpose;

-- name: groups_of_user
-- The user's groups, each member with the repository it was resolved from (`episodes claude-code shared`).
SELECT name, purpose, repository, added_at FROM repository_groups
WHERE tenant_id = %(tenant_id)s AND user_id = %(user_id)s
ORDER BY name, repository, purpose;

-- name: group_add
-- A repository joins a group (a repository in another group of the user is refused before this, in Python).
INSERT INTO repository_groups (tenant_id, user_id, name, purpose, repository)
VALUES (%(tenant_id)s, %(user_id)s, %(name)s, %(purpose)s, %(repository)s)
ON CONFLICT (tenant_id, user_id, purpose) DO NOTHING;

-- name: group_remove
-- Repositories leave their group (by purpose), or a whole group goes (by name).
DELETE FROM repository_groups
WHERE tenant_id = %(tenant_id)s AND user_id = %(user_id)s
  AND (purpose = ANY (%(purposes)s::text[]) OR name = %(name)s)
RETURNING name, purpose, repository;

-- name: group_drop_singles
-- A group left with one repository shares nothing: its last row goes too.
DELETE FROM repository_groups g
WHERE g.tenant_id = %(tenant_id)s AND g.user_id = %(user_id)s AND g.name = ANY (%(names)s::text[])
  AND NOT EXISTS (SELECT FROM repository_groups o
                  WHERE o.tenant_id = %(tenant_id)s AND o.user_id = %(user_id)s AND o.name = g.name
                    AND o.purpose <> g.purpose)
RETURNING name, purpose, repository;

-- name: forget_user_purposes
-- The Claude Code purposes (repositories, folders) of the user being erased, read before their rows go.
SELECT purpose FROM transcripts
WHERE tenant_id = %(tenant_id)s AND user_id = %(user_id)s AND starts_with(purpose, 'cc-')
UNION
SELECT purpose FROM episodes
WHERE tenant_id = %(tenant_id)s AND user_id = %(user_id)s AND starts_with(purpose, 'cc-');

-- name: forget_repository_branches
-- The branch states (migration 0038, per repository, not per user) of repositories only the erased user worked
-- in: no other user's transcript or episode has their purpose. A repository others share keeps its rows: they
-- are the repository's, and other users' recall sorts by them.
DELETE FROM repository_branches b
WHERE b.tenant_id = %(tenant_id)s AND b.purpose = ANY (%(purposes)s::text[])
  AND NOT EXISTS (SELECT FROM transcripts t
                  WHERE t.tenant_id = %(tenant_id)s AND t.purpose = b.purpose AND t.user_id <> %(user_id)s)
  AND NOT EXISTS (SELECT FROM episodes e
                  WHERE e.tenant_id = %(tenant_id)s AND e.purpose = b.purpose AND e.user_id <> %(user_id)s);

-- name: forget_repository_groups
-- The user's groups of repositories (migration 0039, per user).
DELETE FROM repository_groups WHERE tenant_id = %(tenant_id)s AND user_id = %(user_id)s;
