"""A shard move under load, on the real Citus cluster (issue 18).

While `serve` summarises a stream of closing sessions and recalls keep reading, the tenant's shard
group (its transcripts, episodes, events, lines, ..., all co-located) moves to the other worker with ``citus_move_shard_placement`` in ``block_writes`` mode:
the tenant's writes wait while its rows are copied, reads go on. (The online mode, ``force_logical``,
needs a logical-replication apply worker on the target; with a Citus maintenance daemon per test
database, a node's default eight background-worker slots can run out, and the move then waits forever.) Nothing may be lost or doubled, and every recall must stay
exact: the rows it scores are, in the same snapshot, exactly the user's candidate episodes.
"""

from __future__ import annotations

import datetime as dt
import threading
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import psycopg
import pytest
from pgvector.psycopg import register_vector
from psycopg.rows import DictRow, dict_row
from support import citus_cluster
from support import fake_anthropic as fa
from support.citus_cluster import drop_abandoned_move_slots, workers
from support.waiting import wait_until

from jobs import config
from jobs.db import APP_ROLE, Database, one, set_local
from jobs.extract.claude import AnthropicExtractor
from jobs.ingest import ingest_records
from jobs.recall import RecallConfig
from jobs.recall.scoring import read_scores, send_scores
from jobs.serve import ServeOptions, Server
from jobs.sql import query

pytestmark = pytest.mark.slow

TENANT = "acme"
USERS = [f"u{n}" for n in range(6)]
SESSIONS_PER_USER = 10
TRUTH = """SELECT id FROM episodes WHERE tenant_id = %(t)s AND user_id = %(u)s
           AND status = 'current' AND compressed_into IS NULL ORDER BY id"""


@pytest.fixture
def cluster_db(citus_url: str, fake: fa.FakeAnthropic, monkeypatch: pytest.MonkeyPatch) -> Iterator[Database]:
    citus_cluster.empty(citus_url)
    monkeypatch.setenv("DATABASE_URL", citus_url)
    settings = config.load().with_(
        anthropic_api_key="test-key",
        anthropic_base_url=fake.base_url,
        max_retries=0,
        model_timeout_s=10.0,
        lease_seconds=10,
        extractor="anthropic",
    )
    database = Database(settings)
    yield database
    database.close()


def placement(url: str) -> tuple[int, str, int]:
    """The tenant's transcripts shard and the worker holding it (its co-located shards move with it)."""
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT shardid, nodename, nodeport FROM citus_shards "
            "WHERE shardid = get_shard_id_for_distribution_column('transcripts', %s::text)",
            (TENANT,),
        ).fetchone()
    assert row is not None
    return int(row[0]), row[1], int(row[2])


def transcript(user: str, n: int) -> dict[str, Any]:
    start = dt.datetime(2026, 3, 1, 9, tzinfo=dt.UTC) + dt.timedelta(hours=n)
    return {
        "tenant_id": TENANT,
        "user_id": user,
        "session_id": f"{user}-s{n}",
        "started_at": start.isoformat(),
        "ended_at": (start + dt.timedelta(minutes=20)).isoformat(),
        "messages": [
            {"role": "user", "content": f"Session {n}: we'll go with the Team plan for project {n}."},
            {"role": "assistant", "content": "Done, I'll send the invoice by Friday."},
        ],
    }


class RecallChecker(threading.Thread):
    """Has recall score each user's candidates while shards move, and compares them with the truth in one snapshot."""

    def __init__(self, url: str, stop: threading.Event) -> None:
        super().__init__(daemon=True)
        self.url, self.stop = url, stop
        self.checks = self.mismatches = 0
        self.errors: list[str] = []

    def check(self, conn: psycopg.Connection[DictRow], user: str) -> None:
        with conn.transaction():
            set_local(conn, role=APP_ROLE, **{"episodes.tenant_id": TENANT})
            asked = {
                "tenant_id": TENANT,
                "user_id": user,
                "now": dt.datetime.now(dt.UTC),
                "purposes": None,
                "query_text": "what did we decide about the plan?",
            }
            every = RecallConfig(recent_n=10_000, top_k=0, related_k=0)  # every candidate comes back as recent
            scored = read_scores(send_scores(conn, query, asked, np.ones(384, np.float32), every, ()))
            held = sorted(scored.scores.ids.tolist())
            truth = [r["id"] for r in conn.execute(TRUTH, {"t": TENANT, "u": user})]
        self.checks += 1
        if held != truth:
            self.mismatches += 1
            self.errors.append(f"{user}: recall scored {held} != table {truth}")

    def run(self) -> None:
        with psycopg.connect(self.url, row_factory=dict_row, autocommit=True) as conn:
            register_vector(conn)
            conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
            while not self.stop.is_set():
                for user in USERS:
                    try:
                        self.check(conn, user)
                    except psycopg.Error as exc:  # counted, and the test fails on any
                        self.errors.append(f"{user}: {type(exc).__name__}: {exc}")
                time.sleep(0.02)


def test_shard_move_under_load_loses_nothing_doubles_nothing_and_recall_stays_exact(cluster_db: Database) -> None:
    url = cluster_db.url
    drop_abandoned_move_slots(url)
    shard, host, port = placement(url)
    target = next(w for w in workers(url) if w != (host, port))
    extractor = AnthropicExtractor(cluster_db.settings)
    server = Server(
        cluster_db,
        extractor,
        ServeOptions(concurrency=2, poll_seconds=1, maintenance_seconds=120, shutdown_deadline=10),
    )
    serving = threading.Thread(target=server.run, kwargs={"install_signals": False})
    stop = threading.Event()
    checker = RecallChecker(url, stop)
    records = [transcript(u, n) for n in range(SESSIONS_PER_USER) for u in USERS]
    serving.start()
    checker.start()
    try:
        moved_at = None
        for i in range(0, len(records), 6):  # sessions keep closing before, during and after the move
            report = ingest_records(cluster_db, [(f"stream:{i + k}", r) for k, r in enumerate(records[i : i + 6])])
            assert not report.rejected, report.rejected
            if i == 18:
                t = time.perf_counter()
                with psycopg.connect(url, autocommit=True) as conn:
                    conn.execute(
                        "SELECT citus_move_shard_placement(%s::bigint, %s::text, %s::int, %s::text, %s::int, shard_transfer_mode => 'block_writes')",
                        (shard, host, port, target[0], target[1]),
                    )
                moved_at = time.perf_counter() - t
            time.sleep(0.2)

        def unfinished() -> int:
            with cluster_db.admin() as conn:
                return int(
                    one(
                        conn.execute(
                            "SELECT count(*) AS n FROM transcripts WHERE tenant_id = %s AND status <> 'done'", (TENANT,)
                        )
                    )["n"]
                )

        wait_until(lambda: not unfinished(), 120, "every session summarised", every=0.5)
        after = checker.checks
        wait_until(lambda: checker.checks >= after + len(USERS), 30, "a last round of recalls after the final commit")
    finally:
        stop.set()
        checker.join(timeout=30)
        server.stop()
        serving.join(timeout=60)
        extractor.close()

    assert moved_at is not None and placement(url)[1:] == target  # the tenant now lives on the other worker
    with cluster_db.admin() as admin:
        states = admin.execute(
            "SELECT status, count(*) AS n FROM transcripts WHERE tenant_id = %s GROUP BY 1", (TENANT,)
        ).fetchall()
        episodes = admin.execute(
            "SELECT count(*) AS n, count(DISTINCT session_id) AS sessions, count(*) FILTER (WHERE status <> 'current') "
            "AS superseded FROM episodes WHERE tenant_id = %s",
            (TENANT,),
        ).fetchone()
        calls = one(
            admin.execute("SELECT count(*) AS n FROM model_calls WHERE tenant_id = %s AND outcome = 'ok'", (TENANT,))
        )["n"]
    assert {r["status"]: r["n"] for r in states} == {"done": len(records)}  # nothing lost
    assert episodes == {"n": len(records), "sessions": len(records), "superseded": 0}  # nothing doubled
    assert calls == len(records)  # each session summarised once
    assert checker.errors == [] and checker.mismatches == 0
    assert checker.checks > 3 * len(USERS)
    print(f"shard move took {moved_at:.2f}s; {checker.checks} recall copies checked against the table, 0 mismatches")
