-- The evaluation's own queries (jobs.eval.queries), run only in its scratch database.

-- name: eval_user_messages
-- The canonical messages of one user's transcripts, oldest session first, with when each session started.
SELECT session_id, started_at, messages
FROM transcripts
WHERE tenant_id = %(tenant_id)s AND user_id = %(user_id)s
ORDER BY started_at, session_id;

-- name: eval_user_episodes
-- The session episodes of one user (current ones), with the session each summarises.
SELECT id, session_id, ended_at
FROM episodes
WHERE tenant_id = %(tenant_id)s AND user_id = %(user_id)s AND kind = 'session' AND status = 'current';

-- name: eval_user_last_ended
-- When the user's latest transcript ended (the next session starts after it).
SELECT max(ended_at) AS ended_at
FROM transcripts
WHERE tenant_id = %(tenant_id)s AND user_id = %(user_id)s;

-- name: eval_compressed_sources
-- Which session each compressed episode summarised, by the super it was compressed into.
SELECT compressed_into AS super_id, session_id
FROM episodes
WHERE tenant_id = %(tenant_id)s AND compressed_into IS NOT NULL AND session_id IS NOT NULL;
