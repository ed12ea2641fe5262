-- 0012: memory over years (issue 17): pinned episodes and transcript retention.
--
-- episodes.pinned_at: set while an operator or the user keeps an episode on purpose (jobs.lifecycle.pins).
--   A pinned session episode does not decay in recall scoring, is left out of super-summaries (it stays
--   in recall as itself), and no pruning policy may remove it: every policy filters with
--   episodes_may_prune(e) below. A re-summarised session's new episode inherits the pin (link_superseded).
-- transcripts.messages_pruned_at: set when retention removed the message bodies of a summarised
--   transcript (jobs.lifecycle.retention). The row stays with its content hash (re-ingesting the same
--   content is still a no-op) and its message count: each message keeps only its role. A changed
--   re-ingest stores the new bodies and clears the mark (upsert_transcript).

ALTER TABLE episodes ADD COLUMN pinned_at timestamptz;
COMMENT ON COLUMN episodes.pinned_at IS
    'When the episode was pinned; NULL when not pinned. Pinned: no time decay in recall, never compressed, never pruned.';

ALTER TABLE transcripts ADD COLUMN messages_pruned_at timestamptz;
COMMENT ON COLUMN transcripts.messages_pruned_at IS
    'When retention removed the message bodies (roles, count and content hash are kept); NULL while they are held.';

-- What retention walks: summarised transcripts whose bodies are still held, oldest first.
CREATE INDEX transcripts_retention_idx ON transcripts (ended_at) WHERE status = 'done' AND messages_pruned_at IS NULL;

-- The one rule a pruning policy honours: `DELETE FROM episodes e WHERE <policy> AND episodes_may_prune(e)`.
CREATE FUNCTION episodes_may_prune(e episodes) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT e.pinned_at IS NULL $$;
COMMENT ON FUNCTION episodes_may_prune(episodes) IS
    'False for an episode no pruning policy may remove (it is pinned). Every policy filters with it.';

-- analyst.episode_timeline shows the pin (columns appended; CREATE OR REPLACE keeps grants and comments).
CREATE OR REPLACE VIEW analyst.episode_timeline WITH (security_barrier = true) AS
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
    SELECT episode_id,
           count(*) FILTER (WHERE type = 'decision') AS decisions,
           count(*) FILTER (WHERE type = 'open_question') AS open_questions,
           count(*) FILTER (WHERE type = 'commitment') AS commitments,
           count(*) FILTER (WHERE type = 'surprise') AS surprises
    FROM episode_events
    GROUP BY episode_id
) ev ON ev.episode_id = e.id
LEFT JOIN (SELECT episode_id, count(*) AS entities FROM episode_entities GROUP BY episode_id) en
    ON en.episode_id = e.id
WHERE e.status = 'current'
  AND analyst.visible_tenant(e.tenant_id);
COMMENT ON COLUMN analyst.episode_timeline.pinned IS
    'Pinned on purpose: no time decay in recall, never compressed into a super-summary, never pruned.';
COMMENT ON COLUMN analyst.episode_timeline.pinned_at IS 'When it was pinned (NULL when not pinned).';
