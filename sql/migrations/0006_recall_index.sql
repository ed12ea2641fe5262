-- 0006: what lets a recall process keep each user's scoring data in memory and refresh it
-- incrementally and exactly (jobs/recall_index.py).
--
-- Scoring every one of a user's episodes inside PostgreSQL costs ~2.5 us per row on a 2-core
-- machine (tuple, distance, text match, rank), ~45 ms for a user with 10,000 episodes. Recall
-- therefore scores in process (numpy) from a per-user copy of the scoring columns, and asks the
-- database only for what changed since its copy was taken:
--
-- * episodes.changed_xid: the top-level transaction that last inserted or updated the row (set by a
--   trigger, so every writer is covered: summarize, supersede, compress, redact, lifecycle).
--   A reader remembers the xmin horizon of the snapshot it read with; every transaction below that
--   horizon had finished, so all rows it will ever need again are those with changed_xid >= horizon.
-- * episode_deletions: an append-only log of the transactions that deleted episodes, per tenant
--   (forget, purge, compression rebuilds: rare). A copy of any of the tenant's users taken before
--   such a transaction finished is read anew. Per tenant, not per user, so an erased user's id does
--   not outlive `episodes forget` here; append-only, so deleting transactions never wait on each
--   other. Rows older than 7 days are pruned by `episodes serve` maintenance; copies are read whole
--   at least once a day, so none can miss one. TRUNCATE is not tracked (an operator's action on a
--   stopped system).
--
-- Also: toast_tuple_target = 8160 keeps rows up to ~8 kB uncompressed and in-row. With the default
-- (~2 kB) the in-row embedding (1,536 bytes) pushes most rows over the threshold, so PostgreSQL
-- compresses search_tsv and summary, and every reader decompresses them again (measured: a text
-- match over 10,000 rows 40 ms compressed, 12 ms plain). Applies to rows written from now on.

ALTER TABLE episodes SET (toast_tuple_target = 8160);

ALTER TABLE episodes ADD COLUMN changed_xid xid8 NOT NULL DEFAULT '0';  -- rows before this migration: "long ago"
CREATE INDEX episodes_user_changed_idx ON episodes (tenant_id, user_id, changed_xid);

CREATE FUNCTION episodes_stamp_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.changed_xid := pg_current_xact_id();
    RETURN NEW;
END
$$;
CREATE TRIGGER episodes_stamp_change BEFORE INSERT OR UPDATE ON episodes
    FOR EACH ROW EXECUTE FUNCTION episodes_stamp_change();

CREATE TABLE episode_deletions (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant_id   text NOT NULL,
    deleted_xid xid8 NOT NULL,
    deleted_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX episode_deletions_tenant_idx ON episode_deletions (tenant_id, deleted_xid);
GRANT SELECT, INSERT ON episode_deletions TO episodes_app;
GRANT USAGE ON SEQUENCE episode_deletions_id_seq TO episodes_app;
ALTER TABLE episode_deletions ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON episode_deletions TO episodes_app
    USING (tenant_id = current_setting('episodes.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('episodes.tenant_id', true));

CREATE FUNCTION episodes_note_deletion() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO episode_deletions (tenant_id, deleted_xid)
    SELECT DISTINCT tenant_id, pg_current_xact_id() FROM deleted_rows;
    RETURN NULL;
END
$$;
CREATE TRIGGER episodes_note_deletion AFTER DELETE ON episodes
    REFERENCING OLD TABLE AS deleted_rows
    FOR EACH STATEMENT EXECUTE FUNCTION episodes_note_deletion();
