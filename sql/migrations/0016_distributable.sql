-- 0016: one schema for a single PostgreSQL and a Citus cluster (README "Scaling out").
--
-- Citus shards a table by one column and keeps the rows of one value together on one node; every
-- tenant table here is sharded by tenant_id and co-located (jobs/cluster.py distributes them when the
-- database has the citus extension). Nothing in this migration needs Citus; on one PostgreSQL it only
-- makes the keys say what the data always was: every row belongs to one tenant.
--
-- 1. Sequences instead of identity columns. Citus 13.2 distributes a table with an identity column,
--    but refuses it in alter_distributed_table (changing the shard count) and undistribute_table
--    ("cannot complete operation on a table with identity column", measured). A sequence default
--    works everywhere; on a worker Citus hands each node its own range of a bigint sequence.
-- 2. Primary keys, unique constraints and foreign keys that include tenant_id: Citus enforces a
--    constraint inside one shard only, so it must hold the distribution column.
-- 3. No ON DELETE SET NULL on those keys (Citus rejects SET NULL when the key holds the distribution
--    column, even with PostgreSQL 15's column list). The references that were cleared that way
--    (superseded_by, compressed_into, resolved_by, source_event_id, events' superseded_by) are now
--    NO ACTION keys, and every path that deletes episodes clears them first with
--    episodes_release_references() below, in the same transaction; a path that forgot would fail on
--    the key, not leave a dangling id. Keys to transcripts are NO ACTION too: only `forget` deletes
--    transcripts, after the episodes and model calls that name them.
-- 4. Recall freshness without transaction ids. Each worker has its own transaction-id space, and a
--    shard moved by the rebalancer keeps the ids of the node it left, so changed_xid (0006) cannot
--    order changes on a cluster. Instead each user has a change counter in recall_versions, bumped
--    by a trigger in every transaction that inserts, updates or deletes one of the user's episodes;
--    the changed rows carry the new value in changed_version. The bump updates one row and holds
--    its lock to the end of the transaction, so the user's writers take turns and their counters
--    commit in order: a reader that sees version V has seen every change up to V, and the rows to
--    read next are exactly those with changed_version > V. A deletion also sets deleted_version
--    (the copy is then read whole). The counter lives beside the user's rows (same shard group), so
--    one statement reads both from one snapshot, and it moves with them.
--    Replaces episode_deletions (per tenant, pruned after a week): deletions are now seen per user.
-- 5. No NOTIFY from a trigger: on a cluster it would fire on the worker holding the shard, where no
--    `serve` listens. The statements that make a transcript eligible notify from the application
--    (sql/queries.sql notify_eligible), on the coordinator.

-- 1 + 2 -----------------------------------------------------------------------------------------
-- Foreign keys first: they depend on the primary keys being replaced.
ALTER TABLE episodes DROP CONSTRAINT episodes_transcript_id_fkey,
                     DROP CONSTRAINT episodes_superseded_by_fkey,
                     DROP CONSTRAINT episodes_compressed_into_fkey;
ALTER TABLE episode_events DROP CONSTRAINT episode_events_episode_id_fkey,
                           DROP CONSTRAINT episode_events_resolved_by_fkey,
                           DROP CONSTRAINT episode_events_source_event_id_fkey,
                           DROP CONSTRAINT episode_events_superseded_by_fkey;
ALTER TABLE episode_entities DROP CONSTRAINT episode_entities_episode_id_fkey;
ALTER TABLE episode_lineage DROP CONSTRAINT episode_lineage_super_episode_id_fkey,
                            DROP CONSTRAINT episode_lineage_source_episode_id_fkey;
ALTER TABLE model_calls DROP CONSTRAINT model_calls_transcript_id_fkey;
ALTER TABLE model_batch_items DROP CONSTRAINT model_batch_items_transcript_id_fkey;

DO $$
DECLARE
    t text;
    seq text;
BEGIN
    FOREACH t IN ARRAY ARRAY['transcripts', 'episodes', 'episode_events', 'episode_entities', 'job_runs',
                             'model_calls', 'erasures', 'api_keys', 'episode_corrections']
    LOOP
        seq := t || '_id_seq';
        EXECUTE format('ALTER TABLE %I ALTER COLUMN id DROP IDENTITY', t);  -- drops its sequence
        EXECUTE format('CREATE SEQUENCE %I AS bigint OWNED BY %I.id', seq, t);
        EXECUTE format('SELECT setval(%L, coalesce(max(id), 0) + 1, false) FROM %I', seq, t);
        EXECUTE format('ALTER TABLE %I ALTER COLUMN id SET DEFAULT nextval(%L::regclass)', t, seq);
        EXECUTE format('GRANT USAGE ON SEQUENCE %I TO episodes_app', seq);
    END LOOP;
    FOREACH t IN ARRAY ARRAY['transcripts', 'episodes', 'episode_events', 'episode_entities',
                             'model_calls', 'erasures', 'episode_corrections']
    LOOP
        EXECUTE format('ALTER TABLE %I DROP CONSTRAINT %I, ADD PRIMARY KEY (tenant_id, id)', t, t || '_pkey');
    END LOOP;
END
$$;

ALTER TABLE episode_events DROP CONSTRAINT episode_events_episode_id_ordinal_key,
    ADD CONSTRAINT episode_events_episode_id_ordinal_key UNIQUE (tenant_id, episode_id, ordinal);
ALTER TABLE episode_entities DROP CONSTRAINT episode_entities_episode_id_name_kind_key,
    ADD CONSTRAINT episode_entities_episode_id_name_kind_key UNIQUE (tenant_id, episode_id, name, kind);
ALTER TABLE episode_lineage DROP CONSTRAINT episode_lineage_pkey,
    ADD PRIMARY KEY (tenant_id, super_episode_id, source_episode_id);
ALTER TABLE model_batch_items DROP CONSTRAINT model_batch_items_pkey,
    ADD PRIMARY KEY (tenant_id, batch_id, custom_id);

-- 3 ---------------------------------------------------------------------------------------------
ALTER TABLE episodes
    ADD CONSTRAINT episodes_transcript_id_fkey FOREIGN KEY (tenant_id, transcript_id) REFERENCES transcripts (tenant_id, id),
    ADD CONSTRAINT episodes_superseded_by_fkey FOREIGN KEY (tenant_id, superseded_by) REFERENCES episodes (tenant_id, id),
    ADD CONSTRAINT episodes_compressed_into_fkey FOREIGN KEY (tenant_id, compressed_into) REFERENCES episodes (tenant_id, id);
ALTER TABLE episode_events
    ADD CONSTRAINT episode_events_episode_id_fkey FOREIGN KEY (tenant_id, episode_id)
        REFERENCES episodes (tenant_id, id) ON DELETE CASCADE,
    ADD CONSTRAINT episode_events_resolved_by_fkey FOREIGN KEY (tenant_id, resolved_by) REFERENCES episodes (tenant_id, id),
    ADD CONSTRAINT episode_events_source_event_id_fkey FOREIGN KEY (tenant_id, source_event_id)
        REFERENCES episode_events (tenant_id, id),
    ADD CONSTRAINT episode_events_superseded_by_fkey FOREIGN KEY (tenant_id, superseded_by)
        REFERENCES episode_events (tenant_id, id);
ALTER TABLE episode_entities
    ADD CONSTRAINT episode_entities_episode_id_fkey FOREIGN KEY (tenant_id, episode_id)
        REFERENCES episodes (tenant_id, id) ON DELETE CASCADE;
ALTER TABLE episode_lineage
    ADD CONSTRAINT episode_lineage_super_episode_id_fkey FOREIGN KEY (tenant_id, super_episode_id)
        REFERENCES episodes (tenant_id, id) ON DELETE CASCADE,
    ADD CONSTRAINT episode_lineage_source_episode_id_fkey FOREIGN KEY (tenant_id, source_episode_id)
        REFERENCES episodes (tenant_id, id) ON DELETE CASCADE;
ALTER TABLE model_calls
    ADD CONSTRAINT model_calls_transcript_id_fkey FOREIGN KEY (tenant_id, transcript_id) REFERENCES transcripts (tenant_id, id);
ALTER TABLE model_batch_items
    ADD CONSTRAINT model_batch_items_transcript_id_fkey FOREIGN KEY (tenant_id, transcript_id)
        REFERENCES transcripts (tenant_id, id) ON DELETE CASCADE;

-- What ON DELETE SET NULL did, for the episodes about to be deleted (`ids`, one tenant): references
-- to them, and to their events, from rows that stay are cleared. Runs with the caller's rights
-- (row-level security applies). Every statement names the tenant, so on a cluster each goes to the
-- one node holding the tenant.
CREATE FUNCTION episodes_release_references(tenant text, ids bigint[]) RETURNS void
LANGUAGE sql VOLATILE AS $$
    UPDATE episodes SET compressed_into = NULL
    WHERE tenant_id = tenant AND compressed_into = ANY (ids) AND NOT id = ANY (ids);
    UPDATE episodes SET superseded_by = NULL
    WHERE tenant_id = tenant AND superseded_by = ANY (ids) AND NOT id = ANY (ids);
    UPDATE episode_events SET resolved_by = NULL
    WHERE tenant_id = tenant AND resolved_by = ANY (ids) AND NOT episode_id = ANY (ids);
    UPDATE episode_events SET source_event_id = NULL
    WHERE tenant_id = tenant AND NOT episode_id = ANY (ids)
      AND source_event_id IN (SELECT id FROM episode_events WHERE tenant_id = tenant AND episode_id = ANY (ids));
    UPDATE episode_events SET superseded_by = NULL
    WHERE tenant_id = tenant AND NOT episode_id = ANY (ids)
      AND superseded_by IN (SELECT id FROM episode_events WHERE tenant_id = tenant AND episode_id = ANY (ids));
$$;
COMMENT ON FUNCTION episodes_release_references(text, bigint[]) IS
    'Clears references to the given episodes (and their events) from rows that stay; call before deleting them.';

-- 4 ---------------------------------------------------------------------------------------------
CREATE TABLE recall_versions (
    tenant_id       text NOT NULL,
    user_id         text NOT NULL,
    version         bigint NOT NULL CHECK (version > 0),
    deleted_version bigint NOT NULL DEFAULT 0 CHECK (deleted_version <= version),
    PRIMARY KEY (tenant_id, user_id)
);
COMMENT ON TABLE recall_versions IS
    'Per user: a counter of the transactions that changed their episodes (recall copies read what changed since theirs).';
GRANT SELECT, DELETE ON recall_versions TO episodes_app;
ALTER TABLE recall_versions ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON recall_versions TO episodes_app
    USING (tenant_id = current_setting('episodes.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('episodes.tenant_id', true));
INSERT INTO recall_versions (tenant_id, user_id, version)
SELECT DISTINCT tenant_id, user_id, 1 FROM episodes;

-- Existing rows keep 0 (older than any counter); adding a column with a constant default rewrites nothing.
ALTER TABLE episodes ADD COLUMN changed_version bigint NOT NULL DEFAULT 0;
DROP INDEX episodes_user_changed_idx;
ALTER TABLE episodes DROP COLUMN changed_xid;
CREATE INDEX episodes_user_changed_idx ON episodes (tenant_id, user_id, changed_version);

-- The user's counter for this transaction: bumped once (the first write of the transaction takes the
-- row and its lock; a row this transaction already wrote has its xmin), then reused. A deletion also
-- sets deleted_version to it. Owner's rights: the app role may read the counters, not write them.
CREATE FUNCTION episodes_bump_version(tenant text, usr text, deleting boolean) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
DECLARE
    -- A variable, so the statement below holds no volatile call (Citus refuses those in an upsert
    -- on a distributed table; on a worker this statement is planned by Citus like any other).
    me xid := pg_current_xact_id()::xid;
    v bigint;
BEGIN
    INSERT INTO recall_versions AS r (tenant_id, user_id, version, deleted_version)
    VALUES (tenant, usr, 1, CASE WHEN deleting THEN 1 ELSE 0 END)
    ON CONFLICT (tenant_id, user_id) DO UPDATE
        SET version = r.version + CASE WHEN r.xmin = me THEN 0 ELSE 1 END,
            deleted_version = CASE WHEN deleting THEN r.version + CASE WHEN r.xmin = me THEN 0 ELSE 1 END
                                   ELSE r.deleted_version END
        WHERE r.xmin <> me OR (deleting AND r.deleted_version <> r.version)
    RETURNING r.version INTO v;
    IF v IS NULL THEN  -- this transaction had bumped it already
        SELECT r.version INTO v FROM recall_versions r WHERE r.tenant_id = tenant AND r.user_id = usr;
    END IF;
    RETURN v;
END
$$;

-- Stamps every inserted or updated episode, except the re-embed's writes of embedding_next (0014),
-- which change nothing recall reads.
CREATE OR REPLACE FUNCTION episodes_stamp_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' AND current_setting('episodes.reembed_write', true) = 'on' THEN
        RETURN NEW;
    END IF;
    NEW.changed_version := episodes_bump_version(NEW.tenant_id, NEW.user_id, false);
    RETURN NEW;
END
$$;

CREATE FUNCTION episodes_note_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM episodes_bump_version(OLD.tenant_id, OLD.user_id, true);
    RETURN NULL;
END
$$;
DROP TRIGGER episodes_note_deletion ON episodes;
DROP FUNCTION episodes_note_deletion();
DROP TABLE episode_deletions;
CREATE TRIGGER episodes_note_delete AFTER DELETE ON episodes
    FOR EACH ROW EXECUTE FUNCTION episodes_note_delete();

-- 5 ---------------------------------------------------------------------------------------------
DROP TRIGGER transcripts_notify_eligible ON transcripts;
DROP FUNCTION episodes_notify_eligible();
