-- 0008: later decisions replace earlier ones; preferences follow the same rule.
--
-- A decision or preference stands until a later session of the same user replaces it: the
-- summarize job offers the user's current ones to the model (<current_decisions>), and an event
-- that names one in `replaces` (grounded: offered, with evidence, same user) marks the old event
-- `superseded_by` the new one. If the replacing episode is itself superseded (a re-run of its
-- session), the mark is undone and the re-run may replace again. Existing rows are all current.

INSERT INTO event_types (name, description) VALUES
    ('preference', 'A lasting like, dislike or way the user wants things done; a later one replaces it.')
ON CONFLICT (name) DO NOTHING;

ALTER TABLE episode_events
    ADD COLUMN superseded_by bigint REFERENCES episode_events (id) ON DELETE SET NULL;
COMMENT ON COLUMN episode_events.superseded_by IS
    'Decisions and preferences: the later event (episode_events.id) that replaced this one; NULL while current.';
CREATE INDEX episode_events_superseded_by_idx ON episode_events (superseded_by) WHERE superseded_by IS NOT NULL;
CREATE INDEX episode_events_standing_idx ON episode_events (tenant_id, user_id, occurred_at DESC)
    WHERE type IN ('decision', 'preference') AND superseded_by IS NULL;

-- A Message Batch request offers the current decisions like a live call; the ids offered are kept
-- with the item, so the answer may replace exactly those (grounding).
ALTER TABLE model_batch_items ADD COLUMN offered_decisions bigint[] NOT NULL DEFAULT '{}';

-- analyst.decisions: the same rows as before (decisions of current session episodes), with the
-- chain appended. CREATE OR REPLACE keeps the grants and the comments of the existing columns.
CREATE OR REPLACE VIEW analyst.decisions WITH (security_barrier = true) AS
SELECT ev.tenant_id,
       ev.user_id,
       ev.occurred_at AS decided_at,
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
JOIN episodes e ON e.id = ev.episode_id
LEFT JOIN episode_events nx ON nx.id = ev.superseded_by
LEFT JOIN episodes ne ON ne.id = nx.episode_id
WHERE ev.type = 'decision'
  AND e.kind = 'session' AND e.status = 'current'
  AND analyst.visible_tenant(ev.tenant_id);
COMMENT ON VIEW analyst.decisions IS
    'One row per decision in a current session episode (compressed ones included; super-summary '
    'copies excluded so nothing is counted twice). A later session may replace a decision: then '
    'current is false and superseded_by names the replacing event. Filter current for the decisions '
    'that still stand.';
COMMENT ON COLUMN analyst.decisions.superseded_by IS
    'The later event (episode_events.id, a decision or preference) that replaced this decision; '
    'NULL while it stands. Follow it in this view (event_id) or in analyst.preferences for the chain.';
COMMENT ON COLUMN analyst.decisions.superseded_by_type IS 'decision or preference: the type of the replacing event.';
COMMENT ON COLUMN analyst.decisions.superseded_at IS 'When the replacing event was stated (its decided_at).';
COMMENT ON COLUMN analyst.decisions.superseded_by_session_id IS 'The session that replaced this decision.';
COMMENT ON COLUMN analyst.decisions.current IS
    'True while no later session replaced it: the latest word of the user on that matter.';

-- analyst.preferences: the same shape for the preference event type.
CREATE VIEW analyst.preferences WITH (security_barrier = true) AS
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
JOIN episodes e ON e.id = ev.episode_id
LEFT JOIN episode_events nx ON nx.id = ev.superseded_by
LEFT JOIN episodes ne ON ne.id = nx.episode_id
WHERE ev.type = 'preference'
  AND e.kind = 'session' AND e.status = 'current'
  AND analyst.visible_tenant(ev.tenant_id);
COMMENT ON VIEW analyst.preferences IS
    'One row per preference ("I prefer metric units") in a current session episode, with the same '
    'later-wins chain as analyst.decisions. Filter current for the preferences that still stand.';
COMMENT ON COLUMN analyst.preferences.tenant_id IS 'Tenant of the user.';
COMMENT ON COLUMN analyst.preferences.user_id IS 'The user whose session it was.';
COMMENT ON COLUMN analyst.preferences.stated_at IS
    'When it was stated: the timestamp of the first message cited as evidence, else the session end.';
COMMENT ON COLUMN analyst.preferences.what IS 'The preference, one self-contained sentence written by the extractor.';
COMMENT ON COLUMN analyst.preferences.who IS 'Whose preference: a name, or user.';
COMMENT ON COLUMN analyst.preferences.topic_tags IS 'Topic tags of the episode it belongs to (up to 5).';
COMMENT ON COLUMN analyst.preferences.episode_id IS 'The episode (episodes.id) that recorded it.';
COMMENT ON COLUMN analyst.preferences.session_id IS 'The chat session the episode summarises.';
COMMENT ON COLUMN analyst.preferences.purpose IS 'Purpose of the session (support, sales, ...).';
COMMENT ON COLUMN analyst.preferences.evidence_quote IS
    'The start (up to 280 characters) of the first transcript message cited as evidence.';
COMMENT ON COLUMN analyst.preferences.evidence IS 'Indexes of the transcript messages it rests on.';
COMMENT ON COLUMN analyst.preferences.event_id IS 'episode_events.id of the preference.';
COMMENT ON COLUMN analyst.preferences.superseded_by IS
    'The later event (episode_events.id, a preference or decision) that replaced it; NULL while it stands.';
COMMENT ON COLUMN analyst.preferences.superseded_by_type IS 'preference or decision: the type of the replacing event.';
COMMENT ON COLUMN analyst.preferences.superseded_at IS 'When the replacing event was stated.';
COMMENT ON COLUMN analyst.preferences.superseded_by_session_id IS 'The session that replaced it.';
COMMENT ON COLUMN analyst.preferences.current IS 'True while no later session replaced it.';
GRANT SELECT ON analyst.preferences TO episodes_analyst;
