-- analyst.open_questions: its query and its comments. The view analysts query, analyst.open_questions, is made by
-- 90_scoped.sql over this internal one (read with the owner's rights, scoped to the caller's tenant) and
-- gets these comments. Every join includes tenant_id, so the query runs on a Citus cluster too.

CREATE VIEW analyst._open_questions AS
SELECT ev.tenant_id,
       ev.user_id,
       ev.what AS question,
       ev.who AS asked_by,
       ev.occurred_at AS raised_at,
       r.status,
       r.resolved_at,
       r.resolved_by,
       rb.session_id AS resolved_by_session_id,
       floor(extract(epoch FROM coalesce(r.resolved_at, now()) - ev.occurred_at) / 86400)::integer AS days_open,
       e.topic_tags,
       ev.episode_id,
       e.session_id,
       e.purpose,
       ev.evidence_quote,
       ev.id AS event_id,
       (r.status = 'open' AND episodes_item_stale(ev.due, ev.occurred_at, now(), analyst.stale_grace(), analyst.stale_age())) AS stale
FROM episode_events ev
JOIN episodes e ON e.tenant_id = ev.tenant_id AND e.id = ev.episode_id
JOIN analyst._event_resolution r ON r.tenant_id = ev.tenant_id AND r.event_id = ev.id
LEFT JOIN episodes rb ON rb.tenant_id = ev.tenant_id AND rb.id = r.resolved_by
WHERE ev.type = 'open_question'
  AND e.kind = 'session' AND e.status = 'current';

COMMENT ON VIEW analyst._open_questions IS
    'Every question raised in a current session episode and left unanswered in that session, with whether and '
    'when a later episode resolved it. Filter status = ''open'' for the ones still open.';
COMMENT ON COLUMN analyst._open_questions.tenant_id IS 'Tenant of the user.';
COMMENT ON COLUMN analyst._open_questions.user_id IS 'The user whose session it was.';
COMMENT ON COLUMN analyst._open_questions.question IS 'The question, as the extractor recorded it.';
COMMENT ON COLUMN analyst._open_questions.asked_by IS 'Who asked: a name, or user / assistant.';
COMMENT ON COLUMN analyst._open_questions.raised_at IS
    'When it was asked: the first evidence message''s timestamp, else the session end.';
COMMENT ON COLUMN analyst._open_questions.status IS
    'open, or resolved once a later episode answered it (its own row or its copy in a super-summary).';
COMMENT ON COLUMN analyst._open_questions.resolved_at IS 'When a later session answered it; NULL while open.';
COMMENT ON COLUMN analyst._open_questions.resolved_by IS
    'The episode (episodes.id) that answered it; it may since have been superseded by a re-run of the same '
    'session (resolved_by_session_id stays valid).';
COMMENT ON COLUMN analyst._open_questions.resolved_by_session_id IS
    'Session id of the episode that answered it.';
COMMENT ON COLUMN analyst._open_questions.days_open IS
    'Whole days from raised_at until resolved_at, or until now() while it is open.';
COMMENT ON COLUMN analyst._open_questions.topic_tags IS 'Topic tags of the episode that raised it.';
COMMENT ON COLUMN analyst._open_questions.episode_id IS 'The episode that raised it.';
COMMENT ON COLUMN analyst._open_questions.session_id IS 'The session that raised it.';
COMMENT ON COLUMN analyst._open_questions.purpose IS 'Purpose of that session.';
COMMENT ON COLUMN analyst._open_questions.evidence_quote IS 'Start of the first message cited as evidence.';
COMMENT ON COLUMN analyst._open_questions.event_id IS 'episode_events.id of the question.';
COMMENT ON COLUMN analyst._open_questions.stale IS
    'Open and raised more than episodes.stale_age (180 days) ago: recall lists it only when related to the '
    'opening message. False once resolved.';
