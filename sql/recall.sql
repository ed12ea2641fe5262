-- Named queries of recall (jobs/recall.py). Same format as sql/queries.sql: each block starts
-- with "-- name: <name>". Every query runs inside Database.tenant(): row-level security already
-- hides other tenants; the tenant_id / user_id conditions select the user's rows and let the
-- planner use episodes_user_recent_idx (tenant_id, user_id, ended_at DESC) WHERE status = 'current'.

-- name: recall_candidates
-- Exact per-user scoring: every candidate row of the user (current, not compressed into a
-- super-summary, ended by %(now)s, purpose allowed) is scored; nothing comes from an approximate
-- index, so the top K is exact within the user's rows.
--   vector_rank  rank by cosine distance to the opening message (pgvector <=>)
--   text_rank    rank by ts_rank (normalised by 1 + log(length), so long episodes are not favoured)
--                of the opening message's lexemes OR-ed together over search_tsv (summary, tags,
--                events, entities; english config); no rank when no lexeme matches
--   score        reciprocal rank fusion of the two lists' first %(depth)s ranks (a rank beyond
--                them adds nothing, as usual for RRF), times a soft time decay
--                (floor + (1 - floor) * 0.5 ^ (age_days / half_life)) and an importance factor
--                (1 + w_importance * (importance - 0.5))
-- Only the first ranks are needed, so each list is a top-N heapsort, not a full sort of the user's
-- rows: per candidate row the cost is one heap tuple, one distance and one text match.
-- Returned: the top %(top_k)s by score (relevance_rank 1..top_k), the last %(recent_n)s by ended_at
-- (recency_rank 1..recent_n), and the episodes listed in %(extra_ids)s (those holding open items),
-- each with its scores; a rank outside its list is NULL.
WITH q AS (
    SELECT %(query_vec)s::vector AS vec,
           (SELECT nullif(string_agg('''' || replace(replace(lex, '\', '\\'), '''', '''''') || '''', ' | '), '')::tsquery
            FROM unnest(tsvector_to_array(to_tsvector('english', %(query_text)s::text))) AS lex) AS tsq
),
scored AS MATERIALIZED (
    SELECT e.id, e.ended_at, e.importance,
           (e.embedding <=> q.vec)::float8 AS distance,
           CASE WHEN e.search_tsv @@ q.tsq THEN ts_rank(e.search_tsv, q.tsq, 1)::float8 END AS text_score
    FROM episodes e CROSS JOIN q
    WHERE e.tenant_id = %(tenant_id)s AND e.user_id = %(user_id)s
      AND e.status = 'current' AND e.compressed_into IS NULL
      AND e.ended_at <= %(now)s::timestamptz
      AND (%(purposes)s::text[] IS NULL OR e.purpose = ANY (%(purposes)s::text[]))
),
by_vector AS (
    SELECT t.*, row_number() OVER (ORDER BY t.distance, t.id) AS vector_rank
    FROM (SELECT id, ended_at, importance, distance FROM scored WHERE distance IS NOT NULL
          ORDER BY distance, id LIMIT %(depth)s) t
),
by_text AS (
    SELECT t.*, row_number() OVER (ORDER BY t.text_score DESC, t.id) AS text_rank
    FROM (SELECT id, ended_at, importance, text_score FROM scored WHERE text_score IS NOT NULL
          ORDER BY text_score DESC, id LIMIT %(depth)s) t
),
fused AS MATERIALIZED (
    SELECT coalesce(v.id, t.id) AS id, v.vector_rank, t.text_rank,
           (coalesce(%(w_vector)s::float8 / (%(rrf_k)s::float8 + v.vector_rank), 0)
            + coalesce(%(w_text)s::float8 / (%(rrf_k)s::float8 + t.text_rank), 0))
           -- date_part, not extract: extract returns numeric, many times slower
           * (%(decay_floor)s::float8 + (1 - %(decay_floor)s::float8)
              * power(0.5::float8, greatest(date_part('epoch', %(now)s::timestamptz
                                                      - coalesce(v.ended_at, t.ended_at)), 0)
                                   / 86400.0 / %(half_life_days)s::float8))
           * (1 + %(w_importance)s::float8 * (coalesce(v.importance, t.importance) - 0.5)) AS score
    FROM by_vector v FULL JOIN by_text t ON t.id = v.id
),
top AS (
    SELECT t.id, row_number() OVER (ORDER BY t.score DESC, t.id) AS relevance_rank
    FROM (SELECT id, score FROM fused ORDER BY score DESC, id LIMIT %(top_k)s) t
),
recent AS (
    SELECT t.id, row_number() OVER (ORDER BY t.ended_at DESC, t.id DESC) AS recency_rank
    FROM (SELECT id, ended_at FROM scored ORDER BY ended_at DESC, id DESC LIMIT %(recent_n)s) t
),
picked AS (
    SELECT id FROM top
    UNION SELECT id FROM recent
    UNION SELECT unnest(%(extra_ids)s::bigint[])
)
SELECT e.id, (e.embedding <=> q.vec)::float8 AS distance,
       CASE WHEN e.search_tsv @@ q.tsq THEN ts_rank(e.search_tsv, q.tsq, 1)::float8 END AS text_score,
       f.vector_rank, f.text_rank, recent.recency_rank, top.relevance_rank, coalesce(f.score, 0) AS score,
       (SELECT count(*) FROM scored) AS candidates,
       e.kind, e.session_id, e.purpose, e.summary, e.topic_tags, e.importance, e.started_at, e.ended_at,
       e.period_start, e.period_end, e.embedding
FROM picked p
JOIN episodes e ON e.id = p.id
CROSS JOIN q
LEFT JOIN fused f ON f.id = p.id
LEFT JOIN top ON top.id = p.id
LEFT JOIN recent ON recent.id = p.id
WHERE e.tenant_id = %(tenant_id)s AND e.user_id = %(user_id)s
  AND e.status = 'current' AND e.compressed_into IS NULL AND e.ended_at <= %(now)s::timestamptz
ORDER BY top.relevance_rank NULLS LAST, recent.recency_rank NULLS LAST, e.id

-- name: recall_open_items
-- Still-open questions and commitments of the user, from episodes that are recall candidates
-- (an item of a compressed episode lives on in its super-summary's events). Newest first.
SELECT ev.id, ev.episode_id, ev.type, ev.what, ev.who, ev.due, ev.occurred_at
FROM episode_events ev
JOIN episodes e ON e.id = ev.episode_id
WHERE ev.tenant_id = %(tenant_id)s AND ev.user_id = %(user_id)s
  AND ev.type IN ('open_question', 'commitment') AND ev.status = 'open'
  AND e.status = 'current' AND e.compressed_into IS NULL
  AND e.ended_at <= %(now)s::timestamptz
  AND (%(purposes)s::text[] IS NULL OR e.purpose = ANY (%(purposes)s::text[]))
ORDER BY ev.occurred_at DESC, ev.id DESC
LIMIT %(limit)s
