-- 0019: the recall change counter of 0016 bumped in a way Citus accepts, and told apart from an earlier
-- counter of the same user.
--
-- 1. episodes_bump_version (0016) runs in the triggers of episodes, so on a cluster it runs on the worker
--    holding the shard, and its statements on recall_versions are distributed statements planned there.
--    Citus refuses an INSERT ... ON CONFLICT DO UPDATE ... WHERE r.xmin <> pg_current_xact_id():
--    "functions used in the WHERE clause of the ON CONFLICT clause of INSERTs on distributed tables must
--    be marked IMMUTABLE" (measured, Citus 13.2), so no episode could be written. An UPDATE may filter
--    with a STABLE function, so the bump is an UPDATE first and an INSERT only for a user without a
--    counter yet. The counter row is co-located with the user's episodes: every statement here names
--    the tenant and runs on the node the trigger runs on, inside its transaction.
--    Same contract as 0016: the first write of a transaction bumps the user's counter and holds the row's
--    lock to the end of the transaction; later writes of the same transaction reuse the value (the row
--    then has this transaction's xmin); a deletion also moves deleted_version, once.
-- 2. `episodes forget` deletes the user's counter (it names the user). A user who comes back starts a
--    new counter at 1, and once it has passed the version a warm recall copy holds, "the counter went
--    back" no longer shows: the copy would read only the newest rows and keep the erased ones. Each
--    counter row now carries a random epoch, drawn when the row is made; a copy remembers it and reads
--    its user anew when the epoch is another one. Rows made before this migration keep a NULL epoch
--    (which the copies then hold): no table rewrite, and ALTER TABLE on a distributed table is plain.

ALTER TABLE recall_versions ADD COLUMN epoch uuid;
COMMENT ON COLUMN recall_versions.epoch IS
    'Drawn when the counter is made: a counter made again (after an erasure) is another one for recall copies.';

CREATE OR REPLACE FUNCTION episodes_bump_version(tenant text, usr text, deleting boolean) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
DECLARE
    -- A variable, so the statements below hold no volatile call (Citus plans them on the worker).
    me xid := pg_current_xact_id()::xid;
    v bigint;
BEGIN
    LOOP
        -- Waits for a concurrent writer of the same user, then sees its committed row (READ COMMITTED).
        -- A deletion after this transaction's own bump marks that version, without another bump.
        UPDATE recall_versions AS r
        SET version = r.version + CASE WHEN r.xmin = me THEN 0 ELSE 1 END,
            deleted_version = CASE WHEN deleting THEN r.version + CASE WHEN r.xmin = me THEN 0 ELSE 1 END
                                   ELSE r.deleted_version END
        WHERE r.tenant_id = tenant AND r.user_id = usr
          AND (r.xmin <> me OR (deleting AND r.deleted_version <> r.version))
        RETURNING r.version INTO v;
        IF v IS NOT NULL THEN
            RETURN v;
        END IF;
        -- No row changed: this transaction already bumped (reuse its value), or the user has no counter.
        SELECT r.version INTO v FROM recall_versions r WHERE r.tenant_id = tenant AND r.user_id = usr;
        IF v IS NOT NULL THEN
            RETURN v;
        END IF;
        INSERT INTO recall_versions (tenant_id, user_id, version, deleted_version, epoch)
        VALUES (tenant, usr, 1, CASE WHEN deleting THEN 1 ELSE 0 END, gen_random_uuid())
        ON CONFLICT (tenant_id, user_id) DO NOTHING
        RETURNING version INTO v;
        IF v IS NOT NULL THEN
            RETURN v;
        END IF;
        -- A concurrent transaction created the counter first (and has committed): bump that one.
    END LOOP;
END
$$;
