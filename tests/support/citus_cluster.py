"""A database on the real Citus cluster of ../shared/citus/cluster.sh, for the suites marked ``citus``.

The cluster (a coordinator and two workers, PostgreSQL 15, Citus 13.2, pgvector) is started by
``.ci/run`` before the tests; locally: ``sudo ../shared/citus/cluster.sh up``. Its URL comes from
EPISODES_TEST_CITUS_URL (default: the script's, postgresql://postgres@127.0.0.1:5701/postgres).

Each test process gets one database of its own on every node (Citus connects to the database of
the same name on the workers), migrated and distributed once (``episodes init`` on a coordinator),
with 4 shards per table so that a test run stays quick and every tenant still lands on some shard
of two workers. Between tests the tables are emptied (TRUNCATE runs on every shard); the schema,
roles and settings stay.
"""

from __future__ import annotations

import fcntl
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
from psycopg import sql

from jobs import migrate
from jobs.citus import cluster
from jobs.db import one

DEFAULT_URL = "postgresql://postgres@127.0.0.1:5701/postgres"
SHARDS = 4


def admin_url() -> str:
    return os.environ.get("EPISODES_TEST_CITUS_URL", DEFAULT_URL)


def unreachable() -> str | None:
    """Why the cluster cannot be used, or None when it can."""
    url = admin_url()
    try:
        with psycopg.connect(url, connect_timeout=3) as conn:
            workers = conn.execute("SELECT count(*) FROM pg_dist_node WHERE groupid > 0 AND isactive").fetchone()
    except psycopg.Error as exc:
        return (
            f"no Citus cluster at {url} ({str(exc).strip().splitlines()[0]}): start one with "
            "`sudo ../shared/citus/cluster.sh up` (builds once, ~5 min) or set EPISODES_TEST_CITUS_URL"
        )
    if not workers or workers[0] < 1:
        return f"the Citus coordinator at {url} has no active worker"
    return None


def _url(base: str, dbname: str, host: str | None = None, port: int | None = None) -> str:
    info = psycopg.conninfo.conninfo_to_dict(base)
    info["dbname"] = dbname
    if host is not None:
        info["host"], info["port"] = host, str(port)
    return psycopg.conninfo.make_conninfo(**info)  # type: ignore[arg-type]


def _nodes(base: str) -> list[tuple[str, int, bool]]:
    """(host, port, is coordinator) of every node, the coordinator first."""
    with psycopg.connect(base) as conn:
        rows = conn.execute(
            "SELECT nodename, nodeport, groupid = 0 FROM pg_dist_node WHERE noderole = 'primary' ORDER BY groupid"
        ).fetchall()
    return [(r[0], int(r[1]), bool(r[2])) for r in rows]


def create_database(name: str, shards: int = SHARDS) -> str:
    """A migrated, distributed database ``name`` on every node of the cluster (``shards`` per table); its URL.

    One process at a time on this machine: the migrations grant roles, which are global objects that
    Citus propagates to every node, and two processes granting at once fail one with "tuple
    concurrently updated" (seen in CI with pytest -n 2)."""
    with open(Path(tempfile.gettempdir()) / "episodes-citus-create.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        url = create_blank_database(name)
        with psycopg.connect(url) as conn:
            migrate.migrate(conn, embedding_dim=384, embedder="all-MiniLM-L6-v2")
            migrate.allow_service_login(conn)  # the API's role (0023), as on the embedded server
            cluster.distribute(conn, shard_count=shards)
    return url


def create_blank_database(name: str) -> str:
    """A database ``name`` on every node with citus and vector and the workers added, but no schema
    (what an operator prepares before `episodes init`); its coordinator URL."""
    base = admin_url()
    nodes = _nodes(base)
    drop_database(name)
    for host, port, _ in nodes:
        with psycopg.connect(_url(base, "postgres", host, port), autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        with psycopg.connect(_url(base, name, host, port), autocommit=True) as conn:
            conn.execute("CREATE EXTENSION citus")
            conn.execute("CREATE EXTENSION vector")
    url = _url(base, name)
    with psycopg.connect(url, autocommit=True) as conn:
        coordinator = [n for n in nodes if n[2]]
        info = psycopg.conninfo.conninfo_to_dict(base)
        if coordinator:
            host, port = coordinator[0][0], coordinator[0][1]
        else:
            host, port = str(info.get("host") or "127.0.0.1"), int(info.get("port") or 5432)
        conn.execute("SELECT citus_set_coordinator_host(%s, %s)", (host, port))
        for host, port, is_coordinator in nodes:
            if not is_coordinator:
                conn.execute("SELECT citus_add_node(%s, %s)", (host, port))
    return url


@contextmanager
def blank_database(name: str) -> Iterator[str]:
    """:func:`create_blank_database` for the block (its coordinator URL), dropped however the block ends."""
    url = create_blank_database(name)
    try:
        yield url
    finally:
        drop_database(name)


def drop_database(name: str) -> None:
    base = admin_url()
    for host, port, _ in _nodes(base):
        with psycopg.connect(_url(base, "postgres", host, port), autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


def empty(url: str) -> None:
    """Delete every row a test may have written (the schema, lookups and settings stay)."""
    with psycopg.connect(url, autocommit=True) as conn:
        tables = [*cluster.TENANT_TABLES, "job_runs", "model_batches", "api_keys", "reembed_state"]
        conn.execute(
            sql.SQL("TRUNCATE {} RESTART IDENTITY CASCADE").format(sql.SQL(", ").join(map(sql.Identifier, tables)))
        )


def workers(url: str) -> list[tuple[str, int]]:
    with psycopg.connect(url) as conn:
        return [
            (r[0], int(r[1]))
            for r in conn.execute(
                "SELECT nodename, nodeport FROM pg_dist_node WHERE groupid > 0 AND isactive ORDER BY nodeport"
            )
        ]


def drop_abandoned_move_slots(url: str) -> None:
    """Replication slots and roles are per node, a move's names per database: a move interrupted in another
    (since dropped) test database leaves an inactive slot and a role that the next move of the same name meets."""
    for host, port in workers(url):
        with psycopg.connect(_url(url, "postgres", host, port), autocommit=True) as conn:
            conn.execute(
                "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
                "WHERE slot_name LIKE 'citus%%' AND NOT active"
            )
            if one(conn.execute("SELECT count(*) FROM pg_replication_slots WHERE slot_name LIKE 'citus%%'"))[0]:
                continue  # a move in progress elsewhere: its role is in use
            for (role,) in conn.execute(
                "SELECT rolname FROM pg_roles WHERE rolname LIKE 'citus_shard_move%%'"
            ).fetchall():
                try:
                    conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))
                except psycopg.Error:
                    pass  # still owns something in another database: not ours to drop
