-- Named runtime queries. Code asks for them by name: query("upsert_transcript").
-- Each block starts with a line "-- name: <name>"; the text up to the next such line is the query.

-- name: upsert_transcript
-- Insert a transcript, or replace it when its content changed (then it is summarised again).
-- Returns no row when the stored content is identical (a no-op), or the session is another user's.
INSERT INTO transcripts (tenant_id, user_id, session_id, agent_id, purpose, started_at, ended_at,
                         messages, metadata, content_hash, source)
VALUES (%(tenant_id)s, %(user_id)s, %(session_id)s, %(agent_id)s, %(purpose)s, %(started_at)s,
        %(ended_at)s, %(messages)s, %(metadata)s, %(content_hash)s, %(source)s)
ON CONFLICT (tenant_id, session_id) DO UPDATE SET
    user_id = EXCLUDED.user_id,
    agent_id = EXCLUDED.agent_id,
    purpose = EXCLUDED.purpose,
    started_at = EXCLUDED.started_at,
    ended_at = EXCLUDED.ended_at,
    messages = EXCLUDED.messages,
    metadata = EXCLUDED.metadata,
    messages_pruned_at = NULL,
    content_hash = EXCLUDED.content_hash,
    source = EXCLUDED.source,
    updated_at = EXCLUDED.updated_at,  -- now(), as the insert's defaults (Citus allows no now() in DO UPDATE)
    status = 'pending',
    attempts = 0,
    next_attempt_at = EXCLUDED.next_attempt_at,
    lease_owner = NULL,
    lease_until = NULL,
    last_error = NULL
WHERE transcripts.content_hash IS DISTINCT FROM EXCLUDED.content_hash
  -- A session is never moved to another user, nor replaced by one (issue 46, item 5): ingest refuses such a
  -- record beforehand (session_owners) and says why; this holds should another write come in between.
  AND transcripts.user_id = EXCLUDED.user_id
RETURNING (xmax = 0) AS inserted, ended_at IS NOT NULL AS eligible

-- name: session_owners
-- The users that the stored sessions among these ids belong to: ingest refuses a record that would move one.
SELECT session_id, user_id FROM transcripts
WHERE tenant_id = %(tenant_id)s AND session_id = ANY (%(session_ids)s::text[])

-- name: status_transcripts
SELECT CASE WHEN ended_at IS NULL AND status = 'pending' THEN 'open' ELSE status END AS state,
       count(*) AS n
FROM transcripts
GROUP BY 1
ORDER BY 1

-- name: status_episodes
SELECT kind, status, count(*) AS n,
       coalesce(sum(dropped_events), 0) AS dropped_events,
       coalesce(sum(dropped_entities), 0) AS dropped_entities,
       coalesce(sum(input_tokens), 0) AS input_tokens,
       coalesce(sum(output_tokens), 0) AS output_tokens,
       coalesce(sum(cost_usd), 0) AS cost_usd
FROM episodes
GROUP BY kind, status
ORDER BY kind, status

-- name: status_invented_summaries
-- Sessions whose last attempt's summary named only what the transcript does not (jobs.summarize.finish).
SELECT count(*) AS n FROM transcripts WHERE last_error LIKE 'invented summary:%%'

-- name: status_job_runs
SELECT job, worker, started_at, finished_at, status, counts, error
FROM job_runs
ORDER BY started_at DESC
LIMIT %(limit)s

-- name: status_dead_letters
SELECT tenant_id, session_id, attempts, last_error, updated_at
FROM transcripts
WHERE status = 'dead'
ORDER BY updated_at DESC
LIMIT %(limit)s

-- name: claim_tenants
-- The tenants with eligible transcripts (closed, pending and due, or running with an expired lease),
-- the longest waiting first. A claim then takes one transcript inside one tenant (claim_transcript):
-- on a Citus cluster FOR UPDATE SKIP LOCKED works only in a statement that stays on one shard, and
-- a tenant's rows are on one shard. This read locks nothing; claim_transcript checks again.
SELECT tenant_id
FROM transcripts
WHERE ((status = 'pending' AND ended_at IS NOT NULL AND next_attempt_at <= now())
       OR (status = 'running' AND lease_until < now()))
  AND (%(tenant)s::text IS NULL OR tenant_id = %(tenant)s::text)
  AND (%(since)s::timestamptz IS NULL OR ended_at >= %(since)s::timestamptz)
GROUP BY tenant_id
ORDER BY min(next_attempt_at), tenant_id
LIMIT %(limit)s

-- name: claim_transcript
-- Claim the next eligible transcript of one tenant: closed, pending and due, or running with an
-- expired lease (its worker died). SKIP LOCKED lets any number of workers claim concurrently. The
-- pick is a materialised CTE, evaluated once: as a joined subquery the planner may rescan it for
-- every row of the tenant, and each rescan skips the row just claimed and claims another.
WITH claimed AS MATERIALIZED (
    SELECT id
    FROM transcripts
    WHERE tenant_id = %(tenant)s
      AND ((status = 'pending' AND ended_at IS NOT NULL AND next_attempt_at <= now())
           OR (status = 'running' AND lease_until < now()))
      AND (%(since)s::timestamptz IS NULL OR ended_at >= %(since)s::timestamptz)
    ORDER BY next_attempt_at, id
    LIMIT 1
    FOR UPDATE SKIP LOCKED
)
UPDATE transcripts t
SET status = 'running',
    lease_owner = %(worker)s,
    lease_until = now() + make_interval(secs => %(lease_seconds)s),
    attempts = t.attempts + 1
FROM claimed
WHERE t.tenant_id = %(tenant)s AND t.id = claimed.id
RETURNING t.id, t.tenant_id, t.user_id, t.session_id, t.agent_id, t.purpose, t.started_at, t.ended_at,
          t.messages, t.content_hash, t.attempts

-- name: count_eligible
SELECT count(*) AS n
FROM transcripts
WHERE ((status = 'pending' AND ended_at IS NOT NULL AND next_attempt_at <= now())
       OR (status = 'running' AND lease_until < now()))
  AND (%(tenant)s::text IS NULL OR tenant_id = %(tenant)s::text)
  AND (%(since)s::timestamptz IS NULL OR ended_at >= %(since)s::timestamptz)

-- name: extend_leases
-- The worker's heartbeat: extend the leases it still holds on the transcripts it is extracting.
-- Their tenants are named too, so on a Citus cluster only the shards holding them are touched.
UPDATE transcripts
SET lease_until = now() + make_interval(secs => %(lease_seconds)s)
WHERE tenant_id = ANY(%(tenants)s) AND id = ANY(%(ids)s) AND lease_owner = %(worker)s AND status = 'running'

-- name: complete_transcript
-- Only the lease holder completes, and only for the content it summarised.
-- Every statement on one transcript names its tenant: on a Citus cluster it then runs on the one
-- shard holding it (in the same transaction as the rest of the tenant's write).
UPDATE transcripts
SET status = 'done', lease_owner = NULL, lease_until = NULL, last_error = NULL
WHERE tenant_id = %(tenant_id)s AND id = %(id)s
  AND lease_owner = %(worker)s AND status = 'running' AND content_hash = %(content_hash)s
RETURNING id

-- name: fail_transcript
-- Back to the queue after a backoff, or dead-lettered. Requeued with no backoff, it is due at once:
-- then the caller wakes the other workers (jobs.db.notify_eligible).
UPDATE transcripts
SET status = CASE WHEN %(permanent)s OR attempts >= %(max_attempts)s THEN 'dead' ELSE 'pending' END,
    next_attempt_at = now() + make_interval(secs => %(backoff_seconds)s),
    lease_owner = NULL,
    lease_until = NULL,
    last_error = %(error)s
WHERE tenant_id = %(tenant_id)s AND id = %(id)s AND lease_owner = %(worker)s AND status = 'running'
RETURNING status

-- name: release_transcript
-- Give a claim back untouched (graceful shutdown): the attempt does not count. It is due at once:
-- the caller wakes the other workers (jobs.db.notify_eligible).
UPDATE transcripts
SET status = 'pending', lease_owner = NULL, lease_until = NULL, attempts = greatest(attempts - 1, 0)
WHERE tenant_id = %(tenant_id)s AND id = %(id)s AND lease_owner = %(worker)s AND status = 'running'
RETURNING id

-- name: retry_dead
UPDATE transcripts
SET status = 'pending', attempts = 0, next_attempt_at = now(), last_error = NULL
WHERE status = 'dead' AND (%(tenant)s::text IS NULL OR tenant_id = %(tenant)s::text)
RETURNING id

-- name: current_session_episode
SELECT id, content_hash, prompt_version, compressed_into
FROM episodes
WHERE tenant_id = %(tenant_id)s AND session_id = %(session_id)s AND kind = 'session' AND status = 'current'
FOR UPDATE

-- name: supersede_session_episode
-- A re-run's write, after current_session_episode locked the session's episode (as a correction
-- locks it, so the corrections read next are all there are), in one statement: the episode is
-- superseded; what it resolved is open again and what its events replaced stands again, for the new
-- episode to resolve or replace again. (The two sets are disjoint: resolutions are of open questions
-- and commitments, replacements of decisions and preferences; no row is updated twice.)
WITH old AS (
    UPDATE episodes SET status = 'superseded' WHERE tenant_id = %(tenant_id)s AND id = %(id)s
), reopened AS (
    UPDATE episode_events SET status = 'open', resolved_by = NULL, resolved_at = NULL
    WHERE tenant_id = %(tenant_id)s AND resolved_by = %(id)s
)
UPDATE episode_events SET superseded_by = NULL
WHERE tenant_id = %(tenant_id)s
  AND superseded_by IN (SELECT id FROM episode_events WHERE tenant_id = %(tenant_id)s AND episode_id = %(id)s)

-- name: link_superseded
-- The re-run's episode inherits the pin (migration 0012): pinning keeps the session, not one version.
WITH old AS (
    UPDATE episodes SET superseded_by = %(new_id)s
    WHERE tenant_id = %(tenant_id)s AND id = %(old_id)s
    RETURNING tenant_id, pinned_at
)
UPDATE episodes ep SET pinned_at = old.pinned_at
FROM old
WHERE ep.tenant_id = old.tenant_id AND ep.tenant_id = %(tenant_id)s AND ep.id = %(new_id)s
  AND old.pinned_at IS NOT NULL

-- name: insert_episode
INSERT INTO episodes (tenant_id, user_id, kind, transcript_id, session_id, purpose, summary, topic_tags,
                      importance, started_at, ended_at, period_start, period_end, search_tsv, embedding,
                      model, prompt_version, content_hash, input_tokens, output_tokens, cache_read_tokens,
                      cache_write_tokens, cost_usd, dropped_events, dropped_entities)
VALUES (%(tenant_id)s, %(user_id)s, %(kind)s, %(transcript_id)s, %(session_id)s, %(purpose)s, %(summary)s,
        %(topic_tags)s, %(importance)s, %(started_at)s, %(ended_at)s, %(period_start)s, %(period_end)s,
        to_tsvector('english', %(search_text)s), %(embedding)s, %(model)s, %(prompt_version)s,
        %(content_hash)s, %(input_tokens)s, %(output_tokens)s, %(cache_read_tokens)s, %(cache_write_tokens)s,
        %(cost_usd)s, %(dropped_events)s, %(dropped_entities)s)
RETURNING id

-- name: insert_event
INSERT INTO episode_events (tenant_id, user_id, episode_id, ordinal, type, what, who, due, occurred_at,
                            evidence, evidence_quote, status, source_event_id)
VALUES (%(tenant_id)s, %(user_id)s, %(episode_id)s, %(ordinal)s, %(type)s, %(what)s, %(who)s, %(due)s,
        %(occurred_at)s, %(evidence)s, %(evidence_quote)s, %(status)s, %(source_event_id)s)

-- name: insert_entity
INSERT INTO episode_entities (tenant_id, user_id, episode_id, name, kind)
VALUES (%(tenant_id)s, %(user_id)s, %(episode_id)s, %(name)s, %(kind)s)
ON CONFLICT DO NOTHING

-- name: insert_line
-- A verbatim line the episode keeps (jobs/extract/lines.py), with its embedding.
INSERT INTO episode_lines (tenant_id, user_id, episode_id, ordinal, message_index, speaker, said_at, text, embedding)
VALUES (%(tenant_id)s, %(user_id)s, %(episode_id)s, %(ordinal)s, %(message_index)s, %(speaker)s, %(said_at)s,
        %(text)s, %(embedding)s)

-- name: insert_model_call
INSERT INTO model_calls (tenant_id, user_id, transcript_id, job_run_id, template, prompt_hash, model, batch,
                         input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, cost_usd,
                         latency_ms, outcome, error)
VALUES (%(tenant_id)s, %(user_id)s, %(transcript_id)s, %(job_run_id)s, %(template)s, %(prompt_hash)s, %(model)s,
        %(batch)s, %(input_tokens)s, %(output_tokens)s, %(cache_read_tokens)s, %(cache_write_tokens)s,
        %(cost_usd)s, %(latency_ms)s, %(outcome)s, %(error)s)

-- name: start_job_run
INSERT INTO job_runs (job, worker) VALUES (%(job)s, %(worker)s) RETURNING id

-- name: finish_job_run
UPDATE job_runs SET finished_at = now(), status = %(status)s, counts = %(counts)s, error = %(error)s
WHERE id = %(id)s

-- name: job_run_interrupted
-- A run stopped by SIGINT / SIGTERM before its work was done (`episodes run`; migration 0031).
UPDATE job_runs SET status = 'interrupted' WHERE id = %(id)s AND status = 'ok'

-- name: rescue_expired_leases
-- Work held by a dead worker goes back to the queue once its lease has expired. The attempt it
-- used stays counted, so a transcript that kills workers is eventually dead-lettered. Across
-- tenants (every shard on a cluster); the caller notifies when it returned rows.
UPDATE transcripts
SET status = 'pending', lease_owner = NULL, lease_until = NULL, next_attempt_at = now(),
    last_error = coalesce(last_error, 'lease expired: worker ' || lease_owner || ' stopped responding')
WHERE status = 'running' AND lease_until < now()
RETURNING id

-- name: idle_close
-- Treat an open session with no new message for the idle period as closed. Across tenants; the
-- self-join is on (tenant_id, id), which a Citus cluster runs shard by shard. A ts that is not a time
-- (a row inserted by hand) counts as unknown (migration 0031), rather than failing the statement.
UPDATE transcripts t
SET ended_at = greatest(coalesce(t.started_at, act.last_at), act.last_at)
FROM (
    SELECT tenant_id, id, episodes_last_message_time(messages, updated_at) AS last_at
    FROM transcripts
    WHERE ended_at IS NULL AND status = 'pending'
) act
WHERE t.tenant_id = act.tenant_id AND t.id = act.id AND act.last_at < now() - make_interval(secs => %(idle_seconds)s)
RETURNING t.id

-- name: prune_job_runs
DELETE FROM job_runs WHERE finished_at < now() - make_interval(days => %(days)s) RETURNING id

-- name: release_references
-- Before deleting episodes %(ids)s of %(tenant_id)s: clear what points at them from rows that stay
-- (what ON DELETE SET NULL did before migration 0016).
SELECT episodes_release_references(%(tenant_id)s, %(ids)s::bigint[])

-- name: notify_eligible
-- jobs.db.notify_eligible: touches no table, so on a cluster it runs on the coordinator, where serve listens.
SELECT pg_notify(%(channel)s, %(tenant)s)

-- name: status_queue
SELECT count(*) FILTER (WHERE status = 'pending' AND ended_at IS NOT NULL AND next_attempt_at <= now()) AS due,
       count(*) FILTER (WHERE status = 'pending' AND ended_at IS NOT NULL AND next_attempt_at > now()) AS backing_off,
       -- Counted from when the session was handed over: its row arrived or last changed (updated_at), or
       -- it closed later (ended_at), not from when it ended: an imported 2023 session is not 3 years late.
       extract(epoch FROM now() - min(least(now(), greatest(updated_at, ended_at)))
                                  FILTER (WHERE status = 'pending' AND ended_at IS NOT NULL))
           AS oldest_pending_seconds,
       count(*) FILTER (WHERE status = 'running' AND lease_until < now()) AS expired_leases
FROM transcripts

-- name: status_last_hour
SELECT (SELECT count(*) FROM episodes WHERE created_at > now() - interval '1 hour') AS episodes,
       (SELECT count(*) FROM model_calls WHERE created_at > now() - interval '1 hour') AS model_calls,
       (SELECT count(*) FROM model_calls WHERE created_at > now() - interval '1 hour' AND outcome <> 'ok')
           AS failed_calls

-- name: insert_batch
INSERT INTO model_batches (id, requests, worker) VALUES (%(id)s, %(requests)s, %(worker)s)

-- name: insert_batch_item
INSERT INTO model_batch_items (batch_id, custom_id, tenant_id, transcript_id, content_hash, prompt_hash,
                               offered_items, offered_decisions)
VALUES (%(batch_id)s, %(custom_id)s, %(tenant_id)s, %(transcript_id)s, %(content_hash)s, %(prompt_hash)s,
        %(offered_items)s, %(offered_decisions)s)

-- name: mark_batch_submitted
UPDATE model_batches SET remote_id = %(remote_id)s, status = 'submitted' WHERE id = %(id)s

-- name: finish_batch
UPDATE model_batches SET status = %(status)s, finished_at = now(), counts = %(counts)s, error = %(error)s
WHERE id = %(id)s

-- name: open_batches
SELECT id, remote_id, status, requests, created_at FROM model_batches
WHERE status IN ('submitting', 'submitted') ORDER BY created_at

-- name: batch_tenants
-- The tenant of every item of a batch (a batch mixes tenants; a result names only its custom_id):
-- one read across tenants per batch, so that each result's batch_item names its tenant.
SELECT custom_id, tenant_id FROM model_batch_items WHERE batch_id = %(batch_id)s

-- name: batch_item
SELECT i.transcript_id, i.prompt_hash, i.offered_items, i.offered_decisions, t.id, t.tenant_id, t.user_id, t.session_id, t.agent_id, t.purpose,
       t.started_at, t.ended_at, t.messages, t.content_hash AS content_hash, t.attempts, t.lease_owner
FROM model_batch_items i JOIN transcripts t ON t.tenant_id = i.tenant_id AND t.id = i.transcript_id
WHERE i.tenant_id = %(tenant_id)s AND i.batch_id = %(batch_id)s AND i.custom_id = %(custom_id)s

-- name: release_batch_claims
-- Give back every transcript still leased to a batch (its submission failed or was abandoned).
-- Across tenants; the caller notifies when it returned rows (they are due at once).
UPDATE transcripts
SET status = 'pending', lease_owner = NULL, lease_until = NULL, last_error = %(error)s
WHERE lease_owner = %(owner)s AND status = 'running'
RETURNING id

-- name: open_items
-- The user's still-open questions and commitments (newest first, bounded), offered to the model
-- so a later session can resolve them. Items of this same session's earlier episode are left out;
-- one resolved by this same session's earlier episode counts as open (a re-run may resolve it again:
-- when it is written, the earlier episode is superseded and its resolutions reopened first).
SELECT e.id AS event_id, e.type, e.what, e.occurred_at AS since
FROM episode_events e
JOIN episodes ep ON ep.tenant_id = e.tenant_id AND ep.id = e.episode_id
LEFT JOIN episodes rb ON rb.tenant_id = e.tenant_id AND rb.id = e.resolved_by
WHERE e.tenant_id = %(tenant_id)s AND e.user_id = %(user_id)s
  AND e.type IN ('open_question', 'commitment')
  AND (e.status = 'open' OR rb.session_id = %(session_id)s)
  AND ep.status = 'current' AND ep.kind = 'session' AND ep.session_id <> %(session_id)s
  AND e.occurred_at <= %(before)s
ORDER BY e.occurred_at DESC
LIMIT %(limit)s

-- name: resolve_item
-- The item and its copies in super-summaries (source_event_id): once a session is compressed,
-- recall shows the copy, which must not stay open after the original is resolved.
UPDATE episode_events
SET status = CASE WHEN type = 'commitment' THEN 'done' ELSE 'resolved' END,
    resolved_by = %(episode_id)s,
    resolved_at = %(resolved_at)s
WHERE tenant_id = %(tenant_id)s AND user_id = %(user_id)s
  AND (id = %(event_id)s OR source_event_id = %(event_id)s) AND status = 'open'
RETURNING id

-- name: current_decisions
-- The user's decisions and preferences that still stand, offered to the model so a later session can
-- replace them: the newest (``limit``), then the older ones whose episode is closest to this session
-- (``related``, by the cosine distance of its embedding to ``query``, the session's own text; none when
-- ``query`` is null). Without the second half a rule stated before the user's last ``limit`` decisions was
-- never offered, so an amendment months later could not replace it. Those of this same session's earlier
-- episode are left out; one replaced by this same session's earlier episode counts as standing (a re-run may
-- replace it again: when it is written, the earlier episode is superseded and its replacements undone first).
WITH standing AS (
    SELECT e.id AS event_id, e.type, e.what, e.occurred_at AS since, ep.embedding
    FROM episode_events e
    JOIN episodes ep ON ep.tenant_id = e.tenant_id AND ep.id = e.episode_id
    LEFT JOIN episode_events nx ON nx.tenant_id = e.tenant_id AND nx.id = e.superseded_by
    LEFT JOIN episodes nxe ON nxe.tenant_id = nx.tenant_id AND nxe.id = nx.episode_id
    WHERE e.tenant_id = %(tenant_id)s AND e.user_id = %(user_id)s
      AND e.type IN ('decision', 'preference')
      AND (e.superseded_by IS NULL OR nxe.session_id = %(session_id)s)
      AND ep.status = 'current' AND ep.kind = 'session' AND ep.session_id <> %(session_id)s
      AND e.occurred_at <= %(before)s
), newest AS (
    SELECT event_id, type, what, since FROM standing ORDER BY since DESC, event_id DESC LIMIT %(limit)s
), related AS (
    SELECT event_id, type, what, since FROM standing
    WHERE %(query)s::vector IS NOT NULL AND vector_dims(embedding) = vector_dims(%(query)s::vector)
      AND event_id NOT IN (SELECT event_id FROM newest)
    ORDER BY embedding <=> %(query)s::vector, since DESC, event_id DESC
    LIMIT %(related)s
)
SELECT event_id, type, what, since FROM newest
UNION ALL
SELECT event_id, type, what, since FROM related

-- name: replace_item
-- Later wins: the offered decision or preference, and its copies in super-summaries
-- (source_event_id), are superseded by the new episode's event at ``ordinal``.
UPDATE episode_events
SET superseded_by = (SELECT id FROM episode_events
                     WHERE tenant_id = %(tenant_id)s AND episode_id = %(episode_id)s AND ordinal = %(ordinal)s)
WHERE tenant_id = %(tenant_id)s AND user_id = %(user_id)s
  AND (id = %(event_id)s OR source_event_id = %(event_id)s)
  AND type IN ('decision', 'preference') AND superseded_by IS NULL
RETURNING id

-- name: current_episode_for_content
-- Is this content already summarised with this prompt version? Then a claim completes with no model call.
SELECT 1 AS found FROM episodes
WHERE tenant_id = %(tenant_id)s AND session_id = %(session_id)s AND kind = 'session'
  AND status = 'current' AND content_hash = %(content_hash)s AND prompt_version = %(prompt_version)s

-- name: give_back_transcript
-- A batch gives back a claimed transcript it will not send (too long, or the batch is full): the
-- attempt does not count; an error, when given, says why it is left for a live run.
UPDATE transcripts
SET status = 'pending', lease_owner = NULL, lease_until = NULL, attempts = greatest(attempts - 1, 0),
    last_error = coalesce(%(error)s, last_error)
WHERE tenant_id = %(tenant_id)s AND id = %(id)s AND lease_owner = %(owner)s

-- name: job_run_model_totals
SELECT coalesce(sum(input_tokens), 0) AS i, coalesce(sum(output_tokens), 0) AS o,
       coalesce(sum(cache_read_tokens), 0) AS c, coalesce(sum(cost_usd), 0) AS usd,
       count(*) AS calls, count(*) FILTER (WHERE outcome <> 'ok') AS failed,
       max(error) FILTER (WHERE outcome <> 'ok') AS an_error  -- one failed call's error, for the run's message
FROM model_calls WHERE job_run_id = %(job_run_id)s

-- name: try_advisory_lock
-- Singleton jobs of `serve` (maintenance, compress): only one process runs each at a time.
SELECT pg_try_advisory_lock(%(key)s) AS ok

-- name: advisory_unlock
SELECT pg_advisory_unlock(%(key)s) AS released

-- name: embedded_other_clients
-- Who else is connected to the embedded server (`episodes db stop` refuses to stop it under them).
SELECT application_name FROM pg_stat_activity
WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()
