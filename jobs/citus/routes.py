"""On a Citus cluster, recall reads from the worker that holds the tenant's shards, not the coordinator.

Citus (11 and later) keeps its metadata on every worker, so a worker plans and runs any statement. One
that names a tenant whose shards the worker holds runs there by local execution: no hop from the
coordinator, no remote transaction (its BEGIN, SET LOCALs and COMMIT). Measured side by side
(``bench/cluster_scaleout.py``, docs/citus.md), a typical user's later recall takes about 1 ms
less this way; and the coordinator leaves the read path, so recall load spreads over the workers
instead of passing through one node.

Only recall's read moves (:meth:`jobs.db.Database.tenant_read`). Its transaction is READ ONLY, so a
write that strays into it fails loudly instead of going through a worker. Writes, ``LISTEN``/``NOTIFY``
and advisory locks stay on the coordinator (jobs.citus.cluster).

A route is the node holding the tenant's shard of ``transcripts`` (every tenant table is co-located
with it, so all of the tenant's rows are there) and the tenant's shard of each table, read from the
coordinator's metadata and kept for :data:`ROUTE_SECONDS`. On that node recall's statements name the
shard tables themselves once the node has said it still holds them (jobs.citus.shards). A stale route (the
shards moved) costs speed, not truth: the node says so, and the statements name the distributed
tables, which it plans and sends to the shards' new node, with the transaction's settings; the next
read asks for the route anew.
A worker that cannot be reached is skipped for :data:`ROUTE_SECONDS` (a warning is logged) and the
coordinator serves its tenants' recalls, as it would without routes.

Routes need ``episodes_settings`` as a reference table (a copy on every node: recall checks the
recorded embedder), which ``episodes init`` makes since this change; a cluster distributed before it
is read through the coordinator until ``episodes init`` runs again.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, NamedTuple

import psycopg
from psycopg.rows import tuple_row

log = logging.getLogger(__name__)

ROUTE_SECONDS = 30.0  # how long a route, the cluster check, or a worker found unreachable is kept

_ROUTABLE = """
SELECT count(*) = 2 FROM pg_dist_partition
WHERE logicalrelid IN ('transcripts'::regclass, 'episodes_settings'::regclass)"""

# The node holding the tenant's shard of transcripts, and the tenant's shard of every table co-located
# with it (the group that moves as one), plus the one shard of each reference table (on every node).
_PLACEMENT = """
SELECT n.nodename, n.nodeport, n.groupid = 0 AS coordinator, p.shardid AS grp, t.logicalrelid::text,
       CASE WHEN t.partmethod = 'n' THEN (SELECT min(s.shardid) FROM pg_dist_shard s WHERE s.logicalrelid = t.logicalrelid)
            ELSE get_shard_id_for_distribution_column(t.logicalrelid, %s::text) END
FROM pg_dist_placement p
JOIN pg_dist_node n ON n.groupid = p.groupid AND n.noderole = 'primary' AND n.isactive
JOIN pg_dist_partition t ON t.partmethod = 'n' OR t.colocationid = (
    SELECT colocationid FROM pg_dist_partition WHERE logicalrelid = 'transcripts'::regclass)
WHERE p.shardid = get_shard_id_for_distribution_column('transcripts', %s::text)"""

Node = tuple[str, int]


class Route(NamedTuple):
    """Where a tenant's recall reads: the worker, and the tenant's shard ids there (jobs.citus.shards)."""

    node: Node
    group: int  # the tenant's shard of transcripts: the group's placement is asked before a read on it
    shard_ids: tuple[tuple[str, int], ...]  # (table, shard id) of each table recall may read


def node_url(url: str, node: Node) -> str:
    """``url`` (the coordinator's) with the host and port of ``node``: same database, user and options."""
    info = psycopg.conninfo.conninfo_to_dict(url)
    info.pop("hostaddr", None)
    info["host"], info["port"] = node[0], str(node[1])
    return psycopg.conninfo.make_conninfo("", **{k: str(v) for k, v in info.items() if v is not None})


class Routes:
    """Which worker holds a tenant's shards; thread-safe.

    ``ask`` runs one statement on the coordinator and returns its rows as tuples. ``usable`` is
    called before a worker's route is handed out (it opens the worker's pool, if not open yet) and
    says whether the worker can be reached."""

    def __init__(
        self,
        ask: Callable[[str, tuple[Any, ...]], list[tuple[Any, ...]]],
        usable: Callable[[Node], bool],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._ask, self._usable, self._clock = ask, usable, clock
        self._lock = threading.Lock()
        self._routable: tuple[bool, float] | None = None
        self._routes: dict[str, tuple[Route | None, float]] = {}
        self._down: dict[Node, float] = {}

    def node(self, tenant_id: str) -> Node | None:
        """The worker to read ``tenant_id`` from, or None for the coordinator."""
        route = self.route(tenant_id)
        return route.node if route is not None else None

    def route(self, tenant_id: str) -> Route | None:
        """The worker to read ``tenant_id`` from and the tenant's shards there, or None for the coordinator."""
        now = self._clock()
        with self._lock:
            routable = self._routable
            cached = self._routes.get(tenant_id)
        if routable is None or routable[1] <= now:
            routable = (self._check(), now + ROUTE_SECONDS)
            with self._lock:
                self._routable = routable
        if not routable[0]:
            return None
        if cached is None or cached[1] <= now:
            rows = self._ask(_PLACEMENT, (tenant_id, tenant_id))
            found = (
                None
                if not rows or rows[0][2]
                else Route(
                    (str(rows[0][0]), int(rows[0][1])),
                    int(rows[0][3]),
                    tuple(sorted((str(table), int(shard)) for *_, table, shard in rows)),
                )
            )
            cached = (found, now + ROUTE_SECONDS)
            with self._lock:
                self._routes[tenant_id] = cached
        route = cached[0]
        return route if route is not None and self._reachable(route.node, now) else None

    def moved(self, tenant_id: str) -> bool:
        """The tenant's shards are no longer where its route says: ask anew on its next read. Returns
        whether there was a route to a worker."""
        with self._lock:
            cached = self._routes.pop(tenant_id, None)
        return cached is not None and cached[0] is not None

    def down(self, node: Node) -> None:
        """``node`` failed a read: skip it for :data:`ROUTE_SECONDS`."""
        self._skip(node, "failed", self._clock())

    def forget(self) -> None:
        """Drop every route and the cluster check (tests; after a rebalance, to route anew at once)."""
        with self._lock:
            self._routable, self._routes, self._down = None, {}, {}

    def _check(self) -> bool:
        if not self._ask("SELECT EXISTS (SELECT FROM pg_extension WHERE extname = 'citus')", ())[0][0]:
            return False
        return bool(self._ask(_ROUTABLE, ())[0][0])

    def _reachable(self, node: Node, now: float) -> bool:
        with self._lock:
            if self._down.get(node, 0.0) > now:
                return False
        if self._usable(node):
            return True
        self._skip(node, "cannot be reached", now)
        return False

    def _skip(self, node: Node, why: str, now: float) -> None:
        log.warning(
            "Citus worker %s:%s %s; its tenants' recalls go through the coordinator for %.0f s",
            node[0],
            node[1],
            why,
            ROUTE_SECONDS,
            extra={"action": "route_fallback", "node": f"{node[0]}:{node[1]}"},
        )
        with self._lock:
            self._down[node] = now + ROUTE_SECONDS


def ask_with(
    connect: Callable[[], AbstractContextManager[psycopg.Connection[Any]]],
) -> Callable[[str, tuple[Any, ...]], list[tuple[Any, ...]]]:
    """A Routes ``ask`` that runs each statement in its own transaction of ``connect()`` (a pooled
    owner connection's context manager)."""

    def ask(statement: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        with connect() as conn, conn.cursor(row_factory=tuple_row) as cur:
            return cur.execute(statement, params).fetchall()

    return ask
