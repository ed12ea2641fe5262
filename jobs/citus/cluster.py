"""Scale-out on Citus: the schema distributed by tenant (docs/citus.md).

The schema is the same on one PostgreSQL and on a Citus coordinator (migration 0016 made every key
hold ``tenant_id``). :func:`distribute` turns a migrated database whose ``citus`` extension is
installed into a distributed one, in place and with its data; ``episodes init`` calls it when it
finds the extension (or is told ``--distributed``). Safe to run again: tables already distributed
are left as they are.

* Tenant tables are sharded by ``tenant_id`` and co-located with ``transcripts``: a tenant's
  transcripts, episodes, events, entities, lineage, model calls, corrections, erasures and episode
  lines sit on one node, so every statement that names the tenant runs there whole (joins,
  foreign keys, ``FOR UPDATE SKIP LOCKED``, recall's scoring).
* Lookups (``event_types``) and operational tables that tenant rows point at (``job_runs``,
  ``model_batches``) become reference tables, copied to every node; so does ``episodes_settings``,
  which recall reads on the workers (the recorded embedder).
* ``schema_migrations``, ``api_keys`` and ``reembed_state`` stay plain tables on the coordinator:
  nothing joins them with tenant rows.

Every process connects to the coordinator, and all writes go through it. Advisory locks (serve's
singleton jobs, compress, prune, reembed) and ``LISTEN``/``NOTIFY`` are node-local, so on the
coordinator they are cluster-wide for every process of the system. Recall's read alone goes to the
worker that holds the tenant (:mod:`jobs.citus.routes`), READ ONLY.

What the database is told, once: ``citus.propagate_set_commands = 'local'`` (the tenant setting of
``SET LOCAL`` travels to the workers, where row-level security reads it: :func:`jobs.db.set_local`),
``citus.enable_unsafe_triggers = on`` (the row triggers of migrations 0011–0016 run on the shards;
each touches only its own row or co-located rows of its tenant). The app, analyst and operator
roles get LOGIN: Citus opens its connections to the workers as the current role, so a role that
cannot log in cannot run a distributed statement (give it credentials the workers accept, in
``pg_dist_authinfo`` or ``citus.node_conninfo``, where the nodes do not trust each other).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql
from psycopg.rows import tuple_row

from jobs.errors import ConfigError

log = logging.getLogger(__name__)

REFERENCE_TABLES = ("event_types", "job_runs", "model_batches", "episodes_settings")
# Co-located with the first, in the order their foreign keys need.
TENANT_TABLES = (
    "transcripts",
    "episodes",
    "episode_events",
    "episode_entities",
    "episode_lineage",
    "model_calls",
    "model_batch_items",
    "erasures",
    "episode_corrections",
    "erasure_keys",
    "erased_sessions",
    "episode_lines",
    "erased_messages",
    "repository_branches",
    "repository_groups",
)
LOGIN_ROLES = ("episodes_app", "episodes_analyst", "episodes_operator")


def _rows(conn: psycopg.Connection[Any], statement: str) -> list[tuple[Any, ...]]:
    with conn.cursor(row_factory=tuple_row) as cur:
        return cur.execute(statement).fetchall()


def has_citus(conn: psycopg.Connection[Any]) -> bool:
    """Is the citus extension installed in this database?"""
    return bool(_rows(conn, "SELECT EXISTS (SELECT FROM pg_extension WHERE extname = 'citus')")[0][0])


def distributed_tables(conn: psycopg.Connection[Any]) -> set[str]:
    """Our tables already in Citus' metadata (distributed or reference)."""
    if not has_citus(conn):
        return set()
    return {r[0] for r in _rows(conn, "SELECT logicalrelid::regclass::text FROM pg_dist_partition")}


def distribute(conn: psycopg.Connection[Any], *, shard_count: int | None = None) -> list[str]:
    """Distribute a migrated database on its Citus cluster; return the tables distributed now.

    Foreign keys between our tables are dropped for the move and made again after it (Citus refuses
    to distribute a table that a plain table still points at); all of it runs in autocommit, table
    by table, as ``create_distributed_table`` copies the rows. Run it while nothing writes."""
    if not has_citus(conn):
        raise ConfigError(
            "the database has no citus extension: run CREATE EXTENSION citus on the coordinator "
            "(and every worker) and add the workers (citus_add_node) first"
        )
    conn.autocommit = True
    done = distributed_tables(conn)
    todo = [t for t in (*REFERENCE_TABLES, *TENANT_TABLES) if t not in done]
    dbname = conn.info.dbname
    for setting, value in (("citus.propagate_set_commands", "local"), ("citus.enable_unsafe_triggers", "on")):
        conn.execute(
            sql.SQL("ALTER DATABASE {} SET {} = {}").format(
                sql.Identifier(dbname), sql.SQL(setting), sql.Literal(value)
            )
        )
        conn.execute(sql.SQL("SET {} = {}").format(sql.SQL(setting), sql.Literal(value)))
    for role in LOGIN_ROLES:
        conn.execute(sql.SQL("ALTER ROLE {} LOGIN").format(sql.Identifier(role)))
    if not todo:
        return []
    keys = _foreign_keys(conn)
    for table, name, _ in keys:
        conn.execute(sql.SQL("ALTER TABLE {} DROP CONSTRAINT {}").format(sql.Identifier(table), sql.Identifier(name)))
    try:
        for table in todo:
            if table in REFERENCE_TABLES:
                conn.execute("SELECT create_reference_table(%s)", (table,))
            elif table == TENANT_TABLES[0]:
                conn.execute(
                    "SELECT create_distributed_table(%s, 'tenant_id', colocate_with => 'none', shard_count => %s)",
                    (table, shard_count),
                )
            else:  # the shard count is the co-located table's
                conn.execute(
                    "SELECT create_distributed_table(%s, 'tenant_id', colocate_with => %s)", (table, TENANT_TABLES[0])
                )
            # create_distributed_table copied the rows to the shards; the coordinator's copy goes.
            conn.execute("SELECT truncate_local_data_after_distributing_table(%s)", (table,))
            log.info("distributed %s", table, extra={"action": "distribute", "table": table})
    finally:
        for table, name, definition in keys:
            conn.execute(
                sql.SQL("ALTER TABLE {} ADD CONSTRAINT {} {}").format(
                    sql.Identifier(table), sql.Identifier(name), sql.SQL(definition)
                )
            )
    return todo


def _foreign_keys(conn: psycopg.Connection[Any]) -> list[tuple[str, str, str]]:
    """(table, constraint, definition) of every foreign key among our tables in the public schema."""
    rows = _rows(
        conn,
        """
        SELECT c.conrelid::regclass::text, c.conname, pg_get_constraintdef(c.oid)
        FROM pg_constraint c
        WHERE c.contype = 'f' AND c.connamespace = 'public'::regnamespace
        ORDER BY c.conrelid::regclass::text, c.conname""",
    )
    return [(r[0], r[1], r[2]) for r in rows]


@dataclass(frozen=True)
class ClusterStatus:
    """What ``episodes status`` shows of a Citus cluster."""

    nodes: list[tuple[str, int, str, bool]]  # host, port, role (coordinator | worker), active
    shards: list[tuple[str, int, int]]  # table, shards, bytes

    def lines(self) -> list[str]:
        workers = [n for n in self.nodes if n[2] == "worker"]
        out = [
            f"cluster      Citus: {len(workers)} workers · "
            + " · ".join(
                f"{host}:{port} {role}{'' if active else ' (inactive)'}" for host, port, role, active in self.nodes
            )
        ]
        for table, shards, size in self.shards:
            out.append(f"  {table:<20} {shards} shards, {size / 1e6:,.1f} MB")
        return out


def cluster_status(conn: psycopg.Connection[Any]) -> ClusterStatus | None:
    """Nodes and shards per table, or None when the database is not distributed."""
    if not distributed_tables(conn):
        return None
    nodes = [
        (r[0], int(r[1]), "coordinator" if r[2] == 0 else "worker", bool(r[3]))
        for r in _rows(
            conn,
            "SELECT nodename, nodeport, groupid, isactive FROM pg_dist_node WHERE noderole = 'primary' ORDER BY groupid",
        )
    ]
    shards = [
        (r[0], int(r[1]), int(r[2]))
        for r in _rows(
            # citus_shards has a row per placement: a reference table's one shard is on every node.
            conn,
            "SELECT table_name::text, count(DISTINCT shardid), coalesce(sum(shard_size), 0) FROM citus_shards "
            "GROUP BY table_name ORDER BY table_name::text",
        )
    ]
    return ClusterStatus(nodes, shards)
