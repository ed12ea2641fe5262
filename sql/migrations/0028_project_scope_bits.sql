-- 0028: Claude Code project purposes keep 64 bits of the project path's digest (issue 35, item 4).
--
-- A Claude Code session's purpose scopes recall to its project: it was `cc-<slug>-<6 hex>`, 24 bits
-- of SHA-256(path), and a look-alike sibling folder with the same 24 bits was found in 3.5 s, then
-- shared the other project's memory. jobs/formats/claude_code.py:project_purpose now gives
-- `cc-<slug cut to 44>-<16 hex>` (at most 64 characters, the purpose's limit). This moves the
-- purposes already stored, computed as Python computes them:
--
--   new = 'cc-' || rtrim(left(<old slug>, 44), '-') || '-' || left(hex(sha256(<path>)), 16)
--
-- The slug is the old purpose's own (so PostgreSQL's lower() never has to agree with Python's).
-- The path cannot be recovered from 24 bits of its digest; it is read from what the transcript kept:
--
-- 1. A transcript whose metadata names its project (0025: `metadata.project`, the session's cwd)
--    and whose old digest is that path's (so the purpose was computed from exactly that text) moves
--    to its own new purpose; so do its episodes that still carry the old one.
-- 2. A row without such a path of its own (a transcript stored before 0025 or by a hook whose file
--    named no project, an episode whose transcript was deleted, a super-summary) moves where the
--    same user's verified rows map its old purpose to exactly one new purpose.
-- 3. What is left keeps its old purpose: an old purpose two of the user's paths share (the
--    collision itself: which project such a row belongs to cannot be told), or one no stored path
--    explains. Such rows stay valid and queryable for analysts but are no longer recalled in any
--    project; `purpose ~ '^cc-.+-[0-9a-f]{6}$'` finds them, and re-storing their session files
--    (`episodes claude-code sync --all`, or `episodes ingest --format claude-code`) gives those
--    sessions the new purpose (docs/claude-code.md, "Upgrading").
--
-- Episodes first, while the transcripts still hold the old purposes they are matched on. Plain
-- expressions and no temporary objects, so the statements also run on a Citus cluster (pushed down
-- by tenant_id). Updating episodes.purpose moves each user's recall counter (episodes_stamp_change),
-- so warm copies re-read the moved rows; packed copies of the users touched are dropped too.

WITH verified AS (   -- 1: transcripts whose own stored path reproduces their old digest
    SELECT tenant_id, user_id, id, purpose AS old_purpose,
           'cc-' || rtrim(left(substring(purpose FROM '^cc-(.+)-[0-9a-f]{6}$'), 44), '-') || '-'
           || left(encode(sha256(convert_to(metadata->>'project', 'UTF8')), 'hex'), 16) AS new_purpose
    FROM transcripts
    WHERE purpose ~ '^cc-.+-[0-9a-f]{6}$' AND metadata->>'project' IS NOT NULL
      AND right(purpose, 6) = left(encode(sha256(convert_to(metadata->>'project', 'UTF8')), 'hex'), 6)
), by_user AS (      -- 2: an old purpose the user's verified rows map to exactly one new purpose
    SELECT tenant_id, user_id, old_purpose, min(new_purpose) AS new_purpose
    FROM verified
    GROUP BY tenant_id, user_id, old_purpose
    HAVING count(DISTINCT new_purpose) = 1
)
UPDATE episodes e SET purpose = coalesce(v.new_purpose, u.new_purpose)
FROM episodes o
LEFT JOIN verified v ON v.tenant_id = o.tenant_id AND v.id = o.transcript_id AND v.old_purpose = o.purpose
LEFT JOIN by_user u ON u.tenant_id = o.tenant_id AND u.user_id = o.user_id AND u.old_purpose = o.purpose
WHERE e.tenant_id = o.tenant_id AND e.id = o.id
  AND o.purpose ~ '^cc-.+-[0-9a-f]{6}$' AND coalesce(v.new_purpose, u.new_purpose) IS NOT NULL;

WITH verified AS (   -- 1: transcripts whose own stored path reproduces their old digest
    SELECT tenant_id, user_id, id, purpose AS old_purpose,
           'cc-' || rtrim(left(substring(purpose FROM '^cc-(.+)-[0-9a-f]{6}$'), 44), '-') || '-'
           || left(encode(sha256(convert_to(metadata->>'project', 'UTF8')), 'hex'), 16) AS new_purpose
    FROM transcripts
    WHERE purpose ~ '^cc-.+-[0-9a-f]{6}$' AND metadata->>'project' IS NOT NULL
      AND right(purpose, 6) = left(encode(sha256(convert_to(metadata->>'project', 'UTF8')), 'hex'), 6)
), by_user AS (      -- 2: an old purpose the user's verified rows map to exactly one new purpose
    SELECT tenant_id, user_id, old_purpose, min(new_purpose) AS new_purpose
    FROM verified
    GROUP BY tenant_id, user_id, old_purpose
    HAVING count(DISTINCT new_purpose) = 1
)
UPDATE transcripts t SET purpose = coalesce(v.new_purpose, u.new_purpose)
FROM transcripts o
LEFT JOIN verified v ON v.tenant_id = o.tenant_id AND v.id = o.id
LEFT JOIN by_user u ON u.tenant_id = o.tenant_id AND u.user_id = o.user_id AND u.old_purpose = o.purpose
WHERE t.tenant_id = o.tenant_id AND t.id = o.id
  AND o.purpose ~ '^cc-.+-[0-9a-f]{6}$' AND coalesce(v.new_purpose, u.new_purpose) IS NOT NULL;

DELETE FROM recall_packs p
USING (SELECT DISTINCT tenant_id, user_id FROM episodes WHERE purpose ~ '^cc-.+-[0-9a-f]{16}$') moved
WHERE p.tenant_id = moved.tenant_id AND p.user_id = moved.user_id;
