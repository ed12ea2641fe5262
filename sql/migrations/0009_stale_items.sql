-- 0009: stale open questions and commitments (README, "Lifecycle of open questions and commitments"),
-- and an index for the sessions recall lists as not yet summarised.
--
-- An open question or commitment is stale when it is past its due date by more than a grace
-- (EPISODES_STALE_GRACE, 30 days), or, without a due date, older than an age (EPISODES_STALE_AGE,
-- 180 days). Stale is relative to a moment, so it is computed, never stored: recall passes the `now`
-- it was given (a recall "as of" a past date sees what was stale then), the analyst views use now().
-- One function holds the rule for both.
--
-- The views read the grace and age from the settings episodes.stale_grace / episodes.stale_age
-- (intervals; jobs.report.analyst_connection sets them from Settings), defaulting to 30 and 180 days.
-- A `stale` column is added at the end of analyst.open_questions and analyst.commitments; their
-- status values are unchanged (a stale commitment with a due date is still `overdue`).

CREATE FUNCTION episodes_item_stale(due date, occurred_at timestamptz, as_of timestamptz,
                                    grace interval, age interval) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT CASE WHEN due IS NOT NULL THEN (due + grace) < (as_of AT TIME ZONE 'UTC')
                ELSE occurred_at < as_of - age END
$$;
COMMENT ON FUNCTION episodes_item_stale(date, timestamptz, timestamptz, interval, interval) IS
    'True when an (open) item is stale as of as_of: its due date (a UTC day) plus grace has passed, '
    'or, with no due date, it is older than age.';

CREATE FUNCTION analyst.stale_grace() RETURNS interval
LANGUAGE sql STABLE PARALLEL SAFE
AS $$ SELECT coalesce(nullif(current_setting('episodes.stale_grace', true), ''), '30 days')::interval $$;

CREATE FUNCTION analyst.stale_age() RETURNS interval
LANGUAGE sql STABLE PARALLEL SAFE
AS $$ SELECT coalesce(nullif(current_setting('episodes.stale_age', true), ''), '180 days')::interval $$;

CREATE OR REPLACE VIEW analyst.open_questions WITH (security_barrier = true) AS
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
JOIN episodes e ON e.id = ev.episode_id
JOIN analyst._event_resolution r ON r.event_id = ev.id
LEFT JOIN episodes rb ON rb.id = r.resolved_by
WHERE ev.type = 'open_question'
  AND e.kind = 'session' AND e.status = 'current'
  AND analyst.visible_tenant(ev.tenant_id);

CREATE OR REPLACE VIEW analyst.commitments WITH (security_barrier = true) AS
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
JOIN episodes e ON e.id = ev.episode_id
JOIN analyst._event_resolution r ON r.event_id = ev.id
LEFT JOIN episodes rb ON rb.id = r.resolved_by
WHERE ev.type = 'commitment'
  AND e.kind = 'session' AND e.status = 'current'
  AND analyst.visible_tenant(ev.tenant_id);

COMMENT ON COLUMN analyst.open_questions.stale IS
    'Open and raised more than episodes.stale_age (180 days) ago: recall lists it only when related '
    'to the opening message. False once resolved.';
COMMENT ON COLUMN analyst.commitments.stale IS
    'Not done and due more than episodes.stale_grace (30 days) ago, or without a due date and made '
    'more than episodes.stale_age (180 days) ago: recall lists it only when related to the opening '
    'message. False once done.';

REVOKE ALL ON FUNCTION analyst.stale_grace(), analyst.stale_age() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION analyst.stale_grace(), analyst.stale_age() TO episodes_analyst;

-- Recall lists the user's sessions not yet summarised (jobs/recall/unsummarised.py): few rows per
-- user, found without walking the user's finished transcripts.
CREATE INDEX transcripts_unsummarised_idx ON transcripts (tenant_id, user_id)
    WHERE status IN ('pending', 'running');
