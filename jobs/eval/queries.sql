-- The evaluation's own queries (jobs.eval.queries), run only in its scratch database.

-- name: eval_user_messages
-- The canonical messages of one user's transcripts, oldest session first.
SELECT session_id, messages
FROM transcripts
WHERE tenant_id = %(tenant_id)s AND user_id = %(user_id)s
ORDER BY started_at, session_id;
