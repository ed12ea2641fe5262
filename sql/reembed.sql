-- Named queries of `episodes reembed` (jobs/lifecycle/reembed.py). Same format as sql/queries.sql.
-- The job runs as the owner across tenants; the identifiers it composes (the column's dimension)
-- are in Python, through psycopg.sql.

-- name: reembed_state
SELECT embedder, dim, started_at FROM reembed_state

-- name: reembed_begin
INSERT INTO reembed_state (embedder, dim) VALUES (%(embedder)s, %(dim)s)

-- name: reembed_progress
-- Episodes with a vector (purged sources of compressed periods have none and keep none), and of
-- those the ones whose new vector is written.
SELECT count(*) FILTER (WHERE embedding IS NOT NULL) AS total,
       count(*) FILTER (WHERE embedding IS NOT NULL AND embedding_next IS NOT NULL) AS done
FROM episodes

-- name: reembed_batch
-- The next episodes without a new vector, in id order after %(after)s, with what their text is made of
-- (jobs.models.episode_text; a super-summary's vector takes its first five events, as compress writes it).
SELECT e.id, e.kind, e.changed_version, e.summary, e.topic_tags,
       ARRAY(SELECT ev.what FROM episode_events ev
             WHERE ev.tenant_id = e.tenant_id AND ev.episode_id = e.id ORDER BY ev.ordinal) AS events,
       ARRAY(SELECT en.name FROM episode_entities en
             WHERE en.tenant_id = e.tenant_id AND en.episode_id = e.id ORDER BY en.id) AS entities
FROM episodes e
WHERE e.embedding IS NOT NULL AND e.embedding_next IS NULL AND e.id > %(after)s
ORDER BY e.id
LIMIT %(limit)s

-- name: reembed_write
-- Only rows unchanged since they were read (same changed_version, which every update of the row moves:
-- migration 0035): a row corrected meanwhile keeps its NULL embedding_next, and the switch embeds it again.
UPDATE episodes e SET embedding_next = v.vec::vector
FROM unnest(%(ids)s::bigint[], %(versions)s::int8[], %(vecs)s::text[]) AS v(id, version, vec)
WHERE e.id = v.id AND e.changed_version = v.version AND e.embedding IS NOT NULL

-- name: reembed_finish_settings
-- The switch: the recorded embedder and dimension become the new ones.
UPDATE episodes_settings SET value = CASE key WHEN 'embedder' THEN %(embedder)s ELSE %(dim)s::text END
WHERE key IN ('embedder', 'embedding_dim')

-- name: reembed_end
DELETE FROM reembed_state

-- name: hold_episodes_schema
-- Taken by a reader before it asks which embedder the vectors are of: the switch's ALTER TABLE then
-- waits for the reader's transaction, so every statement in it sees the same embedding column
-- (read committed gives each statement its own snapshot; the lock keeps them on one side of the switch).
LOCK TABLE episodes IN ACCESS SHARE MODE

-- name: recorded_embedder
SELECT max(value) FILTER (WHERE key = 'embedder') AS embedder,
       max(value) FILTER (WHERE key = 'embedding_dim')::int AS dim
FROM episodes_settings

-- name: reembed_count
-- Episodes with a vector: what a re-embed would do (purged sources of compressed periods have none).
SELECT count(*) AS n FROM episodes WHERE embedding IS NOT NULL

-- name: reembed_lines_batch
-- After the switch: the next episode lines (migration 0032) in key order, to embed again with the new
-- embedder (jobs/lifecycle/reembed.py). Keyset pagination over the primary key.
SELECT tenant_id, episode_id, ordinal, text
FROM episode_lines
WHERE (tenant_id, episode_id, ordinal) > (%(tenant_id)s, %(episode_id)s, %(ordinal)s)
ORDER BY tenant_id, episode_id, ordinal
LIMIT %(limit)s

-- name: reembed_lines_write
UPDATE episode_lines l SET embedding = v.vec::vector
FROM unnest(%(tenants)s::text[], %(episodes)s::bigint[], %(ordinals)s::int[], %(vecs)s::text[])
     AS v(tenant_id, episode_id, ordinal, vec)
WHERE l.tenant_id = v.tenant_id AND l.episode_id = v.episode_id AND l.ordinal = v.ordinal
