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
