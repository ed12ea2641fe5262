"""Recall speed on generated episodes (bench/_data.py), in one of three modes; prints figures, asserts nothing.

    python bench/recall.py --mode latency                       # 1M episodes, 10k users (~10 min to load)
    python bench/recall.py --mode latency --episodes 50000 --users 500 --heavy-users 5 --heavy-size 3000
    python bench/recall.py --mode latency --home /tmp/rb --keep # keep the data; the next run reuses it
    python bench/recall.py --mode cold --home /tmp/rb ...       # the same sizes as the run that kept it
    python bench/recall.py --mode statements --episodes 20000 --users 300 --heavy-users 2 --heavy-size 2000

``latency``: ``Recaller.recall_vector`` (a precomputed query vector; everything else as in production:
tenant transaction with row-level security, open items, the read of what changed since the process's
copy of the user's scoring columns, exact scoring of every candidate, fitting, rendering), typical and
heavy users apart, in three cases: a user's first recall in the process (a full read of the user's
rows), a later recall with nothing new, and a later recall after one new episode of the user was
committed (the usual case). Then ``recall()``, the documented function (embedding included): a user's
first call and the next one, and the embedding of one opening message alone. ``--shared-buffers``
restarts the embedded server with that setting; ``--cluster`` rewrites the table in user order
(what ``pg_repack --order-by tenant_id,user_id,ended_at`` does online).

``cold``: where a heavy user's first recall in a process spends its time, step by step (medians): the
server's execution of ``recall_changes`` (EXPLAIN ANALYZE), the statement's wall time in the client,
building the copy (``UserIndex.apply``; the postings alone), scoring, fusion, reading the chosen rows,
the whole first recall; then the same first recall from the user's pack (``jobs.recall.packs``)
against a full read.

``statements``: each statement of a typical user's later recall, alone in a tenant transaction as the
recaller opens it, on the embedded PostgreSQL and, when the Citus cluster is up
(``../shared/citus/cluster.sh up``), on the worker that holds the tenant (naming the distributed tables,
then the tenant's shard tables, as recall runs there): medians and ratios; the first round warms up.
"""

from __future__ import annotations

import argparse
import os
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import numpy as np
import psycopg
from _common import peak_rss_mb, scratch_home
from _data import (
    DIM,
    EMBEDDER,
    NOW,
    TENANTS,
    BenchData,
    add_data_arguments,
    bench_data,
    counts_of,
    load_data,
    measure,
    percentiles,
    sentence,
    unit_vector,
)
from pgvector.psycopg import register_vector
from psycopg.rows import dict_row

from jobs import config, migrate
from jobs.config import load
from jobs.db import APP_ROLE, Database, one, set_local, start_embedded
from jobs.embeddings import get_embedder
from jobs.recall import Recaller, close_recallers, recall
from jobs.recall.index import RecallIndex, UserIndex
from jobs.recall.packs import read_pack, write_pack
from jobs.recall.postings import Postings
from jobs.recall.scoring import epoch_us, fuse
from jobs.sql import query


def latency(data: BenchData, args: argparse.Namespace) -> None:
    counts = counts_of(args)
    rng = np.random.default_rng(args.seed)
    with psycopg.connect(data.url) as conn:
        size = conn.execute("SELECT pg_size_pretty(pg_total_relation_size('episodes'))").fetchone()
        if args.cluster:
            conn.autocommit = True
            # CLUSTER cannot use the partial index; rewrite in user order (pg_repack --order-by does this online)
            with conn.transaction():
                conn.execute(
                    "CREATE TEMP TABLE ep_copy AS SELECT * FROM episodes ORDER BY tenant_id, user_id, ended_at DESC"
                )
                conn.execute("TRUNCATE episodes CASCADE")
                conn.execute("INSERT INTO episodes SELECT * FROM ep_copy")  # same ids; the sequence is past them
            conn.execute("VACUUM ANALYZE episodes")
        print(f"shared_buffers {conn.execute('SHOW shared_buffers').fetchone()[0]}; clustered by user: {args.cluster}")
    heavy = list(range(min(args.heavy_users, len(counts))))
    print(
        f"episodes: {counts.sum():,} for {len(counts):,} users; heavy users: {len(heavy)} x {counts[0]:,}; "
        f"typical user: median {int(np.median(counts[len(heavy) :]))}, p99 "
        f"{int(np.percentile(counts[len(heavy) :], 99))}; table with indexes: {size[0] if size else '?'}"
    )
    db = Database(load().with_(database_url=data.url))
    recaller = Recaller(db)
    typical = [
        int(u)
        for u in rng.choice(
            np.arange(len(heavy), len(counts)), size=min(args.queries, len(counts) - len(heavy)), replace=False
        )
    ]
    rss_before = peak_rss_mb()
    t_cold_typ, n_typ = measure(recaller, typical, rng, 1)
    t_cold_heavy, n_heavy = measure(recaller, heavy, rng, 1)
    print("first recall of a user in this process (full read of the user's rows):")
    print(f"  typical users (median {int(np.median(n_typ))} candidates): {percentiles(t_cold_typ)}")
    print(f"  heavy users ({int(np.median(n_heavy or [0])):,} candidates):   {percentiles(t_cold_heavy)}")
    rounds = max(1, args.queries // max(len(heavy), 1))
    t_typ, n_typ = measure(recaller, typical, rng, 1)
    t_heavy, n_heavy = measure(recaller, heavy, rng, rounds)
    print("later recall, nothing new since the user's previous recall:")
    print(f"  typical users: {percentiles(t_typ)}")
    print(f"  heavy users:   {percentiles(t_heavy)}")
    with psycopg.connect(data.url) as write:
        register_vector(write)
        t_new_typ, _ = measure(recaller, typical, rng, 1, write)
        t_new_heavy, _ = measure(recaller, heavy, rng, rounds, write)
    print("later recall, one new episode of the user committed since its previous recall:")
    print(f"  typical users: {percentiles(t_new_typ)}")
    print(f"  heavy users:   {percentiles(t_new_heavy)}")
    sizes, times = np.array(n_typ + n_heavy), np.array(t_typ + t_heavy) * 1000
    for lo, hi in ((0, 100), (100, 300), (300, 1000), (1000, 5000), (5000, 10**9)):
        if (pick := (sizes >= lo) & (sizes < hi)).any():
            print(
                f"  users with {lo:,}-{min(hi, 10**6) - 1:,} candidates, nothing new: p50 "
                f"{np.median(times[pick]):6.2f} ms  p95 {np.percentile(times[pick], 95):6.2f} ms  (n={int(pick.sum())})"
            )
    # One recall per session and one episode per session: requests come in proportion to episodes.
    heavy_eps = int(counts[: len(heavy)].sum())
    share = max(1, len(t_new_typ) * heavy_eps // max(int(counts.sum()) - heavy_eps, 1))
    print(
        f"recall, all users (in proportion to episodes, one new episode each): "
        f"{percentiles(t_new_typ + t_new_heavy[:share])}"
    )
    print(
        f"in-process copies: {recaller.index.rows:,} rows of {recaller.index.users:,} users; full reads "
        f"{recaller.index.full_reads:,}; peak RSS {peak_rss_mb():.0f} MB (before recalls {rss_before:.0f} MB)"
    )
    recaller.embed("warm up")
    print("recall(), the documented function (embedding included):")
    for label, group in (("typical users", typical[:100]), ("heavy users", heavy)):
        first, later = timed_recalls(db, group, rng), timed_recalls(db, group, rng)
        print(f"  {label}, first call in the process: {percentiles(first)}")
        print(f"  {label}, the same user's next call: {percentiles(later)}")
    close_recallers()
    db.close()
    embedder = get_embedder(load().embedder)
    embedder.embed(["warm up"])
    t_embed = []
    for _ in range(max(10, min(100, args.queries * 5))):
        message = sentence(rng, 14)
        t = time.perf_counter()
        embedder.embed([message])
        t_embed.append(time.perf_counter() - t)
    print(f"embedding one opening message ({embedder.name}, CPU): {percentiles(t_embed)}")


def timed_recalls(db: Database, users: list[int], rng: np.random.Generator) -> list[float]:
    """Seconds of one ``recall()`` per user: the documented function, which embeds the message itself."""
    times: list[float] = []
    for u in users:
        t = time.perf_counter()
        recall(f"t{u % TENANTS}", f"u{u}", sentence(rng, 10), now=NOW, db=db)
        times.append(time.perf_counter() - t)
    return times


def cold(data: BenchData, args: argparse.Namespace) -> None:
    db = Database(load().with_(database_url=data.url))
    with db.connect() as conn:
        conn.execute("TRUNCATE recall_packs")  # this run's packs are written below, from full reads
        conn.commit()
    recaller = Recaller(db)
    rng = np.random.default_rng(1)
    message = "billing refund invoice upgrade plan"
    steps: dict[str, list[float]] = defaultdict(list)
    sizes = []
    heavy = range(min(args.heavy_users, args.users - 1))
    for _ in range(args.rounds):
        for u in heavy:
            tenant, user = f"t{u % TENANTS}", f"u{u}"
            vector = unit_vector(rng)
            params = {"tenant_id": tenant, "user_id": user, "since": "0", "epoch": None, "query_text": message}
            with db.tenant(tenant) as conn:
                plan = conn.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + query("recall_changes"), params).fetchone()
                assert plan is not None
                steps["server: recall_changes (EXPLAIN ANALYZE)"].append(
                    next(iter(plan.values()))[0]["Execution Time"] / 1000
                )
                t = time.perf_counter()
                row = one(conn.execute(query("recall_changes"), params, binary=True))
                steps["client: recall_changes wall (exec + transfer + row)"].append(time.perf_counter() - t)
                index = UserIndex(DIM)
                t = time.perf_counter()
                index.apply(row)
                steps["apply: the whole copy (ids, times, vectors, postings)"].append(time.perf_counter() - t)
                t = time.perf_counter()
                Postings.read(
                    0,
                    np.frombuffer(row["lexeme_counts"], ">i4").astype(np.int64),
                    row["lexemes"] or b"",
                    row["tf"] or b"",
                )
                steps["apply: postings alone"].append(time.perf_counter() - t)
                lexemes = [x.encode() for x in row["query_lexemes"] or []]
                t = time.perf_counter()
                s = index.scores(vector, lexemes, epoch_us(NOW), None)
                steps["scores (cosine + ts_rank)"].append(time.perf_counter() - t)
                t = time.perf_counter()
                picked = fuse(s, recaller.config, epoch_us(NOW), set())
                steps["fuse"].append(time.perf_counter() - t)
                t = time.perf_counter()
                conn.execute(
                    query("recall_rows"), {"tenant_id": tenant, "user_id": user, "now": NOW, "ids": sorted(picked)}
                ).fetchall()
                steps["recall_rows"].append(time.perf_counter() - t)
                sizes.append(len(s.ids))
            recaller.index.clear()
            t = time.perf_counter()
            recaller.recall_vector(tenant, user, message, vector, now=NOW)
            steps["whole first recall (Recaller.recall_vector, fresh copy)"].append(time.perf_counter() - t)
            recaller.index.clear()
    print(f"heavy users: {len(heavy)}, candidates median {int(np.median(sizes)):,}; {args.rounds} rounds")
    print_steps(steps)
    compare_packs(db, heavy, args.rounds, rng, message)
    db.close()


def compare_packs(db: Database, heavy: range, rounds: int, rng: np.random.Generator, message: str) -> None:
    """A heavy user's first recall from a pack against a full read, side by side; writing and size of a pack."""
    steps: dict[str, list[float]] = defaultdict(list)
    sizes = []
    for u in heavy:  # one pack per heavy user, as the first full read leaves it
        tenant, user = f"t{u % TENANTS}", f"u{u}"
        with db.tenant(tenant) as conn:
            row = one(
                conn.execute(
                    query("recall_changes"),
                    {"tenant_id": tenant, "user_id": user, "since": "0", "epoch": None, "query_text": message},
                    binary=True,
                )
            )
            index = UserIndex(DIM)
            index.apply(row)
            index.version, index.epoch = int(row["version"]), row["epoch"]
            t = time.perf_counter()
            pack = index.pack()
            steps["pack: UserIndex.pack (serialise, on the recall's path)"].append(time.perf_counter() - t)
        t = time.perf_counter()
        with db.tenant(tenant) as conn:
            write_pack(conn, tenant, user, pack)
        steps["pack: write (lock + upsert + commit)"].append(time.perf_counter() - t)
        sizes.append(sum(len(v) for v in pack.values() if isinstance(v, bytes)))
    with db.admin() as conn:
        on_disk = one(conn.execute("SELECT pg_total_relation_size('recall_packs') AS n"))["n"]
    with_pack, without = Recaller(db), Recaller(db)
    for _ in range(rounds):
        for u in heavy:
            tenant, user = f"t{u % TENANTS}", f"u{u}"
            vector = unit_vector(rng)
            with db.tenant(tenant) as conn:
                t = time.perf_counter()
                found = read_pack(conn, tenant, user, DIM)
                steps["cold from pack: read_pack (statement + transfer)"].append(time.perf_counter() - t)
                if found is None:
                    raise SystemExit(f"no pack for {user}: written above, so something removed it")
                t = time.perf_counter()
                UserIndex.from_pack(found)
                steps["cold from pack: UserIndex.from_pack (decode)"].append(time.perf_counter() - t)
            for name, recaller in (("from pack", with_pack), ("full read", without)):
                recaller.index = RecallIndex(DIM, db.settings.recall_cache_rows)  # cold; no writer: packs stay
                hide = name == "full read"  # the pack hidden from read_pack (another dim), kept for the next round
                if hide:
                    set_pack_dim(db, tenant, user, -DIM)
                t = time.perf_counter()
                recaller.recall_vector(tenant, user, message, vector, now=NOW)
                steps[f"first recall, {name} (Recaller.recall_vector)"].append(time.perf_counter() - t)
                if hide:
                    set_pack_dim(db, tenant, user, DIM)
            if not (with_pack.index.pack_reads == 1 and without.index.full_reads == 1):
                raise SystemExit("the pack and the full read were not the paths taken; the comparison means nothing")
    print(
        f"packs: {len(heavy)} written, {np.median(sizes) / 1e6:.1f} MB each (median of their bytea), "
        f"recall_packs on disk {on_disk / 1e6:.1f} MB"
    )
    print_steps(steps)
    pack_ms = np.median(steps["first recall, from pack (Recaller.recall_vector)"]) * 1000
    full_ms = np.median(steps["first recall, full read (Recaller.recall_vector)"]) * 1000
    print(f"  first recall from a pack / full read: {pack_ms:.1f} / {full_ms:.1f} ms = {pack_ms / full_ms:.2f}")


def set_pack_dim(db: Database, tenant: str, user: str, dim: int) -> None:
    """An update of one small column: the pack's bytea stay where they are (TOAST pointers are copied)."""
    with db.admin() as conn:
        conn.execute("UPDATE recall_packs SET dim = %s WHERE tenant_id = %s AND user_id = %s", (dim, tenant, user))


def print_steps(steps: dict[str, list[float]]) -> None:
    for name, seconds in steps.items():
        print(f"  {name:58} p50 {np.median(seconds) * 1000:8.2f} ms")


STATEMENTS = ("recall_changes", "recall_open_items", "recall_unsummarised", "recall_rows")


def statement_params(conn: psycopg.Connection[Any], tenant: str, user: str) -> dict[str, Any]:
    """What each statement takes for a later recall of ``user`` (every name any of them uses)."""
    version = conn.execute(
        "SELECT version, epoch FROM recall_versions WHERE tenant_id = %s AND user_id = %s", (tenant, user)
    ).fetchone() or {"version": 0, "epoch": None}
    ids = [
        r["id"]
        for r in conn.execute(
            "SELECT id FROM episodes WHERE tenant_id = %s AND user_id = %s ORDER BY id DESC LIMIT 12", (tenant, user)
        )
    ]
    return {
        "tenant_id": tenant,
        "user_id": user,
        "since": version["version"],
        "epoch": version["epoch"],
        "query_text": "Where did we leave the billing refund for March?",
        "now": NOW,
        "purposes": None,
        "ids": ids,
        "limit": 8,
        "offset": 0,
        "grace_seconds": 14 * 86400,
        "age_seconds": 90 * 86400,
    }


def time_statements(
    urls: dict[str, str],
    users: list[tuple[str, str]],
    rounds: int,
    texts: Callable[[str, str], str] = lambda tenant, name: query(name),
) -> dict[str, float]:
    """Median ms per statement; ``urls`` maps each tenant to the server it is read on, ``texts`` gives
    the statement a tenant's read sends."""
    conns = {url: psycopg.connect(url, row_factory=dict_row) for url in set(urls.values())}
    try:
        args = {(t, u): statement_params(conns[urls[t]], t, u) for t, u in users}
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
                        conn.execute(
                            texts(tenant, name), args[(tenant, user)], binary=name == "recall_changes"
                        ).fetchall()
                        if round_:
                            samples[name].append(time.perf_counter() - started)
        return {name: float(np.median(s)) * 1000 for name, s in samples.items()}
    finally:
        for conn in conns.values():
            conn.close()


def statements(args: argparse.Namespace) -> None:
    from support.citus_cluster import create_database, drop_database, unreachable  # tests/, on the path by _common

    from jobs.citus.routes import Routes, ask_with, node_url
    from jobs.citus.shards import shards

    counts = counts_of(args)
    picked = np.random.default_rng(args.seed).choice(
        np.arange(args.heavy_users, len(counts)), size=min(args.sample, len(counts) - args.heavy_users), replace=False
    )
    users = [(f"t{u % TENANTS}", f"u{u}") for u in picked]
    reason = unreachable() if args.backend == "both" else "--backend single"
    cluster_db = f"episodes_bench_statements_{os.getpid()}"
    with scratch_home() as home:
        single = start_embedded(home / "pgdata")
        with psycopg.connect(single) as conn:
            migrate.migrate(conn, embedding_dim=DIM, embedder=EMBEDDER)
        cluster = create_database(cluster_db, shards=32) if reason is None else None
        try:
            for url in (single, cluster):
                if url is not None:
                    with psycopg.connect(url) as conn:
                        register_vector(conn)
                        load_data(conn, counts, args.seed)
            one_pg = time_statements({t: single for t, _ in users}, users, args.rounds)
            if cluster is not None:
                with Database(config.Settings(database_url=cluster, home=home)) as db:
                    routes = Routes(ask_with(db.admin), usable=lambda node: True)  # where tenant_read reads
                    placed = {t: routes.route(t) for t, _ in users}
                workers = {t: node_url(cluster, route.node) if (route := placed[t]) else cluster for t, _ in users}
                on = {t: shards(route.group, route.shard_ids) for t, route in placed.items() if route is not None}
                citus = time_statements(workers, users, args.rounds)
                direct = time_statements(
                    workers,
                    users,
                    args.rounds,
                    lambda tenant, name: on[tenant].query(name) if tenant in on else query(name),
                )
        finally:
            if cluster is not None:
                drop_database(cluster_db)
    print(
        f"data: {int(counts.sum()):,} episodes, {len(counts):,} users; {len(users)} typical users timed, "
        f"{args.rounds - 1} rounds; cores {os.cpu_count()}"
    )
    if cluster is None:
        print(f"one PostgreSQL only, no Citus cluster ({reason})")
        print(f"{'statement (median ms, alone in a tenant transaction)':52} {'single':>8}")
        for name in STATEMENTS:
            print(f"{name:52} {one_pg[name]:8.3f}")
        print(f"{'all four':52} {sum(one_pg.values()):8.3f}")
        return
    print("cluster: coordinator + 2 workers, 32 shards per table")
    print(
        f"{'statement (median ms, alone in a tenant transaction)':52} {'single':>8} {'worker':>8} {'ratio':>7} "
        f"{'shards':>8} {'ratio':>7}"
    )
    rows = [(name, one_pg[name], citus[name], direct[name]) for name in STATEMENTS]
    rows.append(("all four", sum(one_pg.values()), sum(citus.values()), sum(direct.values())))
    for name, a, b, c in rows:
        print(f"{name:52} {a:8.3f} {b:8.3f} {b / a:6.2f}x {c:8.3f} {c / a:6.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mode", choices=("latency", "cold", "statements"), default="latency")
    add_data_arguments(parser)
    parser.add_argument("--queries", type=int, default=400, help="latency: typical users recalled")
    parser.add_argument("--shared-buffers", default=None, help="latency, cold: e.g. 4GB (embedded server; restarts it)")
    parser.add_argument("--cluster", action="store_true", help="latency: rewrite the table in user order first")
    parser.add_argument(
        "--rounds",
        type=int,
        default=3,
        help="cold: rounds over the heavy users; statements: runs of each statement per user (the first warms up)",
    )
    parser.add_argument("--sample", type=int, default=60, help="statements: typical users timed")
    parser.add_argument(
        "--backend",
        choices=("single", "both"),
        default="both",
        help="statements: one PostgreSQL only, or also the Citus cluster when it is up",
    )
    args = parser.parse_args()
    if args.mode == "statements":
        statements(args)
    else:
        with bench_data(args, args.shared_buffers) as data:
            (latency if args.mode == "latency" else cold)(data, args)
    print(f"cores: {os.cpu_count()}")


if __name__ == "__main__":
    main()
