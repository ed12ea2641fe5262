-- 0018: episodes_release_references (0016) in statements that a Citus cluster routes to one node.
--
-- 0016's SQL function cleared source_event_id and superseded_by with "IN (SELECT id FROM episode_events
-- WHERE tenant_id = tenant ...)". With the tenant a function parameter, Citus prunes shards of a plain
-- statement but not of one with a subquery: those two UPDATEs ran on every shard of every node, and a
-- transaction that then wrote a reference table (forget scrubbing job_runs) failed with "cannot modify
-- table job_runs because there was a parallel operation on a distributed table". Here the erased
-- events' ids are read first, so every statement is a plain one that names the tenant. Same contract:
-- references to the episodes `ids` of `tenant`, and to their events, from rows that stay are cleared;
-- it runs with the caller's rights (row-level security applies).

CREATE OR REPLACE FUNCTION episodes_release_references(tenant text, ids bigint[]) RETURNS void
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    events bigint[];
BEGIN
    UPDATE episodes SET compressed_into = NULL
    WHERE tenant_id = tenant AND compressed_into = ANY (ids) AND NOT id = ANY (ids);
    UPDATE episodes SET superseded_by = NULL
    WHERE tenant_id = tenant AND superseded_by = ANY (ids) AND NOT id = ANY (ids);
    UPDATE episode_events SET resolved_by = NULL
    WHERE tenant_id = tenant AND resolved_by = ANY (ids) AND NOT episode_id = ANY (ids);
    events := ARRAY(SELECT id FROM episode_events WHERE tenant_id = tenant AND episode_id = ANY (ids));
    UPDATE episode_events SET source_event_id = NULL
    WHERE tenant_id = tenant AND source_event_id = ANY (events) AND NOT episode_id = ANY (ids);
    UPDATE episode_events SET superseded_by = NULL
    WHERE tenant_id = tenant AND superseded_by = ANY (events) AND NOT episode_id = ANY (ids);
END
$$;
