-- analyst.decisions: its query and its comments. The view analysts query, analyst.decisions, is made by
-- 90_scoped.sql over this internal one (read with the owner's rights, scoped to the caller's tenant) and
-- gets these comments. Every join includes tenant_id, so the query runs on a Citus cluster too.

CREATE VIEW analyst._decisions AS
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
JOIN episodes e ON e.tenant_id = ev.tenant_id AND e.id = ev.episode_id
LEFT JOIN episode_events nx ON nx.tenant_id = ev.tenant_id AND nx.id = ev.superseded_by
LEFT JOIN episodes ne ON ne.tenant_id = nx.tenant_id AND ne.id = nx.episode_id
WHERE ev.type = 'decision'
  AND e.kind = 'session' AND e.status = 'current';

COMMENT ON VIEW analyst._decisions IS
    'One row per decision in a current session episode (compressed ones included; super-summary copies '
    'excluded so nothing is counted twice). A later session may replace a decision: then current is false and '
    'superseded_by names the replacing event. Filter current for the decisions that still stand.';
COMMENT ON COLUMN analyst._decisions.tenant_id IS 'Tenant of the user.';
COMMENT ON COLUMN analyst._decisions.user_id IS 'The user whose session it was.';
COMMENT ON COLUMN analyst._decisions.decided_at IS
    'When it was decided: the timestamp of the first message cited as evidence, else the session end.';
COMMENT ON COLUMN analyst._decisions.what IS
    'The decision, one self-contained sentence written by the extractor.';
COMMENT ON COLUMN analyst._decisions.who IS 'Who decided: a name, or user / assistant.';
COMMENT ON COLUMN analyst._decisions.topic_tags IS
    'Topic tags of the episode the decision belongs to (up to 5).';
COMMENT ON COLUMN analyst._decisions.episode_id IS 'The episode (episodes.id) that recorded the decision.';
COMMENT ON COLUMN analyst._decisions.session_id IS 'The chat session the episode summarises.';
COMMENT ON COLUMN analyst._decisions.purpose IS 'Purpose of the session (support, sales, ...).';
COMMENT ON COLUMN analyst._decisions.evidence_quote IS
    'The start (up to 280 characters) of the first transcript message cited as evidence.';
COMMENT ON COLUMN analyst._decisions.evidence IS 'Indexes of the transcript messages the decision rests on.';
COMMENT ON COLUMN analyst._decisions.event_id IS 'episode_events.id of the decision.';
COMMENT ON COLUMN analyst._decisions.superseded_by IS
    'The later event (episode_events.id, a decision or preference) that replaced this decision; NULL while it '
    'stands. Follow it in this view (event_id) or in analyst.preferences for the chain.';
COMMENT ON COLUMN analyst._decisions.superseded_by_type IS
    'decision or preference: the type of the replacing event.';
COMMENT ON COLUMN analyst._decisions.superseded_at IS 'When the replacing event was stated (its decided_at).';
COMMENT ON COLUMN analyst._decisions.superseded_by_session_id IS 'The session that replaced this decision.';
COMMENT ON COLUMN analyst._decisions.current IS
    'True while no later session replaced it: the latest word of the user on that matter.';
