-- analyst.entity_mentions: its query and its comments. The view analysts query, analyst.entity_mentions, is made by
-- 90_scoped.sql over this internal one (read with the owner's rights, scoped to the caller's tenant) and
-- gets these comments. Every join includes tenant_id, so the query runs on a Citus cluster too.

CREATE VIEW analyst._entity_mentions AS
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
JOIN episodes e ON e.tenant_id = en.tenant_id AND e.id = en.episode_id
WHERE e.kind = 'session' AND e.status = 'current';

COMMENT ON VIEW analyst._entity_mentions IS
    'One row per entity named in a current session episode (one mention per episode, name and kind).';
COMMENT ON COLUMN analyst._entity_mentions.tenant_id IS 'Tenant of the user.';
COMMENT ON COLUMN analyst._entity_mentions.user_id IS 'The user whose session mentioned it.';
COMMENT ON COLUMN analyst._entity_mentions.entity IS 'The name exactly as written in the transcript.';
COMMENT ON COLUMN analyst._entity_mentions.entity_key IS
    'Lowercased name, to group spellings that differ only in case.';
COMMENT ON COLUMN analyst._entity_mentions.kind IS 'person, org, product, project, place or other.';
COMMENT ON COLUMN analyst._entity_mentions.episode_id IS 'The episode that mentions it.';
COMMENT ON COLUMN analyst._entity_mentions.session_id IS 'The session of that episode.';
COMMENT ON COLUMN analyst._entity_mentions.mentioned_at IS 'End of that session.';
COMMENT ON COLUMN analyst._entity_mentions.topic_tags IS 'Topic tags of that episode.';
