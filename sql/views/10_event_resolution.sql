-- analyst._event_resolution (internal, not granted): the effective resolution of each open question and
-- commitment of a session episode. A compressed item's copy in a super-summary (source_event_id, same
-- tenant) is what recall offers, so a later session marks the copy: a resolved copy resolves the source.

CREATE VIEW analyst._event_resolution AS
SELECT ev.id AS event_id,
       CASE WHEN ev.status IN ('resolved', 'done') THEN ev.status ELSE coalesce(c.status, ev.status) END AS status,
       CASE WHEN ev.status IN ('resolved', 'done') THEN ev.resolved_by ELSE c.resolved_by END AS resolved_by,
       CASE WHEN ev.status IN ('resolved', 'done') THEN ev.resolved_at ELSE c.resolved_at END AS resolved_at,
       ev.tenant_id
FROM episode_events ev
LEFT JOIN (
    SELECT DISTINCT ON (tenant_id, source_event_id) tenant_id, source_event_id, status, resolved_by, resolved_at
    FROM episode_events
    WHERE source_event_id IS NOT NULL AND status IN ('resolved', 'done')
    ORDER BY tenant_id, source_event_id, resolved_at NULLS LAST, id
) c ON c.tenant_id = ev.tenant_id AND c.source_event_id = ev.id
WHERE ev.type IN ('open_question', 'commitment');
REVOKE ALL ON analyst._event_resolution FROM PUBLIC;
