"""Recall's read on the worker that holds the tenant (jobs/citus/routes.py), on one PostgreSQL and on the cluster."""

from __future__ import annotations

import logging

import numpy as np
import psycopg
import pytest
from support.citus_cluster import drop_abandoned_move_slots, workers
from support.recall_rows import NOW, add, unit

from jobs.citus.routes import Routes, ask_with
from jobs.db import Database, one
from jobs.recall import RecallConfig, Recaller
from jobs.recall.scoring import read_scores, send_scores
from jobs.sql import query as named_query

pytestmark = pytest.mark.citus  # runs on one PostgreSQL and on the Citus cluster (conftest)

PLACED = """SELECT shardid, nodename, nodeport FROM citus_shards
            WHERE shardid = get_shard_id_for_distribution_column('transcripts', %s::text)"""


def _port(db: Database, tenant: str) -> int:
    return _read_on(db, tenant)[0]


def _read_on(db: Database, tenant: str) -> tuple[int, bool]:
    """The port a tenant read runs on, and whether its statements name the tenant's shard tables."""
    with db.tenant_read(tenant) as (conn, _, on_shards):
        return int(one(conn.execute("SELECT inet_server_port() AS port"))["port"]), on_shards


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
        assert _read_on(db, "acme") == (port, True)  # the worker, not the coordinator, on the shard tables
        assert port != int(coordinator or 0)
    else:
        assert db._routes.node("acme") is None and not db._node_pools
        with db.tenant_read("acme") as (_, sql, on_shards):
            assert on_shards is False and sql("recall_scores") == named_query("recall_scores")
    asked = {"tenant_id": "acme", "user_id": "u1", "now": NOW, "purposes": None, "query_text": "plan"}
    everything = RecallConfig(relevant_similarity=-1)
    with db.tenant_read("acme") as (conn, sql, _):
        seen = [r["id"] for r in conn.execute("SELECT id FROM episodes WHERE tenant_id IN ('acme', 'globex')")]
        statement = sql("recall_scores")
        chosen = read_scores(send_scores(conn, sql, asked, unit(rng), everything, [mine]))
        assert chosen.scores.ids.tolist() == [mine]
    assert seen == [mine]  # row-level security holds on the worker as on the coordinator
    if backend == "citus":  # and on the shard table itself: another tenant's transaction on it sees nothing
        assert "episodes_" in statement
        with db.tenant_read("acme") as (conn, sql, _):
            conn.execute("SET LOCAL episodes.tenant_id = 'globex'")
            assert read_scores(send_scores(conn, sql, asked, unit(rng), everything, [mine])).candidates == 0
    if backend == "citus":
        with pytest.raises(psycopg.errors.ReadOnlySqlTransaction), db.tenant_read("acme") as (conn, _, _):
            conn.execute("UPDATE episodes SET importance = 0.9 WHERE tenant_id = 'acme'")


def test_recall_on_the_worker_equals_recall_through_the_coordinator(db: Database, backend: str) -> None:
    rng = np.random.default_rng(6)
    query = unit(rng)
    for n in range(12):
        add(
            db,
            f"an episode numbered {n}",
            tenant="acme",
            days_ago=n + 1,
            vector=query + 0.3 * unit(rng) if n % 3 else unit(rng),
        )
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
    assert _read_on(db, "acme") == (port, True)
    drop_abandoned_move_slots(db.url)
    target = next(w for w in workers(db.url) if w != (host, port))
    with psycopg.connect(db.url, autocommit=True) as conn:
        conn.execute(
            "SELECT citus_move_shard_placement(%s::bigint, %s::text, %s::int, %s::text, %s::int, "
            "shard_transfer_mode => 'block_writes')",
            (shard, host, port, target[0], target[1]),
        )
    assert _placed(db.url, "acme")[2] == target[1]
    add(db, "after the move", tenant="acme", days_ago=0.5, vector=query)  # through the coordinator
    # The route is still the old worker's, which no longer holds the shards and says so: the read there
    # names the distributed tables (the worker sends it on), not the stale shard tables Citus leaves
    # behind until its cleanup drops them (seconds later) ...
    assert _read_on(db, "acme") == (port, False)
    after = _ids(db, "acme", "u1", query)  # ... and the next read is routed anew
    assert _read_on(db, "acme") == (target[1], True)
    through = Database(db.settings.with_(recall_on_workers=False))
    try:
        assert after == _ids(through, "acme", "u1", query)
    finally:
        through.close()
    assert after[0] == before[0] + 1 == 7


def test_shard_tables_gone_during_a_read_are_read_again_through_a_fresh_route(db: Database, backend: str) -> None:
    """A move that drops the tables between the worker's check and a statement: UndefinedTable, then
    recall routes anew and reads once more (here a route naming a table that does not exist)."""
    if backend != "citus":
        pytest.skip("routes exist only on the cluster")
    rng = np.random.default_rng(9)
    query = unit(rng)
    for n in range(4):
        add(db, f"an episode numbered {n}", tenant="acme", days_ago=n + 1, vector=query)
    expected = _ids(db, "acme", "u1", query)
    route = db._routes.route("acme")
    assert route is not None
    gone = route._replace(shard_ids=tuple((t, 999_999_999 if t == "episodes" else s) for t, s in route.shard_ids))
    db._routes._routes["acme"] = (gone, float("inf"))
    with pytest.raises(psycopg.errors.UndefinedTable), db.tenant_read("acme") as (conn, sql, _):
        conn.execute(sql("recall_rows"), {"tenant_id": "acme", "ids": [1], "dim": 384})
    db._routes._routes["acme"] = (gone, float("inf"))
    assert _ids(db, "acme", "u1", query) == expected
    assert db._routes.route("acme") == route


def test_an_unreachable_worker_leaves_recall_to_the_coordinator(
    db: Database, backend: str, caplog: pytest.LogCaptureFixture
) -> None:
    if backend != "citus":
        pytest.skip("routes exist only on the cluster")
    rng = np.random.default_rng(8)
    query = unit(rng)
    add(db, "the plan for the launch", tenant="acme", vector=query)
    db._routes = Routes(ask_with(db.admin), lambda node: False)  # as if no worker answered
    coordinator = int(str(psycopg.conninfo.conninfo_to_dict(db.url)["port"]))
    with caplog.at_level(logging.WARNING, logger="jobs.citus.routes"):
        assert _port(db, "acme") == coordinator
        assert _ids(db, "acme", "u1", query)[0] == 1
    assert any(getattr(r, "action", "") == "route_fallback" for r in caplog.records)
