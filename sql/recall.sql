-- Named queries of recall (jobs/recall/recaller.py, open_items.py). Same format as sql/queries.sql: each
-- block starts with "-- name: <name>". Every query runs inside Database.tenant(): row-level security
-- already hides other tenants; the tenant_id / user_id conditions select the user's rows through
-- episodes_user_recent_idx (tenant_id, user_id, ended_at DESC) and the primary key.
-- Every table a query reads is filtered by %(tenant_id)s itself and joined on tenant_id (row-level
-- security does not route): on a Citus cluster each statement then goes whole to the one node holding
-- the tenant's shards (a router query), so a recall talks to one worker, in one round trip per statement.

-- name: recall_scores
-- Every candidate episode of the user scored exactly (no approximate index: the top K is exact within the
-- user's rows); returned are only the rows fusion or the line search can pick (jobs/recall/scoring.py): the
-- first %(depth)s by cosine distance (those without one last: with few candidates, every one of them), the
-- first %(depth)s by text score, the last %(recent_n)s by ended_at and those of %(extra_ids)s (the episodes
-- of the block's open items); for a user with compressed sessions, the first %(line_n)s session episodes by each
-- score, those included (whose lines recall_lines searches: jobs/recall/scoring.py line_episodes; without any, the
-- first lists hold them, %(depth)s >= %(line_n)s); then one row with id NULL that holds
-- `candidates`, the number scored, the mean and spread of their cosine similarity to the opening message
-- (`sim_mean`, `sim_sd`: the user's background, against which the best stands out or not), and the embedder
-- the database records (migration 0014: vectors of another one are not comparable with the query's, and the
-- recaller then follows it).
-- Candidates (s): the user's episodes, current, not compressed into a super-summary, ended by %(now)s, of an
-- allowed purpose (%(purposes)s, NULL: all). The sessions a candidate super-summary holds (src, found by
-- episodes_compressed_into_idx; `compressed_into`: the super's id) are scored too, for the line search only: their
-- own lines are searched and quoted under their super, so a compressed period costs what its sessions did (a super
-- holding a copy of its period's every line, all searched, took a heavy user's recall from 110 ms to 1.12 s:
-- bench/compressed_recall.py). A user without a super pays one pass over s to know it (sup). Scores:
--   distance     cosine distance to the opening message (pgvector <=>; NULL without an embedding of the
--                query's %(dim)s dimensions, as between `episodes reembed`'s switch and a row's rewrite, or
--                when the query vector is zero)
--   text_score   ts_rank(search_tsv, q, 1), q the opening message's lexemes OR-ed (NULL: no lexeme occurs);
--                normalised by 1 + log(length), so long episodes are not favoured
-- Kept simple on purpose: a prepared statement's generic plan walks the user's rows by index whoever the
-- user is (a typical user's statement runs in ~0.4 ms, a user with 10,000 episodes in ~40 ms, bench/README),
-- and planning it costs little (the fused picking in SQL took 2-4 ms to plan). One tenant named in every
-- table: on a cluster a router query (the settings are a reference table), on the tenant's shards a plain one.
WITH q AS NOT MATERIALIZED (  -- inlined in s and src: a CTE scan of it joined every row (+3 ms, 10,000 rows)
    SELECT %(vector)s::vector AS vec,
           (SELECT nullif(string_agg('''' || replace(replace(lex, '\', '\\'), '''', '''''') || '''', ' | '), '')::tsquery
            FROM unnest(tsvector_to_array(to_tsvector('english', %(query_text)s::text))) AS lex) AS tsq
),
s AS MATERIALIZED (
    SELECT e.id, e.ended_at, e.importance::float8 AS importance, e.pinned_at IS NOT NULL AS pinned,
           NULL::bigint AS compressed_into, e.kind = 'super' AS is_super,
           CASE WHEN %(has_vector)s AND vector_dims(e.embedding) = %(dim)s
                THEN (e.embedding <=> q.vec)::float8 END AS distance,
           CASE WHEN e.search_tsv @@ q.tsq THEN ts_rank(e.search_tsv, q.tsq, 1)::float8 END AS text_score
    FROM episodes e CROSS JOIN q
    WHERE e.tenant_id = %(tenant_id)s AND e.user_id = %(user_id)s
      AND e.status = 'current' AND e.compressed_into IS NULL
      AND e.ended_at <= %(now)s::timestamptz
      AND (%(purposes)s::text[] IS NULL OR e.purpose = ANY (%(purposes)s::text[]))
),
sup AS MATERIALIZED (SELECT array_agg(id) AS ids FROM s WHERE is_super),  -- NULL: the user has no super-summary
src AS MATERIALIZED (
    SELECT e.id, e.ended_at, e.importance::float8 AS importance, e.pinned_at IS NOT NULL AS pinned,
           e.compressed_into, false AS is_super,
           CASE WHEN %(has_vector)s AND vector_dims(e.embedding) = %(dim)s
                THEN (e.embedding <=> q.vec)::float8 END AS distance,
           CASE WHEN e.search_tsv @@ q.tsq THEN ts_rank(e.search_tsv, q.tsq, 1)::float8 END AS text_score
    FROM episodes e CROSS JOIN q
    WHERE e.tenant_id = %(tenant_id)s
      AND e.compressed_into = ANY ((SELECT ids FROM sup)::bigint[])
      AND e.user_id = %(user_id)s AND e.status = 'current' AND e.kind = 'session'
      AND e.ended_at <= %(now)s::timestamptz
      AND (%(purposes)s::text[] IS NULL OR e.purpose = ANY (%(purposes)s::text[]))
),
-- The sessions whose lines the line search may read, when the user has a super (else the first lists hold them).
pool AS NOT MATERIALIZED (
    SELECT * FROM s WHERE NOT is_super AND (SELECT ids IS NOT NULL FROM sup) UNION ALL SELECT * FROM src
)
(SELECT id, ended_at, importance, pinned, distance, text_score, compressed_into, is_super,
        NULL::float8 AS sim_mean, NULL::float8 AS sim_sd,
        NULL::bigint AS candidates, NULL::text AS embedder, NULL::int AS embedding_dim
 FROM s ORDER BY distance NULLS LAST, id LIMIT %(depth)s)
UNION
(SELECT id, ended_at, importance, pinned, distance, text_score, compressed_into, is_super, NULL, NULL, NULL, NULL, NULL
 FROM s WHERE text_score IS NOT NULL ORDER BY text_score DESC, id LIMIT %(depth)s)
UNION
(SELECT id, ended_at, importance, pinned, distance, text_score, compressed_into, is_super, NULL, NULL, NULL, NULL, NULL
 FROM s ORDER BY ended_at DESC, id DESC LIMIT %(recent_n)s)
UNION
(SELECT id, ended_at, importance, pinned, distance, text_score, compressed_into, is_super, NULL, NULL, NULL, NULL, NULL
 FROM s WHERE id = ANY (%(extra_ids)s::bigint[]))
UNION
(SELECT id, ended_at, importance, pinned, distance, text_score, compressed_into, is_super, NULL, NULL, NULL, NULL, NULL
 FROM pool ORDER BY distance NULLS LAST, id LIMIT %(line_n)s)
UNION
(SELECT id, ended_at, importance, pinned, distance, text_score, compressed_into, is_super, NULL, NULL, NULL, NULL, NULL
 FROM pool WHERE text_score IS NOT NULL ORDER BY text_score DESC, id LIMIT %(line_n)s)
UNION ALL
(SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, avg(1 - distance), stddev_pop(1 - distance), count(*),
        (SELECT max(value) FROM episodes_settings WHERE key = 'embedder'),
        (SELECT max(value) FROM episodes_settings WHERE key = 'embedding_dim')::int
 FROM s)

-- name: recall_rows
-- The chosen episodes (ids from jobs/recall/scoring.py), read by the primary key (tenant_id, id) alone:
-- with the user's conditions in the WHERE, a generic plan (estimating a few rows per user) walks the
-- user's index instead (10,000 rows, 18 ms, for a heavy user, against 0.1 ms). The same transaction
-- scored them, so they are still the user's candidates. Their embedding comes as vector_send's bytes
-- (int16 dim, int16 unused, dim float4) for fitting's deduplication. One table, the tenant named once and
-- no subquery: on a cluster that is Citus' fast path, planned once and not deparsed.
SELECT e.id, e.kind, e.session_id, e.purpose, e.summary, e.topic_tags, e.importance, e.started_at, e.ended_at,
       e.period_start, e.period_end,
       CASE WHEN vector_dims(e.embedding) = %(dim)s THEN vector_send(e.embedding) END AS embedding
FROM episodes e
WHERE e.tenant_id = %(tenant_id)s AND e.id = ANY (%(ids)s::bigint[])

-- name: recall_open_items
-- Still-open questions and commitments of the user's candidate episodes (current, not compressed, ended by
-- %(now)s, of an allowed purpose: an item of a compressed episode lives on in its super-summary's events),
-- a page (%(limit)s from %(offset)s) at a time; jobs/recall/open_items.py reads the next page only while it
-- has too few distinct ones. A stale item (past its due date by more than %(grace_seconds)s, or without
-- one older than %(age_seconds)s, as of %(now)s: episodes_item_stale, migration 0009) is kept only when it
-- is related to the opening message: its text and the message share a word stem (episodes_message_stems,
-- migration 0022: to_tsvector('english'), stop words dropped, only stems of 3+ letters). Fresh items
-- first, newest first; then related stale ones. Both tables filtered by the tenant and joined on it: on a
-- cluster a router query, on the tenant's shards a plain one.
SELECT ev.id, ev.episode_id, ev.type, ev.what, ev.who, ev.due, ev.occurred_at,
       episodes_item_stale(ev.due, ev.occurred_at, %(now)s::timestamptz,
                           make_interval(secs => %(grace_seconds)s), make_interval(secs => %(age_seconds)s)) AS stale
FROM episode_events ev
JOIN episodes e ON e.tenant_id = ev.tenant_id AND e.id = ev.episode_id
WHERE ev.tenant_id = %(tenant_id)s AND e.tenant_id = %(tenant_id)s AND ev.user_id = %(user_id)s
  AND ev.type IN ('open_question', 'commitment') AND ev.status = 'open'
  AND e.status = 'current' AND e.compressed_into IS NULL AND e.ended_at <= %(now)s::timestamptz
  AND (%(purposes)s::text[] IS NULL OR e.purpose = ANY (%(purposes)s::text[]))
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

-- name: recall_lines
-- Every line (episode_lines, migration 0032) of the episodes %(episode_ids)s ranked against the opening message
-- two ways and fused by reciprocal rank, the %(limit)s best returned; jobs/recall/quotes.py quotes them under
-- their episodes within the budget, and the episodes they come from are read with the chosen ones (lines are
-- the evidence an episode is chosen by). Lines, not only those of the episodes chosen first: the answer is
-- often one line of a session whose summary says nothing of it (issue 47).
--   similarity   cosine similarity of the line's embedding to the message's (same embedder; NULL when its
--                vector has another dimension, between `episodes reembed`'s switch and the line's rewrite)
--   score        that or, if higher, %(neighbour)s times the best similarity of the line before or after it
--                in its session: the answer to a matching question is the next line, and the question
--                before a matching answer says what it answers
--   text_score   ts_rank(text_tsv, q, 1), q the message's lexemes OR-ed (migration 0037's text_tsv, english;
--                NULL: no lexeme of the message occurs): names, numbers and identifiers an embedding blurs
--   fused        %(w_vector)s / (%(rrf_k)s + rank by score) + %(w_text)s / (%(rrf_k)s + rank by text_score),
--                each rank counted only within its first %(depth)s
-- Whose lines (%(episode_ids)s, jobs/recall/scoring.py line_episodes): of the rows recall_scores returned in
-- the same transaction, the user's line_episodes sessions closest to the message and the line_episodes that
-- match its words best (every one of a user with fewer), the sessions a super-summary holds among them (their
-- lines are quoted under it: jobs/recall/scoring.py under_supers; a super has none of its own, migration 0041).
-- The work of a user with 10,000 episodes is then
-- bounded by episodes, not by their ~10x as many lines (all of them ranked: 132.8 ms of PostgreSQL per recall
-- under bench/api_load.py's mix, issue 47; this statement for a user of 10,000 episodes and 299,926 lines:
-- 1,854 ms with every line, 82 ms with 100), and the candidates are scored once, by recall_scores (this
-- statement scored them again before: ~45 ms of those 82 for a heavy user, docs/benchmarks.md).
-- Exact within those rows (a typical user has a few hundred to a few thousand lines). The line's
-- embedding comes as vector_send's bytes for fitting's newest-wins check (two lines about one thing).
-- Both tables filtered by the tenant and joined on it: on a cluster a router query.
WITH q AS (
    SELECT %(vector)s::vector AS vec,
           (SELECT nullif(string_agg('''' || replace(replace(lex, '\', '\\'), '''', '''''') || '''', ' | '), '')::tsquery
            FROM unnest(tsvector_to_array(to_tsvector('english', %(query_text)s::text))) AS lex) AS tsq
),
l AS MATERIALIZED (
    SELECT l.episode_id, l.ordinal,
           CASE WHEN vector_dims(l.embedding) = %(dim)s THEN 1 - (l.embedding <=> q.vec) END AS similarity,
           CASE WHEN l.text_tsv @@ q.tsq THEN ts_rank(l.text_tsv, q.tsq, 1)::float8 END AS text_score
    FROM episode_lines l
    CROSS JOIN q
    WHERE l.tenant_id = %(tenant_id)s AND l.user_id = %(user_id)s AND l.episode_id = ANY (%(episode_ids)s::bigint[])
),
n AS MATERIALIZED (
    SELECT l.*, greatest(similarity, %(neighbour)s * max(similarity) OVER near) AS score
    FROM l
    WINDOW near AS (PARTITION BY episode_id ORDER BY ordinal ROWS BETWEEN 1 PRECEDING AND 1 FOLLOWING)
),
-- Each list's first %(depth)s by a top-N sort (a heap of %(depth)s rows), ranked among themselves: the ranks are
-- those of a full sort of every line, which a user with 10,000 episodes paid for twice (~6,000 lines each time).
v AS (
    SELECT top.*, row_number() OVER (ORDER BY score DESC, episode_id, ordinal) AS vector_rank
    FROM (SELECT * FROM n WHERE score IS NOT NULL ORDER BY score DESC, episode_id, ordinal LIMIT %(depth)s) top
),
t AS (
    SELECT top.*, row_number() OVER (ORDER BY text_score DESC, episode_id, ordinal) AS text_rank
    FROM (SELECT * FROM n WHERE text_score IS NOT NULL ORDER BY text_score DESC, episode_id, ordinal LIMIT %(depth)s) top
),
best AS (
    SELECT coalesce(v.episode_id, t.episode_id) AS episode_id, coalesce(v.ordinal, t.ordinal) AS ordinal,
           coalesce(v.similarity, t.similarity) AS similarity, coalesce(v.score, t.score) AS score,
           coalesce(v.text_score, t.text_score) AS text_score,
           coalesce(%(w_vector)s / (%(rrf_k)s + v.vector_rank), 0.0)
           + coalesce(%(w_text)s / (%(rrf_k)s + t.text_rank), 0.0) AS fused
    FROM v FULL JOIN t ON t.episode_id = v.episode_id AND t.ordinal = v.ordinal
    ORDER BY fused DESC, episode_id, ordinal
    LIMIT %(limit)s
)
-- Only the few chosen rows carry their text and embedding (read back by the primary key): the sorts above
-- then hold a few numbers a line and stay in memory (with the text and vector, 10,000 lines sorted on disk).
SELECT b.episode_id, b.ordinal, l.speaker, l.text, l.said_at, coalesce(b.similarity, 0.0) AS similarity,
       coalesce(b.score, 0.0) AS score, b.text_score, b.fused,
       CASE WHEN vector_dims(l.embedding) = %(dim)s THEN vector_send(l.embedding) END AS embedding
FROM best b
JOIN episode_lines l ON l.tenant_id = %(tenant_id)s AND l.episode_id = b.episode_id AND l.ordinal = b.ordinal
ORDER BY b.fused DESC, b.episode_id, b.ordinal

-- name: recall_quoted_episodes
-- Which of the chosen episodes keep lines at all (episode_lines, migration 0032): fitting shows an episode that
-- has none (a super-summary of sessions without lines, an episode stored before lines were kept) by its full
-- summary, and one whose lines just did not match by a one-line header. A super-summary keeps the lines of the
-- sessions it holds (migration 0041). Probes of the primary key (tenant_id, episode_id, ordinal), and for a super of
-- episodes_compressed_into_idx, each stopping at the first row: a DISTINCT over the lines read every line of a
-- super (244 ms for one holding 101,321 copies, bench/compressed_recall.py's heavy user).
SELECT i.id AS episode_id
FROM unnest(%(ids)s::bigint[]) AS i (id)
WHERE EXISTS (SELECT FROM episode_lines l WHERE l.tenant_id = %(tenant_id)s AND l.episode_id = i.id)
   OR EXISTS (SELECT FROM episodes s
              JOIN episode_lines l ON l.tenant_id = s.tenant_id AND l.episode_id = s.id
              WHERE s.tenant_id = %(tenant_id)s AND l.tenant_id = %(tenant_id)s AND s.compressed_into = i.id)

-- name: recall_replaced
-- Of the chosen episodes, those holding a decision or preference that a later session replaced (later
-- wins, migration 0008), with when the first replacement was made (the block marks them so) and the episodes
-- holding the replacing events (`replaced_by`: the block shows and labels those, not whatever else that day held).
SELECT old.episode_id, min(new.occurred_at) AS replaced_at, array_agg(DISTINCT new.episode_id) AS replaced_by
FROM episode_events old
JOIN episode_events new ON new.tenant_id = old.tenant_id AND new.id = old.superseded_by
WHERE old.tenant_id = %(tenant_id)s AND new.tenant_id = %(tenant_id)s
  AND old.episode_id = ANY (%(ids)s::bigint[]) AND old.superseded_by IS NOT NULL
GROUP BY old.episode_id
