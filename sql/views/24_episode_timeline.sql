-- analyst.episode_timeline: its query and its comments. The view analysts query, analyst.episode_timeline, is made by
-- 90_scoped.sql over this internal one (read with the owner's rights, scoped to the caller's tenant) and
-- gets these comments. Every join includes tenant_id, so the query runs on a Citus cluster too.

CREATE VIEW analyst._episode_timeline AS
SELECT e.tenant_id,
       e.user_id,
       e.id AS episode_id,
       e.kind,
       e.session_id,
       e.purpose,
       e.started_at,
       e.ended_at,
       date_trunc('week', e.ended_at AT TIME ZONE 'UTC')::date AS week,
       e.summary,
       e.topic_tags,
       e.importance,
       coalesce(ev.decisions, 0) AS decisions,
       coalesce(ev.open_questions, 0) AS open_questions,
       coalesce(ev.commitments, 0) AS commitments,
       coalesce(ev.surprises, 0) AS surprises,
       coalesce(en.entities, 0) AS entities,
       e.compressed_into,
       e.period_start,
       e.period_end,
       e.model,
       e.prompt_version,
       e.input_tokens,
       e.output_tokens,
       e.cost_usd,
       e.created_at,
       e.pinned_at IS NOT NULL AS pinned,
       e.pinned_at
FROM episodes e
LEFT JOIN (
    SELECT tenant_id,
           episode_id,
           count(*) FILTER (WHERE type = 'decision') AS decisions,
           count(*) FILTER (WHERE type = 'open_question') AS open_questions,
           count(*) FILTER (WHERE type = 'commitment') AS commitments,
           count(*) FILTER (WHERE type = 'surprise') AS surprises
    FROM episode_events
    GROUP BY tenant_id, episode_id
) ev ON ev.tenant_id = e.tenant_id AND ev.episode_id = e.id
LEFT JOIN (SELECT tenant_id, episode_id, count(*) AS entities FROM episode_entities GROUP BY tenant_id, episode_id) en
    ON en.tenant_id = e.tenant_id AND en.episode_id = e.id
WHERE e.status = 'current';

COMMENT ON VIEW analyst._episode_timeline IS
    'One row per current episode, session or super-summary (kind), with its event counts. Compressed session '
    'episodes stay listed (compressed_into is set), so count kind = ''session'' for volumes.';
COMMENT ON COLUMN analyst._episode_timeline.tenant_id IS 'Tenant of the user.';
COMMENT ON COLUMN analyst._episode_timeline.user_id IS 'The user.';
COMMENT ON COLUMN analyst._episode_timeline.episode_id IS 'episodes.id.';
COMMENT ON COLUMN analyst._episode_timeline.kind IS
    'session (one chat session) or super (a super-summary of a period).';
COMMENT ON COLUMN analyst._episode_timeline.session_id IS 'The session summarised; NULL for super-summaries.';
COMMENT ON COLUMN analyst._episode_timeline.purpose IS 'Purpose of the session (support, sales, ...).';
COMMENT ON COLUMN analyst._episode_timeline.started_at IS
    'Start of the session (or of the first summarised session).';
COMMENT ON COLUMN analyst._episode_timeline.ended_at IS
    'End of the session (or of the last summarised session).';
COMMENT ON COLUMN analyst._episode_timeline.week IS 'Monday of the ISO week (UTC) in which the episode ended.';
COMMENT ON COLUMN analyst._episode_timeline.summary IS 'The episode summary (at most about 200 tokens).';
COMMENT ON COLUMN analyst._episode_timeline.topic_tags IS 'Up to 5 lowercase topic tags, most important first.';
COMMENT ON COLUMN analyst._episode_timeline.importance IS
    'How much the episode matters for later sessions, 0..1.';
COMMENT ON COLUMN analyst._episode_timeline.decisions IS 'Number of decisions recorded in the episode.';
COMMENT ON COLUMN analyst._episode_timeline.open_questions IS 'Number of open questions raised in the episode.';
COMMENT ON COLUMN analyst._episode_timeline.commitments IS 'Number of commitments recorded in the episode.';
COMMENT ON COLUMN analyst._episode_timeline.surprises IS 'Number of surprises recorded in the episode.';
COMMENT ON COLUMN analyst._episode_timeline.entities IS 'Number of distinct entities mentioned.';
COMMENT ON COLUMN analyst._episode_timeline.compressed_into IS
    'For a compressed session episode, the super-summary that replaced it in recall.';
COMMENT ON COLUMN analyst._episode_timeline.period_start IS 'Super-summaries: first day of the period covered.';
COMMENT ON COLUMN analyst._episode_timeline.period_end IS 'Super-summaries: last day of the period covered.';
COMMENT ON COLUMN analyst._episode_timeline.model IS
    'Model that produced the episode (offline = the rule-based extractor).';
COMMENT ON COLUMN analyst._episode_timeline.prompt_version IS 'Prompt version that produced the episode.';
COMMENT ON COLUMN analyst._episode_timeline.input_tokens IS 'Model input tokens spent on this episode.';
COMMENT ON COLUMN analyst._episode_timeline.output_tokens IS 'Model output tokens spent on this episode.';
COMMENT ON COLUMN analyst._episode_timeline.cost_usd IS 'Estimated model cost of this episode in USD.';
COMMENT ON COLUMN analyst._episode_timeline.created_at IS 'When the episode was written.';
COMMENT ON COLUMN analyst._episode_timeline.pinned IS
    'Pinned on purpose: no time decay in recall, never compressed into a super-summary, never pruned.';
COMMENT ON COLUMN analyst._episode_timeline.pinned_at IS 'When it was pinned (NULL when not pinned).';
