-- 0035: what the deleted in-process recall copy left in the database goes (issue 38).
--
-- Recall scores in PostgreSQL now (sql/recall.sql recall_scores); nothing keeps a per-user copy, so
-- nothing reads what kept those copies fresh. Every episode write still paid for it: a SECURITY DEFINER
-- call that updated and locked the user's counter row, an index on changed_version (which also kept
-- every update of an episode from being a HOT update), and term frequencies recomputed from search_tsv.
--
-- 1. recall_packs (0021) and what only it needed: its writer's lock (trigger recall_packs_at_version,
--    function episodes_pack_at_version), episodes_drop_pack, and the triggers on recall_versions that
--    called it (episodes_counter_drop_pack).
-- 2. recall_versions (0016, 0019) and what kept it: episodes_bump_version (owner's rights, granted to
--    episodes_app), the row trigger episodes_stamp_change and the delete trigger episodes_note_delete,
--    and the index episodes_user_changed_idx (the copies' "changed since V" read). The app role loses
--    its grants on both tables with them.
-- 3. episodes.search_tf (0013), its trigger episodes_keep_search_tf and the functions behind it.
-- 4. episodes.changed_version stays, for one reader: `episodes reembed` writes a new vector only where
--    the row is unchanged since it read it (sql/reembed.sql reembed_write), so a correction that lands
--    between its read and its write is not overwritten with a vector of the old text. It is now a
--    counter of the row's own updates: a plain BEFORE UPDATE row trigger sets it to OLD + 1; inserts
--    keep the default 0 and pay nothing. No other row is read, written or locked, no owner's rights.
--    Re-embed's own write bumps it too (the migration 0014 flag episodes.reembed_write is no longer
--    read): a written row has its new vector and is not read again, and the switch reads afresh.
--    Not xmin instead: DESIGN.md's scale-out rule (no freshness on one node's transaction ids). A
--    Citus shard move copies the rows under the target node's transaction ids, and a dump and restore
--    does the same, so a stored xmin could match a different version of the row. The column keeps its
--    name and its values (Citus does not propagate RENAME COLUMN on a distributed table); a counter
--    of updates only needs to differ after a write, which OLD + 1 guarantees.
-- On a Citus cluster each statement below is propagated to the shards: the dropped tables' shards go,
-- the trigger runs on the worker holding the row (citus.enable_unsafe_triggers, set by jobs/citus).

-- One connection per worker for the whole migration: Citus refuses a command on a distributed function after
-- a parallel DDL on the shards in the same transaction. On one PostgreSQL, a setting nothing reads.
SELECT set_config('citus.multi_shard_modify_mode', 'sequential', true);

-- 1, 2 ------------------------------------------------------------------------------------------
DROP TABLE public.recall_packs, public.recall_versions;  -- with their triggers

-- 4 ---------------------------------------------------------------------------------------------
CREATE FUNCTION public.episodes_count_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.changed_version := OLD.changed_version + 1;
    RETURN NEW;
END
$$;
COMMENT ON FUNCTION public.episodes_count_update() IS
    'Counts the updates of an episode row in changed_version (episodes reembed writes only rows it read unchanged).';

-- 2, 3, 4: what hangs on episodes. Each command a statement of its own (EXECUTE): Citus sends such a command's
-- query string to the shards as it is, and a migration's string of several commands fails there ("cannot
-- insert multiple commands into a prepared statement").
DO $$
BEGIN
    EXECUTE 'DROP TRIGGER episodes_stamp_change ON public.episodes';
    EXECUTE 'DROP TRIGGER episodes_note_delete ON public.episodes';
    EXECUTE 'DROP TRIGGER episodes_keep_search_tf ON public.episodes';
    EXECUTE 'DROP INDEX public.episodes_user_changed_idx';
    EXECUTE 'ALTER TABLE public.episodes DROP COLUMN search_tf';  -- catalogue only: the bytes go as rows are rewritten
    EXECUTE 'CREATE TRIGGER episodes_count_update BEFORE UPDATE ON public.episodes '
            'FOR EACH ROW EXECUTE FUNCTION public.episodes_count_update()';
    EXECUTE 'COMMENT ON COLUMN public.episodes.changed_version IS '
            '''How many times the row was updated (0 as inserted): episodes reembed writes a vector only where it '
            'is unchanged.''';
END
$$;

DROP FUNCTION public.episodes_pack_at_version(), public.episodes_counter_drop_pack(),
              public.episodes_drop_pack(text, text), public.episodes_bump_version(text, text, boolean),
              public.episodes_stamp_change(), public.episodes_note_delete(), public.episodes_keep_search_tf(),
              public.episodes_search_tf(tsvector);
