"""Recall's read on the worker that holds the tenant (jobs/routes.py), on one PostgreSQL and on the cluster."""

from __future__ import annotations

import logging

import numpy as np
import psycopg
import pytest
from test_recall import NOW, add, unit
from test_shard_move import drop_abandoned_move_slots, workers

from jobs.db import Database, one
from jobs.recall import Recaller
from jobs.routes import Routes, ask_with

pytestmark = pytest.mark.citus  # runs on one PostgreSQL and on the Citus cluster (conftest)

PLACED = """SELECT shardid, nodename, nodeport FROM citus_shards
            WHERE shardid = get_shard_id_for_distribution_column('transcripts', %s::text)"""


def _port(db: Database, tenant: str) -> int:
    with db.tenant_read(tenant) as conn:
        return int(one(conn.execute("SELECT inet_server_port() AS port"))["port"])


def _placed(url: str, tenant: str) -> tuple[int, str, int]:
    with psycopg.connect(url) as conn:
        row = conn.execute(PLACED, (tenant,)).fetchone()
    assert row is not None
    return int(row[0]), row[1], int(row[2])


def _ids(db: Database, tenant: str, user: str, vector: np.ndarray) -> tuple[int, list[int]]:
    """What a recall scored (its candidates) and what it chose."""
    recall = Recaller(db).recall_vector(tenant, user, "the plan", vector, now=NOW)
    return recall.candidates, [e.id for e in recall.episodes]


def test_a_read_runs_on_the_tenants_node_read_only_and_sees_only_the_tenant(db: Database, backend: str) -> None:
    rng = np.random.default_rng(5)
    mine = add(db, "acme's plan", tenant="acme", vector=unit(rng))
    add(db, "globex's plan", tenant="globex", vector=unit(rng))
    coordinator = psycopg.conninfo.conninfo_to_dict(db.url).get("port")
    if backend == "citus":
        _, _, port = _placed(db.url, "acme")
        assert _port(db, "acme") == port != int(coordinator or 0)  # the worker, not the coordinator
    else:
        assert db._routes.node("acme") is None and not db._node_pools
    with db.tenant_read("acme") as conn:
        seen = [r["id"] for r in conn.execute("SELECT id FROM episodes WHERE tenant_id IN ('acme', 'globex')")]
    assert seen == [mine]  # row-level security holds on the worker as on the coordinator
    if backend == "citus":
        with pytest.raises(psycopg.errors.ReadOnlySqlTransaction), db.tenant_read("acme") as conn:
            conn.execute("UPDATE episodes SET importance = 0.9 WHERE tenant_id = 'acme'")


def test_recall_on_the_worker_equals_recall_through_the_coordinator(db: Database, backend: str) -> None:
    rng = np.random.default_rng(6)
    query = unit(rng)
    for n in range(12):
        add(db, f"an episode numbered {n}", tenant="acme", days_ago=n + 1, vector=query + 0.3 * unit(rng) if n % 3 else unit(rng))
    through = Database(db.settings.with_(recall_on_workers=False))
    try:
        assert _ids(db, "acme", "u1", query) == _ids(through, "acme", "u1", query)
        assert not through._node_pools
    finally:
        through.close()


def test_a_stale_route_after_a_shard_move_still_reads_right(db: Database, backend: str) -> None:
    if backend != "citus":
        pytest.skip("a shard move needs the cluster")
    rng = np.random.default_rng(7)
    query = unit(rng)
    for n in range(6):
        add(db, f"an episode numbered {n}", tenant="acme", days_ago=n + 1, vector=query + 0.2 * unit(rng))
    before = _ids(db, "acme", "u1", query)
    shard, host, port = _placed(db.url, "acme")
    assert _port(db, "acme") == port
    drop_abandoned_move_slots(db.url)
    target = next(w for w in workers(db.url) if w != (host, port))
    with psycopg.connect(db.url, autocommit=True) as conn:
        conn.execute("SELECT citus_move_shard_placement(%s::bigint, %s::text, %s::int, %s::text, %s::int, "
                     "shard_transfer_mode => 'block_writes')", (shard, host, port, target[0], target[1]))
    assert _placed(db.url, "acme")[2] == target[1]
    add(db, "after the move", tenant="acme", days_ago=0.5, vector=query)  # through the coordinator
    assert _port(db, "acme") == port  # the route is still the old worker's ...
    after = _ids(db, "acme", "u1", query)
    through = Database(db.settings.with_(recall_on_workers=False))
    try:
        assert after == _ids(through, "acme", "u1", query)  # ... which reads the moved shards right
    finally:
        through.close()
    assert after[0] == before[0] + 1 == 7
    db._routes.forget()
    assert _port(db, "acme") == target[1]


def test_an_unreachable_worker_leaves_recall_to_the_coordinator(db: Database, backend: str,
                                                                caplog: pytest.LogCaptureFixture) -> None:
    if backend != "citus":
        pytest.skip("routes exist only on the cluster")
    rng = np.random.default_rng(8)
    query = unit(rng)
    add(db, "the plan for the launch", tenant="acme", vector=query)
    db._routes = Routes(ask_with(db.admin), lambda node: False)  # as if no worker answered
    coordinator = int(psycopg.conninfo.conninfo_to_dict(db.url)["port"])
    with caplog.at_level(logging.WARNING, logger="jobs.routes"):
        assert _port(db, "acme") == coordinator
        assert _ids(db, "acme", "u1", query)[0] == 1
    assert any(getattr(r, "action", "") == "route_fallback" for r in caplog.records)
