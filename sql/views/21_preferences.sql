-- analyst.preferences: its query and its comments. The view analysts query, analyst.preferences, is made by
-- 90_scoped.sql over this internal one (read with the owner's rights, scoped to the caller's tenant) and
-- gets these comments. Every join includes tenant_id, so the query runs on a Citus cluster too.

CREATE VIEW analyst._preferences AS
SELECT ev.tenant_id,
       ev.user_id,
       ev.occurred_at AS stated_at,
       ev.what,
       ev.who,
       e.topic_tags,
       ev.episode_id,
       e.session_id,
       e.purpose,
       ev.evidence_quote,
       ev.evidence,
       ev.id AS event_id,
       ev.superseded_by,
       nx.type AS superseded_by_type,
       nx.occurred_at AS superseded_at,
       ne.session_id AS superseded_by_session_id,
       ev.superseded_by IS NULL AS current
FROM episode_events ev
JOIN episodes e ON e.tenant_id = ev.tenant_id AND e.id = ev.episode_id
LEFT JOIN episode_events nx ON nx.tenant_id = ev.tenant_id AND nx.id = ev.superseded_by
LEFT JOIN episodes ne ON ne.tenant_id = nx.tenant_id AND ne.id = nx.episode_id
WHERE ev.type = 'preference'
  AND e.kind = 'session' AND e.status = 'current';

COMMENT ON VIEW analyst._preferences IS
    'One row per preference ("I prefer metric units") in a current session episode, with the same later-wins '
    'chain as analyst.decisions. Filter current for the preferences that still stand.';
COMMENT ON COLUMN analyst._preferences.tenant_id IS 'Tenant of the user.';
COMMENT ON COLUMN analyst._preferences.user_id IS 'The user whose session it was.';
COMMENT ON COLUMN analyst._preferences.stated_at IS
    'When it was stated: the timestamp of the first message cited as evidence, else the session end.';
COMMENT ON COLUMN analyst._preferences.what IS
    'The preference, one self-contained sentence written by the extractor.';
COMMENT ON COLUMN analyst._preferences.who IS 'Whose preference: a name, or user.';
COMMENT ON COLUMN analyst._preferences.topic_tags IS 'Topic tags of the episode it belongs to (up to 5).';
COMMENT ON COLUMN analyst._preferences.episode_id IS 'The episode (episodes.id) that recorded it.';
COMMENT ON COLUMN analyst._preferences.session_id IS 'The chat session the episode summarises.';
COMMENT ON COLUMN analyst._preferences.purpose IS 'Purpose of the session (support, sales, ...).';
COMMENT ON COLUMN analyst._preferences.evidence_quote IS
    'The start (up to 280 characters) of the first transcript message cited as evidence.';
COMMENT ON COLUMN analyst._preferences.evidence IS 'Indexes of the transcript messages it rests on.';
COMMENT ON COLUMN analyst._preferences.event_id IS 'episode_events.id of the preference.';
COMMENT ON COLUMN analyst._preferences.superseded_by IS
    'The later event (episode_events.id, a preference or decision) that replaced it; NULL while it stands.';
COMMENT ON COLUMN analyst._preferences.superseded_by_type IS
    'preference or decision: the type of the replacing event.';
COMMENT ON COLUMN analyst._preferences.superseded_at IS 'When the replacing event was stated.';
COMMENT ON COLUMN analyst._preferences.superseded_by_session_id IS 'The session that replaced it.';
COMMENT ON COLUMN analyst._preferences.current IS 'True while no later session replaced it.';
