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
