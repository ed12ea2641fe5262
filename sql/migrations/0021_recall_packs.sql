-- 0021: a packed copy of a heavy user's recall state, so a user's first recall in a process need not
-- read and encode every row of the user (jobs/recall/packs.py, README "Recall").
--
-- A user's first recall in a process builds the in-process copy (jobs/recall/index.py) from all the
-- user's episodes: for 10,000 episodes one statement of ~100-140 ms (vector_send of every row,
-- scattered heap pages) plus ~40 ms of building. recall_packs keeps that copy as it is held in memory
-- (unit vectors, grouped postings, ...), each array one bytea, with the counter version and epoch
-- (recall_versions, 0016/0019) it holds every change up to. A cold copy reads the pack, then what
-- changed since its version like any warm copy; a pack whose counter saw a deletion since, or of
-- another counter (epoch), is not read.
--
-- A pack holds embeddings and lexemes of the user's episodes, so it must not outlive any of them:
-- 1. Deleting an episode moves the counter's deleted_version (0016), reembed's switch moves every
--    one, and `episodes forget` deletes the counter: a trigger on recall_versions drops the user's pack
--    whenever either happens, in the same transaction. An update that changes an episode's embedding
--    or search_tsv in place drops it too (episodes_stamp_change). On a cluster these run on the node
--    holding the shard; the pack is co-located with the counter (jobs/cluster.py TENANT_TABLES).
-- 2. A pack is written (jobs/recall/packs.py) only where the counter row is still at the version the
--    pack was read at, and the write locks that row FOR SHARE (trigger episodes_pack_at_version) to
--    the end of the writing transaction. A transaction that erases waits for that lock before moving
--    the counter, and then its trigger deletes the committed pack; a write that comes after it finds
--    the counter moved and writes nothing. So no pack is ever committed holding content erased
--    before its commit.

CREATE TABLE recall_packs (
    tenant_id     text NOT NULL,
    user_id       text NOT NULL,
    version       bigint NOT NULL,   -- the counter the pack holds every change up to
    epoch         uuid,              -- which counter (NULL for counters made before 0019)
    dim           int NOT NULL,      -- of the vectors
    rows          int NOT NULL,
    ids           bytea NOT NULL,    -- int64, native order (jobs/recall/index.py UserIndex.pack)
    ended_us      bytea NOT NULL,    -- int64
    importance    bytea NOT NULL,    -- float64
    pinned        bytea NOT NULL,    -- bool, one byte
    purpose       bytea NOT NULL,    -- int32 codes into purposes
    purposes      text[] NOT NULL,
    has_vec       bytea NOT NULL,    -- bool
    vectors       bytea NOT NULL,    -- float32, rows x dim, unit length
    lengths       bytea NOT NULL,    -- int64: positions of search_tsv (ts_rank's document length)
    lexemes       bytea NOT NULL,    -- each lexeme followed by one NUL, in posting order
    bounds        bytea NOT NULL,    -- int64: where each lexeme's run starts in slots/tf (and the end)
    slots         bytea NOT NULL,    -- int32
    tf            bytea NOT NULL,    -- uint8: positions - 1
    written_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, user_id)
);
COMMENT ON TABLE recall_packs IS
    'Per heavy user: the recall copy as held in memory, at a counter version (jobs/recall/packs.py); dropped on any erasure.';
-- Vectors do not compress: no pglz attempt on ~16 MB a write or a read, but still out of line.
ALTER TABLE recall_packs ALTER COLUMN vectors SET STORAGE EXTERNAL, ALTER COLUMN slots SET STORAGE EXTERNAL,
    ALTER COLUMN ids SET STORAGE EXTERNAL, ALTER COLUMN ended_us SET STORAGE EXTERNAL,
    ALTER COLUMN importance SET STORAGE EXTERNAL, ALTER COLUMN lengths SET STORAGE EXTERNAL;
GRANT SELECT, INSERT, UPDATE, DELETE ON recall_packs TO episodes_app;
ALTER TABLE recall_packs ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON recall_packs TO episodes_app
    USING (tenant_id = current_setting('episodes.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('episodes.tenant_id', true));

-- The writer's lock, taken by the write itself: a pack is stored only while the user's counter is still
-- at the pack's version (and epoch), and the counter row stays locked FOR SHARE to the end of the
-- writing transaction; otherwise the row is skipped (the INSERT reports 0 rows). A trigger, so on a
-- cluster it runs on the node holding the shard; owner's rights, as FOR SHARE needs the UPDATE
-- privilege the app role does not have on the counters.
CREATE FUNCTION episodes_pack_at_version() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
BEGIN
    PERFORM FROM recall_versions r
    WHERE r.tenant_id = NEW.tenant_id AND r.user_id = NEW.user_id
      AND r.version = NEW.version AND r.epoch IS NOT DISTINCT FROM NEW.epoch
    FOR SHARE;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER recall_packs_at_version BEFORE INSERT OR UPDATE ON recall_packs
    FOR EACH ROW EXECUTE FUNCTION episodes_pack_at_version();

-- Drops the user's pack. Owner's rights: whoever erases (the bump, reembed, forget, a correction as
-- the app role) may not otherwise delete packs. Called after the counter row is locked (see 2. above).
CREATE FUNCTION episodes_drop_pack(tenant text, usr text) RETURNS void
LANGUAGE sql SECURITY DEFINER SET search_path = public AS $$
    DELETE FROM recall_packs WHERE tenant_id = tenant AND user_id = usr;
$$;
REVOKE ALL ON FUNCTION episodes_drop_pack(text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION episodes_drop_pack(text, text) TO episodes_app;

CREATE FUNCTION episodes_counter_drop_pack() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM episodes_drop_pack(OLD.tenant_id, OLD.user_id);
    RETURN NULL;
END
$$;
CREATE TRIGGER recall_versions_drop_pack AFTER UPDATE ON recall_versions
    FOR EACH ROW WHEN (NEW.deleted_version IS DISTINCT FROM OLD.deleted_version)
    EXECUTE FUNCTION episodes_counter_drop_pack();
CREATE TRIGGER recall_versions_gone_drop_pack AFTER DELETE ON recall_versions
    FOR EACH ROW EXECUTE FUNCTION episodes_counter_drop_pack();

-- As 0016, and an in-place change of what a pack holds of the row (embedding, search_tsv: a correction
-- re-indexes the episode, --purge-embeddings drops vectors) drops the user's pack, after the bump has
-- locked the counter. Warm copies read the new values as any change; only the pack holds the old ones.
CREATE OR REPLACE FUNCTION episodes_stamp_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' AND current_setting('episodes.reembed_write', true) = 'on' THEN
        RETURN NEW;
    END IF;
    NEW.changed_version := episodes_bump_version(NEW.tenant_id, NEW.user_id, false);
    IF TG_OP = 'UPDATE' THEN
        IF NEW.embedding IS DISTINCT FROM OLD.embedding OR NEW.search_tsv IS DISTINCT FROM OLD.search_tsv THEN
            PERFORM episodes_drop_pack(NEW.tenant_id, NEW.user_id);
        END IF;
    END IF;
    RETURN NEW;
END
$$;
