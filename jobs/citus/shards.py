"""Recall's statements on a tenant's shard tables themselves, on the Citus worker that holds them.

A worker plans every statement that names a distributed table (``episodes``) before it runs it on
the local shard (``episodes_102064``): 0.3–0.6 ms a statement on this machine's workers, most of what a
later recall costs there beyond one PostgreSQL (``bench/recall.py --mode statements``). Named by the shard
tables, the same statements are plain PostgreSQL statements: no Citus planning, the same rows, and
row-level security still applies (Citus gives each shard its table's policies and grants).

That is only right while the shards are on this node. A shard move (the rebalancer, or
``citus_move_shard_placement``) copies the tenant's shard group to another node and leaves the old
tables to be dropped later: they would then be stale. So every tenant read on the shard tables first
asks the node's own metadata, in the same transaction, whether it still holds the group (:data:`HERE`,
one indexed catalog row); if not, that transaction uses the distributed tables, which the worker
sends on to the new node, and the route is read anew. A move that commits after the check leaves the
old tables as they were at its cutover (writes then wait, and go to the new node), which is all that
committed before the recall began. If the old tables are dropped within the same recall, a statement
fails with UndefinedTable and the recaller reads once more (jobs.recall.recaller).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import lru_cache

from jobs.sql import query

# Whether this node holds the placement of a shard (the tenant's shard of ``transcripts``; the group moves
# as one). The node's copy of the Citus metadata; readable by any role.
HERE = """SELECT EXISTS (SELECT FROM pg_dist_placement p JOIN pg_dist_local_group g ON g.groupid = p.groupid
                    WHERE p.shardid = %s) AS here"""

_TABLE = re.compile(r"\b(FROM|JOIN)(\s+)([a-z_][a-z0-9_]*)\b")
_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")  # a shard table's name that needs no quoting


def on_shards(text: str, tables: Mapping[str, str]) -> str:
    """``text`` with every table named after FROM or JOIN that ``tables`` maps replaced by its shard table."""
    return _TABLE.sub(lambda m: m.group(1) + m.group(2) + tables.get(m.group(3), m.group(3)), text)


class Shards:
    """One tenant's shard tables on one worker, and recall's statements on them (each rewritten once)."""

    def __init__(self, group: int, shard_ids: Mapping[str, int]) -> None:
        self.group = group  # the shard id :data:`HERE` asks about
        self.tables = {table: f"{table}_{shard}" for table, shard in shard_ids.items()}
        bad = [name for name in self.tables.values() if not _NAME.match(name)]
        if bad:  # Citus shortens long names with a hash; ours are short, so this is a bug, not a case to handle
            raise ValueError(f"shard table names that would need quoting or were shortened: {bad}")
        self._texts: dict[str, str] = {}

    def query(self, name: str) -> str:
        """The runtime query ``name`` (jobs.sql.query) on this tenant's shard tables."""
        text = self._texts.get(name)
        if text is None:
            text = self._texts[name] = on_shards(query(name), self.tables)
        return text


@lru_cache(maxsize=4096)
def shards(group: int, shard_ids: tuple[tuple[str, int], ...]) -> Shards:
    """The :class:`Shards` of a route (jobs.citus.routes.Route), one per shard group, so each statement is
    rewritten once per process and group."""
    return Shards(group, dict(shard_ids))
