-- Named queries of recall (jobs/recall/recaller.py, index.py, packs.py). Same format as sql/queries.sql:
-- each block starts with "-- name: <name>". Every query runs inside Database.tenant(): row-level
-- security already hides other tenants; the tenant_id / user_id conditions select the user's rows
-- through episodes_user_changed_idx (tenant_id, user_id, changed_version) and the primary key.
-- Every table a query reads is filtered by %(tenant_id)s itself and joined on tenant_id (row-level
-- security does not route): on a Citus cluster each statement then goes whole to the one node holding
-- the tenant's shards (a router query), so a recall talks to one worker, in one round trip per statement.

-- name: recall_changes
-- What changed in one user's candidate episodes since the copy's version (jobs/recall/index.py), plus
-- the opening message's lexemes, in one round trip and one row, from one snapshot. Its first columns:
--   version  the user's change counter (recall_versions, migration 0016) in this snapshot: every
--            change up to it is in the rows read, so the next read needs only changed_version > version
--   lexemes  to_tsvector('english', message) as an array (the terms the text score looks up)
--   epoch    the counter's epoch (migration 0019), which the copy keeps beside the version
--   reset    the copy must be read anew: an episode of the user was deleted after %(since)s, or the
--            counter is gone or another one than the copy's %(epoch)s (the user was erased, and came back)
-- With %(since)s = 0 (a first read) only current, uncompressed rows are read; otherwise every
-- changed row, so rows that stopped being candidates (superseded, compressed) are seen to leave.
-- Every condition names the tenant, so on a cluster the statement goes to the one node holding it.
-- The rows come as columns, each one bytea of fixed-size big-endian values (or NUL-ended lexemes),
-- so the reader converts each with one numpy call and parses no row on its own. Every aggregate
-- sees the rows in the same order. For all changed rows: ids (int8), live (one byte: still a
-- candidate). For the live ones only: ended_us (int8, microseconds since the epoch, exact),
-- importance (float8), purposes (text[]), has_vec (one byte), vectors (vector_send of those with an
-- embedding: int16 dim, int16 unused, dim float4), lexeme_counts (int4: lexemes of search_tsv),
-- lexemes (tsvectorsend(strip(search_tsv)) without its 4-byte count: each lexeme then three NULs),
-- tf (search_tf, migration 0013: one byte per lexeme, its number of positions minus one).
SELECT s.version, s.epoch, s.lexemes AS query_lexemes, s.reset, c.*
FROM (SELECT coalesce(max(v.version), 0) AS version,
             (array_agg(v.epoch))[1] AS epoch,  -- of at most one row (the primary key)
             tsvector_to_array(to_tsvector('english', %(query_text)s::text)) AS lexemes,
             coalesce(max(v.deleted_version) > %(since)s::int8
                      OR (array_agg(v.epoch))[1] IS DISTINCT FROM %(epoch)s::uuid,
                      %(since)s::int8 > 0) AS reset
      FROM recall_versions v
      WHERE v.tenant_id = %(tenant_id)s AND v.user_id = %(user_id)s) s
CROSS JOIN (
    SELECT count(*) AS changed,
           string_agg(int8send(e.id), ''::bytea) AS ids,
           string_agg(CASE WHEN e.live THEN '\x01'::bytea ELSE '\x00'::bytea END, ''::bytea) AS live,
           string_agg(int8send((extract(epoch FROM e.ended_at) * 1000000)::int8), ''::bytea)
               FILTER (WHERE e.live) AS ended_us,
           string_agg(float8send(e.importance::float8), ''::bytea) FILTER (WHERE e.live) AS importance,
           string_agg(CASE WHEN e.pinned_at IS NULL THEN '\x00'::bytea ELSE '\x01'::bytea END, ''::bytea)
               FILTER (WHERE e.live) AS pinned,
           array_agg(e.purpose) FILTER (WHERE e.live) AS purposes,
           string_agg(CASE WHEN e.embedding IS NULL THEN '\x00'::bytea ELSE '\x01'::bytea END, ''::bytea)
               FILTER (WHERE e.live) AS has_vec,
           string_agg(vector_send(e.embedding), ''::bytea) FILTER (WHERE e.live) AS vectors,
           string_agg(int4send(length(e.search_tsv)), ''::bytea) FILTER (WHERE e.live) AS lexeme_counts,
           string_agg(substring(tsvectorsend(strip(e.search_tsv)) FROM 5), ''::bytea) FILTER (WHERE e.live) AS lexemes,
           string_agg(coalesce(e.search_tf, episodes_search_tf(e.search_tsv)), ''::bytea)
               FILTER (WHERE e.live) AS tf
    FROM (SELECT e.*, (e.status = 'current' AND e.compressed_into IS NULL) AS live
          FROM episodes e
          WHERE e.tenant_id = %(tenant_id)s AND e.user_id = %(user_id)s
            -- a first read takes rows of every version: those from before migration 0016 carry 0
            AND e.changed_version > CASE WHEN %(since)s::int8 > 0 THEN %(since)s::int8 ELSE -1 END
            AND (%(since)s::int8 > 0 OR (e.status = 'current' AND e.compressed_into IS NULL))) e
) c

-- name: recall_changes_recorded
-- recall_changes for a copy's first read (whole, or the changes since a pack), with the embedder its
-- vectors are of: embedder and embedding_dim (episodes_settings, a reference table on a cluster), from
-- the same snapshot as the vectors. `episodes reembed` switches the column and the record in one
-- transaction, so one statement sees both before or both after the switch (the recaller then follows
-- the new embedder); no lock and no statement of its own. A later read of a warm copy needs no record:
-- the switch also moves every counter's deleted_version, so a copy from before it is read anew, with
-- the record. (On a Citus worker the join costs about 0.2 ms, a fifth of the read of what changed.)
SELECT r.embedder, r.embedding_dim, w.*
FROM (
{{ recall_changes }}
) w
CROSS JOIN (SELECT max(value) FILTER (WHERE key = 'embedder') AS embedder,
                   max(value) FILTER (WHERE key = 'embedding_dim')::int AS embedding_dim
            FROM episodes_settings) r

-- name: recall_rows
-- The chosen episodes (ids from the scoring in jobs/recall/scoring.py), read fresh, each with whether it
-- is still a candidate (`candidate`: the user's, current, not compressed, ended by %(now)s); the
-- caller keeps only those. Found by the primary key (tenant_id, id) alone: with the user's conditions
-- in the WHERE, a generic plan (estimating a few rows per user) walks the user's index instead: 10,000
-- rows, 18 ms, for a heavy user, against 0.1 ms. One table, the tenant named once and no subquery: on
-- a cluster that is Citus' fast path, planned once and not deparsed (0.49-0.72 ms on the tenant's
-- worker with the checks in a CTE, 0.42 ms so; median, a typical user).
SELECT e.id, e.kind, e.session_id, e.purpose, e.summary, e.topic_tags, e.importance, e.started_at, e.ended_at,
       e.period_start, e.period_end,
       (e.user_id = %(user_id)s AND e.status = 'current' AND e.compressed_into IS NULL
        AND e.ended_at <= %(now)s::timestamptz) IS TRUE AS candidate
FROM episodes e
WHERE e.tenant_id = %(tenant_id)s AND e.id = ANY (%(ids)s::bigint[])

-- name: recall_open_items
-- Still-open questions and commitments of the user, a page (%(limit)s from %(offset)s) at a time;
-- jobs/recall/open_items.py keeps those of episodes that are recall candidates (an item of a
-- compressed episode lives on in its super-summary's events), as the user's copy holds them, and
-- reads the next page only while it has too few. A stale item (past its due date by more than
-- %(grace_seconds)s, or without one older than %(age_seconds)s, as of %(now)s: episodes_item_stale,
-- migration 0009) is kept only when it is related to the opening message: its text and the message
-- share a word stem (episodes_message_stems, migration 0022: to_tsvector('english'), stop words
-- dropped, only stems of 3+ letters). Fresh items first, newest first; then related stale ones.
-- One table, the tenant named once and no subquery: on a cluster that is Citus' fast path, planned
-- once and not deparsed (joined to episodes in a CTE it took 1.02 ms on the tenant's worker against
-- 0.57 ms so; median, a typical user, row-level security on).
SELECT ev.id, ev.episode_id, ev.type, ev.what, ev.who, ev.due, ev.occurred_at,
       episodes_item_stale(ev.due, ev.occurred_at, %(now)s::timestamptz,
                           make_interval(secs => %(grace_seconds)s), make_interval(secs => %(age_seconds)s)) AS stale
FROM episode_events ev
WHERE ev.tenant_id = %(tenant_id)s AND ev.user_id = %(user_id)s
  AND ev.type IN ('open_question', 'commitment') AND ev.status = 'open'
  AND (NOT episodes_item_stale(ev.due, ev.occurred_at, %(now)s::timestamptz,
                               make_interval(secs => %(grace_seconds)s), make_interval(secs => %(age_seconds)s))
       OR tsvector_to_array(to_tsvector('english', ev.what)) && episodes_message_stems(%(query_text)s::text))
ORDER BY stale, ev.occurred_at DESC, ev.id DESC
LIMIT %(limit)s OFFSET %(offset)s

-- name: recall_unsummarised
-- The user's sessions not yet summarised: still open (ended_at IS NULL, so pending) or closed and
-- waiting for or in summarize (pending, running). Dead-lettered and done ones are left out (a done
-- session has its episode). Only sessions that had started by %(now)s (started_at, else when the row
-- was inserted), of an allowed purpose; the latest first by the day the line shows (when it ended, else
-- when it started: a session left open since last year is not newer than one closed today), with their
-- last three user messages (oldest first). jobs/recall/unsummarised.py redacts them before they reach
-- the block.
-- One table and no subquery: on a cluster that is Citus' fast path, planned once and not deparsed
-- (with a subquery it took 0.49 ms there against 0.37, median, a typical user on the worker).
SELECT t.session_id, t.purpose, t.status, t.started_at, t.ended_at,
       jsonb_path_query_array(jsonb_path_query_array(t.messages, '$[*] ? (@.role == "user")'),
                              '$[last - 2 to last]') AS messages
FROM transcripts t
WHERE t.tenant_id = %(tenant_id)s AND t.user_id = %(user_id)s
  AND t.status IN ('pending', 'running')
  AND coalesce(t.started_at, t.created_at) <= %(now)s::timestamptz
  AND (%(purposes)s::text[] IS NULL OR t.purpose = ANY (%(purposes)s::text[]))
ORDER BY coalesce(t.ended_at, t.started_at, t.created_at) DESC, t.id DESC
LIMIT %(limit)s

-- name: recall_pack
-- The user's pack (migration 0021, jobs/recall/packs.py) if its vectors are of the embedder's dimension;
-- otherwise no row, and the copy is read whole. No join to the counter: the triggers of migration 0021
-- drop a pack in the transaction that moves its counter's deleted_version (a deletion, a re-embed's
-- switch) or deletes the counter (an erasure), and the read of what changed that follows checks the
-- pack's version and epoch against the counter anyway (a reset reads the user whole). One table, the
-- tenant named once: on a cluster Citus' fast path (planned once, not deparsed).
SELECT p.version, p.epoch, p.dim, p.rows, p.ids, p.ended_us, p.importance, p.pinned, p.purpose, p.purposes,
       p.has_vec, p.vectors, p.lengths, p.lexemes, p.bounds, p.slots, p.tf
FROM recall_packs p
WHERE p.tenant_id = %(tenant_id)s AND p.user_id = %(user_id)s AND p.dim = %(dim)s

-- name: recall_pack_write
-- One pack a user: a newer one replaces it. Stored only while the user's counter is still at the
-- pack's version, which the write then holds locked to the end of its transaction, so no erasure can
-- commit in between (trigger episodes_pack_at_version, migration 0021); 0 rows when it was not. No
-- volatile function in the update (Citus): written_at comes from the inserted row's default.
INSERT INTO recall_packs (tenant_id, user_id, version, epoch, dim, rows, ids, ended_us, importance, pinned,
                          purpose, purposes, has_vec, vectors, lengths, lexemes, bounds, slots, tf)
VALUES (%(tenant_id)s, %(user_id)s, %(version)s, %(epoch)s::uuid, %(dim)s, %(rows)s, %(ids)s, %(ended_us)s,
        %(importance)s, %(pinned)s, %(purpose)s, %(purposes)s::text[], %(has_vec)s, %(vectors)s, %(lengths)s,
        %(lexemes)s, %(bounds)s, %(slots)s, %(tf)s)
ON CONFLICT (tenant_id, user_id) DO UPDATE
SET version = EXCLUDED.version, epoch = EXCLUDED.epoch, dim = EXCLUDED.dim, rows = EXCLUDED.rows,
    ids = EXCLUDED.ids, ended_us = EXCLUDED.ended_us, importance = EXCLUDED.importance, pinned = EXCLUDED.pinned,
    purpose = EXCLUDED.purpose, purposes = EXCLUDED.purposes, has_vec = EXCLUDED.has_vec,
    vectors = EXCLUDED.vectors, lengths = EXCLUDED.lengths, lexemes = EXCLUDED.lexemes, bounds = EXCLUDED.bounds,
    slots = EXCLUDED.slots, tf = EXCLUDED.tf, written_at = EXCLUDED.written_at
RETURNING version

-- name: recall_lines
-- The verbatim lines (episode_lines, migration 0032) of the chosen episodes that best match the opening
-- message, best first; jobs/recall/fitting.py quotes them under their episodes within the budget. A line's
-- `similarity` is its cosine similarity to the message (same embedder); its `score` is that or, if
-- higher, %(neighbour)s times the best similarity of the line before or after it in the same session: the
-- answer to a matching question is the next line, and the question before a matching answer says what it
-- answers. Exact (no index: the chosen episodes' lines are a few hundred rows). A line whose vector has
-- another dimension (between `episodes reembed`'s switch and its lines' rewrite) is left out. The tenant
-- named in the one table it reads: on a cluster a router query, on the tenant's shard a plain one.
WITH s AS (
    SELECT l.episode_id, l.ordinal, l.speaker, l.text, l.said_at,
           1 - (l.embedding <=> %(vector)s::vector) AS similarity
    FROM episode_lines l
    WHERE l.tenant_id = %(tenant_id)s AND l.user_id = %(user_id)s AND l.episode_id = ANY (%(ids)s::bigint[])
      AND l.embedding IS NOT NULL AND vector_dims(l.embedding) = %(dim)s
)
SELECT episode_id, ordinal, speaker, text, said_at, similarity,
       greatest(similarity, %(neighbour)s * max(similarity) OVER near) AS score
FROM s
WINDOW near AS (PARTITION BY episode_id ORDER BY ordinal ROWS BETWEEN 1 PRECEDING AND 1 FOLLOWING)
ORDER BY score DESC, episode_id, ordinal
LIMIT %(limit)s

-- name: recall_replaced
-- Of the chosen episodes, those holding a decision or preference that a later session replaced (later
-- wins, migration 0008), with when the first replacement was made: the block marks them so.
SELECT old.episode_id, min(new.occurred_at) AS replaced_at
FROM episode_events old
JOIN episode_events new ON new.tenant_id = old.tenant_id AND new.id = old.superseded_by
WHERE old.tenant_id = %(tenant_id)s AND new.tenant_id = %(tenant_id)s
  AND old.episode_id = ANY (%(ids)s::bigint[]) AND old.superseded_by IS NOT NULL
GROUP BY old.episode_id
