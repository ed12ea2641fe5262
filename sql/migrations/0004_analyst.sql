-- 0004: the analyst surface (DESIGN.md, "Who uses it": an analyst, through SQL views).
--
-- Views in the schema `analyst`, one per question shape, and two roles:
--
--   episodes_analyst   NOLOGIN, read-only. USAGE on `analyst` and SELECT on its views; nothing on
--                      the base tables in `public`. Scoped by the transaction/session setting
--                      episodes.tenant_id, exactly like the app role episodes_app.
--   episodes_operator  NOLOGIN, the explicit cross-tenant role: a member of episodes_analyst whose
--                      sessions see every tenant's rows in the views (and still nothing in `public`).
--
-- How the scoping holds. The views are ordinary (security definer) views owned by the schema owner,
-- which owns the base tables and so is not bound by their row-level policies; that is why the
-- analyst needs no grant on the tables. Each view therefore filters rows itself with
-- analyst.visible_tenant(tenant_id):
--     tenant_id = current_setting('episodes.tenant_id', true)
--     OR the current role has the privileges of episodes_operator (pg_has_role ... 'USAGE').
-- `current_user` inside a view is the querying role, not the owner, so `SET ROLE episodes_analyst`
-- sees one tenant and `SET ROLE episodes_operator` sees all. The views are security barriers, so a
-- caller's own (possibly leaky) WHERE functions run only on rows that already passed the filter.
-- A role with the analyst's rights and no tenant set sees no rows. Like the app role, the setting
-- is trusted: whoever can run arbitrary SQL as episodes_analyst can set it, so hand tenant-scoped
-- access out through a connection that sets it (jobs.report.analyst_connection), not raw logins.
--
-- What the views show. Only current episodes (episodes.status = 'current'; superseded re-runs are
-- audit history). Event views (decisions, open questions, commitments) and entity mentions read
-- session episodes only, including compressed ones: super-summaries restate their sources' events
-- (episode_events.source_event_id), so counting both would double every decision. A question or
-- commitment counts as resolved when its own row is, or when a copy of it in a super-summary is
-- (recall offers the copy once the source is compressed, so that is where a later episode marks it).
-- The episode timeline lists both kinds with a `kind` column. Times are timestamptz; days and weeks
-- are UTC calendar days and ISO weeks (Monday).
--
-- Later migrations that change a column these views read must drop and recreate the view.

CREATE SCHEMA analyst;
COMMENT ON SCHEMA analyst IS
    'Read-only views for analysts (role episodes_analyst, one tenant via episodes.tenant_id; '
    'role episodes_operator, all tenants). Base tables are not readable by these roles.';

DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'episodes_analyst') THEN
        CREATE ROLE episodes_analyst NOLOGIN NOBYPASSRLS;
    END IF;
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'episodes_operator') THEN
        CREATE ROLE episodes_operator NOLOGIN NOBYPASSRLS;
    END IF;
    -- The owner (who runs `episodes report` and migrations) may SET ROLE to either.
    EXECUTE format('GRANT episodes_analyst, episodes_operator TO %I', current_user);
END
$$;
GRANT episodes_analyst TO episodes_operator;
COMMENT ON ROLE episodes_analyst IS
    'Read-only analyst: the analyst schema only, rows of the tenant in episodes.tenant_id.';
COMMENT ON ROLE episodes_operator IS
    'Cross-tenant operator: the analyst schema only, rows of every tenant.';

CREATE FUNCTION analyst.visible_tenant(tenant text) RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT tenant = current_setting('episodes.tenant_id', true)
        OR pg_has_role('episodes_operator', 'USAGE')
$$;
COMMENT ON FUNCTION analyst.visible_tenant(text) IS
    'True when the current role may see rows of this tenant: it is the tenant in episodes.tenant_id, '
    'or the role has the privileges of episodes_operator. Every analyst view filters on it.';

-- ---------------------------------------------------------------------------------------------
-- Open questions and commitments: the effective resolution of each session event, taking a
-- resolved copy in a super-summary into account. Internal (not granted).
-- ---------------------------------------------------------------------------------------------
CREATE VIEW analyst._event_resolution AS
SELECT ev.id AS event_id,
       CASE WHEN ev.status IN ('resolved', 'done') THEN ev.status ELSE coalesce(c.status, ev.status) END AS status,
       CASE WHEN ev.status IN ('resolved', 'done') THEN ev.resolved_by ELSE c.resolved_by END AS resolved_by,
       CASE WHEN ev.status IN ('resolved', 'done') THEN ev.resolved_at ELSE c.resolved_at END AS resolved_at
FROM episode_events ev
LEFT JOIN (
    SELECT DISTINCT ON (source_event_id) source_event_id, status, resolved_by, resolved_at
    FROM episode_events
    WHERE source_event_id IS NOT NULL AND status IN ('resolved', 'done')
    ORDER BY source_event_id, resolved_at NULLS LAST, id
) c ON c.source_event_id = ev.id
WHERE ev.type IN ('open_question', 'commitment');
REVOKE ALL ON analyst._event_resolution FROM PUBLIC;

-- ---------------------------------------------------------------------------------------------
-- analyst.decisions
-- ---------------------------------------------------------------------------------------------
CREATE VIEW analyst.decisions WITH (security_barrier = true) AS
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
       ev.id AS event_id
FROM episode_events ev
JOIN episodes e ON e.id = ev.episode_id
WHERE ev.type = 'decision'
  AND e.kind = 'session' AND e.status = 'current'
  AND analyst.visible_tenant(ev.tenant_id);
COMMENT ON VIEW analyst.decisions IS
    'One row per decision in a current session episode (compressed ones included; super-summary '
    'copies excluded so nothing is counted twice).';
COMMENT ON COLUMN analyst.decisions.tenant_id IS 'Tenant of the user.';
COMMENT ON COLUMN analyst.decisions.user_id IS 'The user whose session it was.';
COMMENT ON COLUMN analyst.decisions.decided_at IS
    'When it was decided: the timestamp of the first message cited as evidence, else the session end.';
COMMENT ON COLUMN analyst.decisions.what IS 'The decision, one self-contained sentence written by the extractor.';
COMMENT ON COLUMN analyst.decisions.who IS 'Who decided: a name, or user / assistant.';
COMMENT ON COLUMN analyst.decisions.topic_tags IS 'Topic tags of the episode the decision belongs to (up to 5).';
COMMENT ON COLUMN analyst.decisions.episode_id IS 'The episode (episodes.id) that recorded the decision.';
COMMENT ON COLUMN analyst.decisions.session_id IS 'The chat session the episode summarises.';
COMMENT ON COLUMN analyst.decisions.purpose IS 'Purpose of the session (support, sales, ...).';
COMMENT ON COLUMN analyst.decisions.evidence_quote IS
    'The start (up to 280 characters) of the first transcript message cited as evidence.';
COMMENT ON COLUMN analyst.decisions.evidence IS 'Indexes of the transcript messages the decision rests on.';
COMMENT ON COLUMN analyst.decisions.event_id IS 'episode_events.id of the decision.';

-- ---------------------------------------------------------------------------------------------
-- analyst.open_questions
-- ---------------------------------------------------------------------------------------------
CREATE VIEW analyst.open_questions WITH (security_barrier = true) AS
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
       ev.id AS event_id
FROM episode_events ev
JOIN episodes e ON e.id = ev.episode_id
JOIN analyst._event_resolution r ON r.event_id = ev.id
LEFT JOIN episodes rb ON rb.id = r.resolved_by
WHERE ev.type = 'open_question'
  AND e.kind = 'session' AND e.status = 'current'
  AND analyst.visible_tenant(ev.tenant_id);
COMMENT ON VIEW analyst.open_questions IS
    'Every question raised in a current session episode and left unanswered in that session, with '
    'whether and when a later episode resolved it. Filter status = ''open'' for the ones still open.';
COMMENT ON COLUMN analyst.open_questions.tenant_id IS 'Tenant of the user.';
COMMENT ON COLUMN analyst.open_questions.user_id IS 'The user whose session it was.';
COMMENT ON COLUMN analyst.open_questions.question IS 'The question, as the extractor recorded it.';
COMMENT ON COLUMN analyst.open_questions.asked_by IS 'Who asked: a name, or user / assistant.';
COMMENT ON COLUMN analyst.open_questions.raised_at IS
    'When it was asked: the first evidence message''s timestamp, else the session end.';
COMMENT ON COLUMN analyst.open_questions.status IS
    'open, or resolved once a later episode answered it (its own row or its copy in a super-summary).';
COMMENT ON COLUMN analyst.open_questions.resolved_at IS 'When a later session answered it; NULL while open.';
COMMENT ON COLUMN analyst.open_questions.resolved_by IS
    'The episode (episodes.id) that answered it; it may since have been superseded by a re-run of the '
    'same session (resolved_by_session_id stays valid).';
COMMENT ON COLUMN analyst.open_questions.resolved_by_session_id IS 'Session id of the episode that answered it.';
COMMENT ON COLUMN analyst.open_questions.days_open IS
    'Whole days from raised_at until resolved_at, or until now() while it is open.';
COMMENT ON COLUMN analyst.open_questions.topic_tags IS 'Topic tags of the episode that raised it.';
COMMENT ON COLUMN analyst.open_questions.episode_id IS 'The episode that raised it.';
COMMENT ON COLUMN analyst.open_questions.session_id IS 'The session that raised it.';
COMMENT ON COLUMN analyst.open_questions.purpose IS 'Purpose of that session.';
COMMENT ON COLUMN analyst.open_questions.evidence_quote IS 'Start of the first message cited as evidence.';
COMMENT ON COLUMN analyst.open_questions.event_id IS 'episode_events.id of the question.';

-- ---------------------------------------------------------------------------------------------
-- analyst.commitments
-- ---------------------------------------------------------------------------------------------
CREATE VIEW analyst.commitments WITH (security_barrier = true) AS
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
       ev.id AS event_id
FROM episode_events ev
JOIN episodes e ON e.id = ev.episode_id
JOIN analyst._event_resolution r ON r.event_id = ev.id
LEFT JOIN episodes rb ON rb.id = r.resolved_by
WHERE ev.type = 'commitment'
  AND e.kind = 'session' AND e.status = 'current'
  AND analyst.visible_tenant(ev.tenant_id);
COMMENT ON VIEW analyst.commitments IS
    'Every commitment (a promise to do something later) in a current session episode, with its due '
    'date and a status computed when queried: done, overdue (open and its due date has passed, UTC), '
    'or open.';
COMMENT ON COLUMN analyst.commitments.tenant_id IS 'Tenant of the user.';
COMMENT ON COLUMN analyst.commitments.user_id IS 'The user whose session it was.';
COMMENT ON COLUMN analyst.commitments.what IS 'What was promised, as the extractor recorded it.';
COMMENT ON COLUMN analyst.commitments.committed_by IS 'Who promised: a name, or user / assistant.';
COMMENT ON COLUMN analyst.commitments.committed_at IS
    'When it was promised (first evidence message, else session end).';
COMMENT ON COLUMN analyst.commitments.due IS 'Due date resolved against the session date; NULL when none was given.';
COMMENT ON COLUMN analyst.commitments.status IS
    'done (a later episode recorded it as fulfilled), overdue (not done and due before today, UTC), '
    'else open. Without a due date an unfulfilled commitment stays open.';
COMMENT ON COLUMN analyst.commitments.days_overdue IS
    'Days past the due date (0 before it); NULL when done or without a due date.';
COMMENT ON COLUMN analyst.commitments.done_at IS
    'When a later session recorded it as fulfilled (that session''s time, not necessarily when it was done).';
COMMENT ON COLUMN analyst.commitments.done_by IS 'The episode (episodes.id) that recorded it as fulfilled.';
COMMENT ON COLUMN analyst.commitments.done_by_session_id IS 'Session id of that episode.';
COMMENT ON COLUMN analyst.commitments.topic_tags IS 'Topic tags of the episode that recorded the promise.';
COMMENT ON COLUMN analyst.commitments.episode_id IS 'The episode that recorded the promise.';
COMMENT ON COLUMN analyst.commitments.session_id IS 'The session of that episode.';
COMMENT ON COLUMN analyst.commitments.purpose IS 'Purpose of that session.';
COMMENT ON COLUMN analyst.commitments.evidence_quote IS 'Start of the first message cited as evidence.';
COMMENT ON COLUMN analyst.commitments.event_id IS 'episode_events.id of the commitment.';

-- ---------------------------------------------------------------------------------------------
-- analyst.episode_timeline
-- ---------------------------------------------------------------------------------------------
CREATE VIEW analyst.episode_timeline WITH (security_barrier = true) AS
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
       e.created_at
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
COMMENT ON VIEW analyst.episode_timeline IS
    'One row per current episode, session or super-summary (kind), with its event counts. Compressed '
    'session episodes stay listed (compressed_into is set), so count kind = ''session'' for volumes.';
COMMENT ON COLUMN analyst.episode_timeline.tenant_id IS 'Tenant of the user.';
COMMENT ON COLUMN analyst.episode_timeline.user_id IS 'The user.';
COMMENT ON COLUMN analyst.episode_timeline.episode_id IS 'episodes.id.';
COMMENT ON COLUMN analyst.episode_timeline.kind IS 'session (one chat session) or super (a super-summary of a period).';
COMMENT ON COLUMN analyst.episode_timeline.session_id IS 'The session summarised; NULL for super-summaries.';
COMMENT ON COLUMN analyst.episode_timeline.purpose IS 'Purpose of the session (support, sales, ...).';
COMMENT ON COLUMN analyst.episode_timeline.started_at IS 'Start of the session (or of the first summarised session).';
COMMENT ON COLUMN analyst.episode_timeline.ended_at IS 'End of the session (or of the last summarised session).';
COMMENT ON COLUMN analyst.episode_timeline.week IS 'Monday of the ISO week (UTC) in which the episode ended.';
COMMENT ON COLUMN analyst.episode_timeline.summary IS 'The episode summary (at most about 200 tokens).';
COMMENT ON COLUMN analyst.episode_timeline.topic_tags IS 'Up to 5 lowercase topic tags, most important first.';
COMMENT ON COLUMN analyst.episode_timeline.importance IS 'How much the episode matters for later sessions, 0..1.';
COMMENT ON COLUMN analyst.episode_timeline.decisions IS 'Number of decisions recorded in the episode.';
COMMENT ON COLUMN analyst.episode_timeline.open_questions IS 'Number of open questions raised in the episode.';
COMMENT ON COLUMN analyst.episode_timeline.commitments IS 'Number of commitments recorded in the episode.';
COMMENT ON COLUMN analyst.episode_timeline.surprises IS 'Number of surprises recorded in the episode.';
COMMENT ON COLUMN analyst.episode_timeline.entities IS 'Number of distinct entities mentioned.';
COMMENT ON COLUMN analyst.episode_timeline.compressed_into IS
    'For a compressed session episode, the super-summary that replaced it in recall.';
COMMENT ON COLUMN analyst.episode_timeline.period_start IS 'Super-summaries: first day of the period covered.';
COMMENT ON COLUMN analyst.episode_timeline.period_end IS 'Super-summaries: last day of the period covered.';
COMMENT ON COLUMN analyst.episode_timeline.model IS
    'Model that produced the episode (offline = the rule-based extractor).';
COMMENT ON COLUMN analyst.episode_timeline.prompt_version IS 'Prompt version that produced the episode.';
COMMENT ON COLUMN analyst.episode_timeline.input_tokens IS 'Model input tokens spent on this episode.';
COMMENT ON COLUMN analyst.episode_timeline.output_tokens IS 'Model output tokens spent on this episode.';
COMMENT ON COLUMN analyst.episode_timeline.cost_usd IS 'Estimated model cost of this episode in USD.';
COMMENT ON COLUMN analyst.episode_timeline.created_at IS 'When the episode was written.';

-- ---------------------------------------------------------------------------------------------
-- analyst.entity_mentions
-- ---------------------------------------------------------------------------------------------
CREATE VIEW analyst.entity_mentions WITH (security_barrier = true) AS
SELECT en.tenant_id,
       en.user_id,
       en.name AS entity,
       lower(en.name) AS entity_key,
       en.kind,
       en.episode_id,
       e.session_id,
       e.ended_at AS mentioned_at,
       e.topic_tags
FROM episode_entities en
JOIN episodes e ON e.id = en.episode_id
WHERE e.kind = 'session' AND e.status = 'current'
  AND analyst.visible_tenant(en.tenant_id);
COMMENT ON VIEW analyst.entity_mentions IS
    'One row per entity named in a current session episode (one mention per episode, name and kind).';
COMMENT ON COLUMN analyst.entity_mentions.tenant_id IS 'Tenant of the user.';
COMMENT ON COLUMN analyst.entity_mentions.user_id IS 'The user whose session mentioned it.';
COMMENT ON COLUMN analyst.entity_mentions.entity IS 'The name exactly as written in the transcript.';
COMMENT ON COLUMN analyst.entity_mentions.entity_key IS 'Lowercased name, to group spellings that differ only in case.';
COMMENT ON COLUMN analyst.entity_mentions.kind IS 'person, org, product, project, place or other.';
COMMENT ON COLUMN analyst.entity_mentions.episode_id IS 'The episode that mentions it.';
COMMENT ON COLUMN analyst.entity_mentions.session_id IS 'The session of that episode.';
COMMENT ON COLUMN analyst.entity_mentions.mentioned_at IS 'End of that session.';
COMMENT ON COLUMN analyst.entity_mentions.topic_tags IS 'Topic tags of that episode.';

-- ---------------------------------------------------------------------------------------------
-- analyst.model_cost_daily
-- ---------------------------------------------------------------------------------------------
CREATE VIEW analyst.model_cost_daily WITH (security_barrier = true) AS
SELECT tenant_id,
       (created_at AT TIME ZONE 'UTC')::date AS day,
       CASE WHEN batch THEN 'batch' ELSE 'live' END AS mode,
       count(*) AS calls,
       count(*) FILTER (WHERE outcome <> 'ok') AS failed_calls,
       sum(input_tokens)::bigint AS input_tokens,
       sum(output_tokens)::bigint AS output_tokens,
       sum(cache_read_tokens)::bigint AS cache_read_tokens,
       sum(cache_write_tokens)::bigint AS cache_write_tokens,
       sum(cost_usd) AS cost_usd,
       array_agg(DISTINCT model ORDER BY model) AS models
FROM model_calls
WHERE analyst.visible_tenant(tenant_id)
GROUP BY tenant_id, (created_at AT TIME ZONE 'UTC')::date, batch;
COMMENT ON VIEW analyst.model_cost_daily IS
    'Model calls per tenant, UTC day and mode (batch = Message Batches at half price, live = Messages '
    'API), with tokens and estimated cost. Every call counts, failed ones included.';
COMMENT ON COLUMN analyst.model_cost_daily.tenant_id IS 'Tenant the calls were made for.';
COMMENT ON COLUMN analyst.model_cost_daily.day IS 'UTC calendar day of the call.';
COMMENT ON COLUMN analyst.model_cost_daily.mode IS 'batch (Message Batches API) or live (Messages API).';
COMMENT ON COLUMN analyst.model_cost_daily.calls IS 'Number of model calls.';
COMMENT ON COLUMN analyst.model_cost_daily.failed_calls IS
    'Calls whose outcome was not ok (invalid, refusal, max_tokens, transient, error).';
COMMENT ON COLUMN analyst.model_cost_daily.input_tokens IS 'Uncached input tokens.';
COMMENT ON COLUMN analyst.model_cost_daily.output_tokens IS 'Output tokens.';
COMMENT ON COLUMN analyst.model_cost_daily.cache_read_tokens IS 'Input tokens read from the prompt cache (0.1x price).';
COMMENT ON COLUMN analyst.model_cost_daily.cache_write_tokens IS
    'Input tokens written to the prompt cache (1.25x price).';
COMMENT ON COLUMN analyst.model_cost_daily.cost_usd IS
    'Estimated cost in USD as recorded per call (EPISODES_PRICE_* at call time; batch at half price).';
COMMENT ON COLUMN analyst.model_cost_daily.models IS 'Models called that day.';

-- ---------------------------------------------------------------------------------------------
-- analyst.failures: dead letters, transcripts waiting for a retry, and failed model calls.
-- ---------------------------------------------------------------------------------------------
CREATE VIEW analyst.failures WITH (security_barrier = true) AS
SELECT t.tenant_id,
       t.user_id,
       t.session_id,
       CASE WHEN t.status = 'dead' THEN 'dead_letter' ELSE 'retrying' END AS source,
       greatest(t.updated_at, mc.last_call_at) AS failed_at,
       t.attempts,
       NULL::text AS outcome,
       t.last_error AS error,
       t.next_attempt_at,
       NULL::text AS template,
       NULL::text AS model
FROM transcripts t
LEFT JOIN (SELECT transcript_id, max(created_at) AS last_call_at FROM model_calls GROUP BY transcript_id) mc
    ON mc.transcript_id = t.id
WHERE (t.status = 'dead' OR (t.status = 'pending' AND t.last_error IS NOT NULL))
  AND analyst.visible_tenant(t.tenant_id)
UNION ALL
SELECT m.tenant_id,
       m.user_id,
       t.session_id,
       'model_call' AS source,
       m.created_at AS failed_at,
       NULL::integer AS attempts,
       m.outcome,
       m.error,
       NULL::timestamptz AS next_attempt_at,
       m.template,
       m.model
FROM model_calls m
LEFT JOIN transcripts t ON t.id = m.transcript_id
WHERE m.outcome <> 'ok'
  AND analyst.visible_tenant(m.tenant_id);
COMMENT ON VIEW analyst.failures IS
    'What went wrong: dead-lettered transcripts (given up after EPISODES_MAX_ATTEMPTS or a permanent '
    'error; `episodes retry` requeues them), transcripts waiting for a retry after a failure, and every '
    'model call whose outcome was not ok.';
COMMENT ON COLUMN analyst.failures.tenant_id IS 'Tenant.';
COMMENT ON COLUMN analyst.failures.user_id IS 'User of the transcript or call.';
COMMENT ON COLUMN analyst.failures.session_id IS 'Session of the transcript (NULL for a call without one).';
COMMENT ON COLUMN analyst.failures.source IS
    'dead_letter (transcript given up), retrying (transcript queued again after a failure) or '
    'model_call (one failed call; the SDK or the job may have retried it successfully).';
COMMENT ON COLUMN analyst.failures.failed_at IS
    'Model calls: when the call was made. Transcripts: the later of the last content change and the '
    'last model call for it (the time of the failure itself is not stored).';
COMMENT ON COLUMN analyst.failures.attempts IS 'Transcripts: attempts made so far.';
COMMENT ON COLUMN analyst.failures.outcome IS 'Model calls: invalid, refusal, max_tokens, transient or error.';
COMMENT ON COLUMN analyst.failures.error IS 'The error message (transcripts: the last one).';
COMMENT ON COLUMN analyst.failures.next_attempt_at IS 'Retrying transcripts: when the next attempt is due.';
COMMENT ON COLUMN analyst.failures.template IS 'Model calls: the prompt template.';
COMMENT ON COLUMN analyst.failures.model IS 'Model calls: the model.';

-- ---------------------------------------------------------------------------------------------
-- analyst.event_types: the lookup of event types (no tenant data).
-- ---------------------------------------------------------------------------------------------
CREATE VIEW analyst.event_types AS
SELECT name, description FROM event_types;
COMMENT ON VIEW analyst.event_types IS 'The typed key events an episode can record.';
COMMENT ON COLUMN analyst.event_types.name IS 'Type name (decision, open_question, commitment, surprise, ...).';
COMMENT ON COLUMN analyst.event_types.description IS 'What the type means.';

-- ---------------------------------------------------------------------------------------------
-- Privileges: the analyst schema only; nothing in public.
-- ---------------------------------------------------------------------------------------------
REVOKE ALL ON SCHEMA analyst FROM PUBLIC;
GRANT USAGE ON SCHEMA analyst TO episodes_analyst;
REVOKE ALL ON FUNCTION analyst.visible_tenant(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION analyst.visible_tenant(text) TO episodes_analyst;
GRANT SELECT ON analyst.decisions, analyst.open_questions, analyst.commitments, analyst.episode_timeline,
    analyst.entity_mentions, analyst.model_cost_daily, analyst.failures, analyst.event_types
    TO episodes_analyst;
