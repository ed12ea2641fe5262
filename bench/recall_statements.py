"""What each statement of a later recall costs, on one PostgreSQL and on the Citus worker holding the tenant.

    python bench/recall_statements.py [--episodes 20000] [--users 300] [--sample 60] [--rounds 4]

Loads the same generated episodes (``bench/recall_speed.py``) into the embedded PostgreSQL and into a
scratch database on the Citus cluster (``../shared/citus/cluster.sh up``), then runs each statement a
later recall of a typical user makes, alone, inside a tenant transaction as the recaller opens it
(``SET LOCAL ROLE episodes_app``, the tenant setting: row-level security applies), and times it from
send to last row. On the cluster each statement runs on the worker that holds the tenant's shards,
where ``Database.tenant_read`` sends recall (``jobs/citus/routes.py``), twice: naming the distributed tables
(as the coordinator and a worker without the tenant's shards run it) and naming the tenant's shard
tables (jobs/citus/shards.py, as recall runs it on the worker that holds them). Printed: the median per
statement, each way, and the ratios to one PostgreSQL; the first round only warms up.

A statement on a distributed table is planned by Citus on every run, even locally: on its fast path
(one table, the tenant named once, no subquery) it is planned once and not deparsed, and costs a
fraction of a router query's planning. These figures say which statements pay what.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import psycopg
from _common import scratch_home
from citus_cluster import create_database, drop_database, unreachable
from pgvector.psycopg import register_vector
from psycopg.rows import dict_row
from recall_speed import load_data, plan_users

from jobs import config, migrate
from jobs.db import APP_ROLE, Database, set_local, start_embedded
from jobs.citus.routes import Routes, ask_with, node_url
from jobs.citus.shards import shards
from jobs.sql import query

CLUSTER_DB = f"episodes_bench_statements_{os.getpid()}"
NOW = dt.datetime(2026, 6, 1, tzinfo=dt.UTC)
MESSAGE = "Where did we leave the billing refund for March?"
STATEMENTS = ("recall_changes", "recall_open_items", "recall_unsummarised", "recall_rows")


def params(conn: psycopg.Connection[Any], tenant: str, user: str) -> dict[str, Any]:
    """What each statement takes for a later recall of ``user`` (every name any of them uses)."""
    version = conn.execute("SELECT version, epoch FROM recall_versions WHERE tenant_id = %s AND user_id = %s",
                           (tenant, user)).fetchone() or {"version": 0, "epoch": None}
    ids = [r["id"] for r in conn.execute("SELECT id FROM episodes WHERE tenant_id = %s AND user_id = %s "
                                         "ORDER BY id DESC LIMIT 12", (tenant, user))]
    return {"tenant_id": tenant, "user_id": user, "since": version["version"], "epoch": version["epoch"],
            "query_text": MESSAGE, "now": NOW, "purposes": None, "ids": ids, "limit": 8,
            "offset": 0, "grace_seconds": 14 * 86400, "age_seconds": 90 * 86400}


def time_statements(urls: dict[str, str], users: list[tuple[str, str]], rounds: int,
                    texts: Callable[[str, str], str] = lambda tenant, name: query(name)) -> dict[str, float]:
    """Median ms per statement; ``urls`` maps each tenant to the server it is read on, ``texts`` gives
    the statement a tenant's read sends."""
    conns = {url: psycopg.connect(url, row_factory=dict_row) for url in set(urls.values())}
    try:
        args = {(t, u): params(conns[urls[t]], t, u) for t, u in users}
        for conn in conns.values():
            conn.commit()
        samples: dict[str, list[float]] = {name: [] for name in STATEMENTS}
        for round_ in range(rounds):
            for name in samples:
                for tenant, user in users:
                    conn = conns[urls[tenant]]
                    with conn.transaction():
                        set_local(conn, role=APP_ROLE, **{"episodes.tenant_id": tenant})
                        started = time.perf_counter()
                        conn.execute(texts(tenant, name), args[(tenant, user)],
                                     binary=name == "recall_changes").fetchall()
                        if round_:
                            samples[name].append(time.perf_counter() - started)
        return {name: float(np.median(s)) * 1000 for name, s in samples.items()}
    finally:
        for conn in conns.values():
            conn.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--episodes", type=int, default=20_000)
    parser.add_argument("--users", type=int, default=300)
    parser.add_argument("--sample", type=int, default=60, help="typical users timed")
    parser.add_argument("--rounds", type=int, default=4, help="runs of each statement per user (the first warms up)")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    if (reason := unreachable()) is not None:
        sys.exit(reason)
    counts = plan_users(args.episodes, args.users, 2, 2_000, np.random.default_rng(args.seed))
    picked = np.random.default_rng(args.seed).choice(np.arange(2, len(counts)), size=args.sample, replace=False)
    users = [(f"t{u % 10}", f"u{u}") for u in picked]
    with scratch_home() as home:
        single = start_embedded(home / "pgdata")
        with psycopg.connect(single) as conn:
            migrate.migrate(conn, embedding_dim=384, embedder="all-MiniLM-L6-v2")
        cluster = create_database(CLUSTER_DB, shards=32)
        try:
            for url in (single, cluster):
                with psycopg.connect(url) as conn:
                    register_vector(conn)
                    load_data(conn, counts, args.seed)
            with Database(config.Settings(database_url=cluster, home=home)) as db:
                routes = Routes(ask_with(db.admin), usable=lambda node: True)  # where tenant_read reads
                placed = {t: routes.route(t) for t, _ in users}
            workers = {t: node_url(cluster, route.node) if (route := placed[t]) else cluster for t, _ in users}
            on = {t: shards(route.group, route.shard_ids) for t, route in placed.items() if route is not None}
            one = time_statements({t: single for t, _ in users}, users, args.rounds)
            citus = time_statements(workers, users, args.rounds)
            direct = time_statements(workers, users, args.rounds,
                                     lambda tenant, name: on[tenant].query(name) if tenant in on else query(name))
        finally:
            drop_database(CLUSTER_DB)
    print(f"data: {int(counts.sum()):,} episodes, {len(counts):,} users; {len(users)} typical users timed, "
          f"{args.rounds - 1} rounds; cluster: coordinator + 2 workers, 32 shards per table; cores {os.cpu_count()}")
    print(f"{'statement (median ms, alone in a tenant transaction)':44} {'single':>8} {'worker':>8} {'ratio':>7} "
          f"{'shards':>8} {'ratio':>7}")
    rows = [(name, one[name], citus[name], direct[name]) for name in STATEMENTS]
    rows.append(("all four", sum(one.values()), sum(citus.values()), sum(direct.values())))
    for name, a, b, c in rows:
        print(f"{name:44} {a:8.3f} {b:8.3f} {b / a:6.2f}x {c:8.3f} {c / a:6.2f}x")


if __name__ == "__main__":
    main()
