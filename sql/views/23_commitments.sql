-- analyst.commitments: its query and its comments. The view analysts query, analyst.commitments, is made by
-- 90_scoped.sql over this internal one (read with the owner's rights, scoped to the caller's tenant) and
-- gets these comments. Every join includes tenant_id, so the query runs on a Citus cluster too.

CREATE VIEW analyst._commitments AS
SELECT ev.tenant_id,
       ev.user_id,
       ev.what,
       ev.who AS committed_by,
       ev.occurred_at AS committed_at,
       ev.due,
       CASE
           WHEN r.status IN ('done', 'resolved') THEN 'done'
           WHEN ev.due < (now() AT TIME ZONE 'UTC')::date THEN 'overdue'
           ELSE 'open'
       END AS status,
       CASE
           WHEN r.status IN ('done', 'resolved') OR ev.due IS NULL THEN NULL
           ELSE greatest((now() AT TIME ZONE 'UTC')::date - ev.due, 0)
       END AS days_overdue,
       r.resolved_at AS done_at,
       r.resolved_by AS done_by,
       rb.session_id AS done_by_session_id,
       e.topic_tags,
       ev.episode_id,
       e.session_id,
       e.purpose,
       ev.evidence_quote,
       ev.id AS event_id,
       (r.status NOT IN ('done', 'resolved') AND episodes_item_stale(ev.due, ev.occurred_at, now(), analyst.stale_grace(), analyst.stale_age())) AS stale
FROM episode_events ev
JOIN episodes e ON e.tenant_id = ev.tenant_id AND e.id = ev.episode_id
JOIN analyst._event_resolution r ON r.tenant_id = ev.tenant_id AND r.event_id = ev.id
LEFT JOIN episodes rb ON rb.tenant_id = ev.tenant_id AND rb.id = r.resolved_by
WHERE ev.type = 'commitment'
  AND e.kind = 'session' AND e.status = 'current';

COMMENT ON VIEW analyst._commitments IS
    'Every commitment (a promise to do something later) in a current session episode, with its due date and a '
    'status computed when queried: done, overdue (open and its due date has passed, UTC), or open.';
COMMENT ON COLUMN analyst._commitments.tenant_id IS 'Tenant of the user.';
COMMENT ON COLUMN analyst._commitments.user_id IS 'The user whose session it was.';
COMMENT ON COLUMN analyst._commitments.what IS 'What was promised, as the extractor recorded it.';
COMMENT ON COLUMN analyst._commitments.committed_by IS 'Who promised: a name, or user / assistant.';
COMMENT ON COLUMN analyst._commitments.committed_at IS
    'When it was promised (first evidence message, else session end).';
COMMENT ON COLUMN analyst._commitments.due IS
    'Due date resolved against the session date; NULL when none was given.';
COMMENT ON COLUMN analyst._commitments.status IS
    'done (a later episode recorded it as fulfilled), overdue (not done and due before today, UTC), else open.'
    ' Without a due date an unfulfilled commitment stays open.';
COMMENT ON COLUMN analyst._commitments.days_overdue IS
    'Days past the due date (0 before it); NULL when done or without a due date.';
COMMENT ON COLUMN analyst._commitments.done_at IS
    'When a later session recorded it as fulfilled (that session''s time, not necessarily when it was done).';
COMMENT ON COLUMN analyst._commitments.done_by IS 'The episode (episodes.id) that recorded it as fulfilled.';
COMMENT ON COLUMN analyst._commitments.done_by_session_id IS 'Session id of that episode.';
COMMENT ON COLUMN analyst._commitments.topic_tags IS 'Topic tags of the episode that recorded the promise.';
COMMENT ON COLUMN analyst._commitments.episode_id IS 'The episode that recorded the promise.';
COMMENT ON COLUMN analyst._commitments.session_id IS 'The session of that episode.';
COMMENT ON COLUMN analyst._commitments.purpose IS 'Purpose of that session.';
COMMENT ON COLUMN analyst._commitments.evidence_quote IS 'Start of the first message cited as evidence.';
COMMENT ON COLUMN analyst._commitments.event_id IS 'episode_events.id of the commitment.';
COMMENT ON COLUMN analyst._commitments.stale IS
    'Not done and due more than episodes.stale_grace (30 days) ago, or without a due date and made more than '
    'episodes.stale_age (180 days) ago: recall lists it only when related to the opening message. False once '
    'done.';
