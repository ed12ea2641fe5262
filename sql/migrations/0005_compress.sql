-- 0005: indexes under the foreign keys that deleting a super-summary walks (jobs/compress.py).
--
-- A super-summary is deleted when a source of it is erased (compress rebuild_period, `episodes
-- forget`) or when fewer than two sources remain. PostgreSQL then clears every reference to it and
-- to each of its events (ON DELETE SET NULL): episodes.compressed_into and superseded_by, and
-- episode_events.source_event_id and resolved_by. Without an index on the referencing column each
-- deleted row costs a scan of the whole table: deleting 4,000 supers (about 100,000 carried events)
-- next to 250,000 events had not finished after 30 minutes. The indexes are partial, as these
-- columns are NULL for most rows; compressed_into's also serves "the sources of this super".
CREATE INDEX episodes_compressed_into_idx ON episodes (compressed_into) WHERE compressed_into IS NOT NULL;
CREATE INDEX episodes_superseded_by_idx ON episodes (superseded_by) WHERE superseded_by IS NOT NULL;
CREATE INDEX episode_events_source_event_idx ON episode_events (source_event_id) WHERE source_event_id IS NOT NULL;
CREATE INDEX episode_events_resolved_by_idx ON episode_events (resolved_by) WHERE resolved_by IS NOT NULL;
