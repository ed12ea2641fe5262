-- Named queries of correcting and forgetting one episode (jobs/rights/correct.py, standing.py,
-- erase_episode.py). Same format as sql/queries.sql: each block starts with "-- name: <name>".
-- Every query runs inside Database.tenant(): row-level security already hides other tenants. Every
-- statement still names the tenant on each tenant table it reads or writes: for the planner, for
-- readers, and on a Citus cluster to route the whole statement to the node holding the tenant
-- (row-level security does not route; nor does equality to the outer row in a correlated subquery).
-- The time of a conditional change comes from a one-row FROM (SELECT now() AS at) clock: Citus
-- refuses now() inside CASE or COALESCE of an UPDATE (it cannot evaluate it once on the coordinator).

-- name: correct_lock_episode
-- The episode to correct, locked: a re-summarisation of its session (which locks the same row in
-- write_session_episode) waits, then sees the correction (jobs/rights/standing.py).
SELECT id, user_id, kind, session_id, status, superseded_by, compressed_into, summary
FROM episodes
WHERE tenant_id = %(tenant_id)s AND id = %(episode_id)s
FOR UPDATE

-- name: correct_episode_events
SELECT id, ordinal, type, what, status
FROM episode_events
WHERE tenant_id = %(tenant_id)s AND episode_id = %(episode_id)s
ORDER BY ordinal

-- name: correct_set_summary
UPDATE episodes SET summary = %(summary)s WHERE tenant_id = %(tenant_id)s AND id = %(episode_id)s

-- name: correct_drop_lines
-- A corrected episode keeps no verbatim lines of its session (migration 0032): recall shows the corrected
-- summary in full instead of quotes that may say what the user corrected.
DELETE FROM episode_lines
WHERE tenant_id = %(tenant_id)s AND episode_id = ANY (%(ids)s::bigint[])

-- name: correct_drop_event
-- The event and its copies in super-summaries (source_event_id). Returns the episodes touched.
DELETE FROM episode_events
WHERE tenant_id = %(tenant_id)s AND (id = %(event_id)s OR source_event_id = %(event_id)s)
RETURNING episode_id

-- name: correct_event_text
UPDATE episode_events SET what = %(text)s
WHERE tenant_id = %(tenant_id)s AND (id = %(event_id)s OR source_event_id = %(event_id)s)
RETURNING episode_id

-- name: correct_event_status
-- done: a question is resolved, a commitment done, by the user's word (no resolving episode).
UPDATE episode_events
SET status = CASE WHEN %(status)s = 'open' THEN 'open' WHEN type = 'commitment' THEN 'done' ELSE 'resolved' END,
    resolved_by = NULL,
    resolved_at = CASE WHEN %(status)s = 'open' THEN NULL ELSE clock.at END
FROM (SELECT now() AS at) clock
WHERE tenant_id = %(tenant_id)s AND (id = %(event_id)s OR source_event_id = %(event_id)s)
  AND type IN ('open_question', 'commitment')
RETURNING episode_id

-- name: reapply_event_status
-- A standing status correction, applied to the re-summarised episode's matching event.
UPDATE episode_events
SET status = CASE WHEN %(status)s = 'open' THEN 'open' WHEN type = 'commitment' THEN 'done' ELSE 'resolved' END,
    resolved_by = NULL,
    resolved_at = CASE WHEN %(status)s = 'open' THEN NULL ELSE clock.at END
FROM (SELECT now() AS at) clock
WHERE tenant_id = %(tenant_id)s AND episode_id = %(episode_id)s AND ordinal = %(ordinal)s
  AND type IN ('open_question', 'commitment')

-- name: insert_correction
INSERT INTO episode_corrections (tenant_id, user_id, session_id, episode_id, event_id, field, event_type,
                                 event_text, old_value, new_value, actor)
VALUES (%(tenant_id)s, %(user_id)s, %(session_id)s, %(episode_id)s, %(event_id)s, %(field)s, %(event_type)s,
        %(event_text)s, %(old_value)s, %(new_value)s, %(actor)s)
RETURNING id

-- name: standing_corrections
-- What the user said about a session, in order: re-applied to each new episode of the session.
SELECT id, field, event_type, event_text, old_value, new_value
FROM episode_corrections
WHERE tenant_id = %(tenant_id)s AND session_id = %(session_id)s AND erased_at IS NULL
ORDER BY id

-- name: corrections_of_episode
SELECT id, episode_id, event_id, field, event_type, event_text, old_value, new_value, actor, corrected_at, erased_at
FROM episode_corrections
WHERE tenant_id = %(tenant_id)s AND episode_id = %(episode_id)s
ORDER BY id

-- name: episode_search_parts
-- What an episode's text search and vector are made of, read back after a correction.
SELECT e.id, e.kind, e.summary, e.topic_tags,
       ARRAY(SELECT ev.what FROM episode_events ev
             WHERE ev.tenant_id = %(tenant_id)s AND ev.episode_id = e.id ORDER BY ev.ordinal) AS events,
       ARRAY(SELECT en.name FROM episode_entities en
             WHERE en.tenant_id = %(tenant_id)s AND en.episode_id = e.id ORDER BY en.id) AS entities
FROM episodes e
WHERE e.tenant_id = %(tenant_id)s AND e.id = ANY (%(ids)s::bigint[])
ORDER BY e.id

-- name: set_episode_search
-- The row's update moves changed_version (migration 0035): a re-embed that read the row before leaves it.
UPDATE episodes
SET search_tsv = to_tsvector('english', %(search_text)s), embedding = %(embedding)s
WHERE tenant_id = %(tenant_id)s AND id = %(id)s

-- name: erase_asked
-- The asked episodes as they are (an id missing here is unknown, or another tenant's).
SELECT e.id, e.kind, e.period_start, e.period_end,
       ARRAY(SELECT l.source_episode_id FROM episode_lineage l
             WHERE l.tenant_id = %(tenant_id)s AND l.super_episode_id = e.id ORDER BY l.source_episode_id) AS sources
FROM episodes e
WHERE e.tenant_id = %(tenant_id)s AND e.id = ANY (%(ids)s::bigint[])

-- name: erase_lock_sessions
-- The asked session episodes and every other version of the same sessions (superseded by a
-- re-summarisation: they hold the same memory), locked.
WITH asked AS (
    SELECT session_id FROM episodes
    WHERE tenant_id = %(tenant_id)s AND id = ANY (%(ids)s::bigint[]) AND kind = 'session'
)
SELECT id, user_id, session_id, transcript_id
FROM episodes
WHERE tenant_id = %(tenant_id)s AND kind = 'session'
  AND (id = ANY (%(ids)s::bigint[]) OR session_id IN (SELECT session_id FROM asked))
ORDER BY id
FOR UPDATE

-- name: erase_lock_supers
-- Every super-summary (current or superseded) whose lineage includes one of the erased episodes.
SELECT id, user_id, status, period_start, period_end
FROM episodes
WHERE tenant_id = %(tenant_id)s AND kind = 'super'
  AND id IN (SELECT super_episode_id FROM episode_lineage
             WHERE tenant_id = %(tenant_id)s AND source_episode_id = ANY (%(ids)s::bigint[]))
ORDER BY id
FOR UPDATE

-- name: erase_reopen_items
-- What the erased episodes resolved is open again, and what their events replaced stands again:
-- the same rule as a superseded episode's (supersede_session_episode in queries.sql).
UPDATE episode_events SET status = 'open', resolved_by = NULL, resolved_at = NULL
WHERE tenant_id = %(tenant_id)s AND resolved_by = ANY (%(ids)s::bigint[])
  AND NOT episode_id = ANY (%(ids)s::bigint[])

-- name: erase_restore_replaced
UPDATE episode_events SET superseded_by = NULL
WHERE tenant_id = %(tenant_id)s AND NOT episode_id = ANY (%(ids)s::bigint[])
  AND superseded_by IN (SELECT id FROM episode_events
                        WHERE tenant_id = %(tenant_id)s AND episode_id = ANY (%(ids)s::bigint[]))

-- name: erase_delete_events
DELETE FROM episode_events WHERE tenant_id = %(tenant_id)s AND episode_id = ANY (%(ids)s::bigint[])

-- name: erase_delete_entities
DELETE FROM episode_entities WHERE tenant_id = %(tenant_id)s AND episode_id = ANY (%(ids)s::bigint[])

-- name: erase_delete_lineage
DELETE FROM episode_lineage
WHERE tenant_id = %(tenant_id)s
  AND (super_episode_id = ANY (%(ids)s::bigint[]) OR source_episode_id = ANY (%(ids)s::bigint[]))

-- name: erase_delete_episodes
-- release_references has cleared what pointed here: remaining sources of a deleted super have
-- compressed_into NULL, back in recall.
DELETE FROM episodes WHERE tenant_id = %(tenant_id)s AND id = ANY (%(ids)s::bigint[])

-- name: erase_scrub_corrections
-- The audit keeps that a correction happened (episode, field, time); its contents go.
UPDATE episode_corrections
SET user_id = NULL, session_id = NULL, event_text = NULL, old_value = NULL, new_value = NULL, actor = NULL,
    erased_at = now()
WHERE tenant_id = %(tenant_id)s AND erased_at IS NULL
  AND (episode_id = ANY (%(ids)s::bigint[]) OR session_id = ANY (%(sessions)s::text[]))

-- name: erase_forget_transcripts
-- Kept, but never summarised into the same memory again (migration 0011's trigger holds them at done).
UPDATE transcripts
SET forgotten_at = now(), status = 'done', lease_owner = NULL, lease_until = NULL, last_error = NULL
WHERE tenant_id = %(tenant_id)s AND (id = ANY (%(transcript_ids)s::bigint[]) OR session_id = ANY (%(sessions)s::text[]))

-- name: insert_episode_erasure
INSERT INTO erasures (tenant_id, user_hash, counts, kept_transcripts, scope)
VALUES (%(tenant_id)s, %(user_hash)s, %(counts)s, true, %(scope)s)
RETURNING id, requested_at

-- name: forget_scrub_corrections
-- forget_user: the user's correction audit keeps only that corrections happened.
UPDATE episode_corrections
SET user_id = NULL, session_id = NULL, event_text = NULL, old_value = NULL, new_value = NULL, actor = NULL,
    erased_at = now()
WHERE tenant_id = %(tenant_id)s AND erased_at IS NULL
  AND (user_id = %(user_id)s OR episode_id = ANY (%(episode_ids)s::bigint[]))
