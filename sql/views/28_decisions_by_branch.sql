-- analyst.decisions_by_branch: its query and its comments (issue 49). The view analysts query,
-- analyst.decisions_by_branch, is made by 90_scoped.sql over this internal one. Every join includes tenant_id,
-- so the query runs on a Citus cluster too.

CREATE VIEW analyst._decisions_by_branch AS
SELECT ev.tenant_id,
       ev.user_id,
       e.purpose AS repository,
       t.metadata->>'git_branch' AS branch,
       CASE
           WHEN t.metadata->>'git_branch' IS NULL THEN 'outside git'
           WHEN rb.state = 'open' THEN 'pending'
           WHEN rb.state = 'deleted' THEN 'stale'
           ELSE 'in force'
       END AS branch_state,
       rb.state AS branch_seen_as,
       rb.seen_from,
       rb.seen_at,
       t.metadata->>'git_head' AS head_commit,
       ev.occurred_at AS decided_at,
       ev.what,
       ev.superseded_by IS NULL AS current,
       ev.episode_id,
       e.session_id,
       ev.id AS event_id
FROM episode_events ev
JOIN episodes e ON e.tenant_id = ev.tenant_id AND e.id = ev.episode_id
JOIN transcripts t ON t.tenant_id = e.tenant_id AND t.id = e.transcript_id
LEFT JOIN repository_branches rb
       ON rb.tenant_id = e.tenant_id AND rb.purpose = e.purpose AND rb.branch = t.metadata->>'git_branch'
WHERE ev.type = 'decision'
  AND e.kind = 'session' AND e.status = 'current';

COMMENT ON VIEW analyst._decisions_by_branch IS
    'Every decision, with the state of the git branch it was made on as the last Claude Code session start saw '
    'it: in force (merged, or the branch sessions start from), pending (not merged), stale (deleted without being '
    'merged), or outside git (a session that recorded no branch: another host, or a folder outside git).';
COMMENT ON COLUMN analyst._decisions_by_branch.tenant_id IS 'Tenant of the user.';
COMMENT ON COLUMN analyst._decisions_by_branch.user_id IS 'The user whose session it was.';
COMMENT ON COLUMN analyst._decisions_by_branch.repository IS
    'The purpose: for a git repository cc-<name>-<16 hex>, one per repository, shared by its worktrees and clones.';
COMMENT ON COLUMN analyst._decisions_by_branch.branch IS 'The branch the session ended on (transcripts.metadata).';
COMMENT ON COLUMN analyst._decisions_by_branch.branch_state IS
    'in force (merged where it was seen from, or never seen unmerged: the branch sessions start from), pending '
    '(not merged), stale (deleted without being merged), outside git (no branch recorded).';
COMMENT ON COLUMN analyst._decisions_by_branch.branch_seen_as IS
    'merged, open or deleted as repository_branches recorded it; NULL when no session start judged the branch.';
COMMENT ON COLUMN analyst._decisions_by_branch.seen_from IS 'The branch of the session start that judged it.';
COMMENT ON COLUMN analyst._decisions_by_branch.seen_at IS 'When its state was last seen to change.';
COMMENT ON COLUMN analyst._decisions_by_branch.head_commit IS
    'The HEAD commit when the session ended (NULL when no SessionEnd hook recorded it).';
COMMENT ON COLUMN analyst._decisions_by_branch.decided_at IS 'When it was decided.';
COMMENT ON COLUMN analyst._decisions_by_branch.what IS 'The decision, as the extractor recorded it.';
COMMENT ON COLUMN analyst._decisions_by_branch.current IS 'False once a later decision replaced it.';
COMMENT ON COLUMN analyst._decisions_by_branch.episode_id IS 'The episode holding it.';
COMMENT ON COLUMN analyst._decisions_by_branch.session_id IS 'The session it was made in.';
COMMENT ON COLUMN analyst._decisions_by_branch.event_id IS 'The decision''s id (episode_events.id).';
