"""Recall speed on generated episodes (bench/_data.py); prints figures, asserts nothing.

    python bench/recall.py                                      # 1M episodes, 10k users (~10 min to load)
    python bench/recall.py --episodes 50000 --users 500 --heavy-users 5 --heavy-size 3000
    python bench/recall.py --home /tmp/rb --keep                # keep the data; the next run reuses it

``Recaller.recall_vector`` (a precomputed query vector; everything else as in production: tenant
transaction with row-level security, open items, every candidate scored in PostgreSQL, lines, fitting,
rendering), typical and heavy users apart, in three cases: a user's first recall in the process, a
later recall with nothing new, and a later recall after one new episode of the user was committed.
(Recall keeps nothing between calls, so the three differ only by what PostgreSQL has cached.) Then
``recall()``, the documented function (embedding included), and the embedding of one opening message
alone. ``--shared-buffers`` restarts the embedded server with that setting; ``--cluster`` rewrites the
table in user order (what ``pg_repack --order-by tenant_id,user_id,ended_at`` does online).
"""

from __future__ import annotations

import argparse
import os
import time

import _blas  # noqa: F401  numpy's BLAS threads as `episodes` sets them: before numpy loads
import numpy as np
import psycopg
from _common import peak_rss_mb
from _data import (
    NOW,
    TENANTS,
    BenchData,
    add_data_arguments,
    bench_data,
    counts_of,
    measure,
    percentiles,
    sentence,
    unit_vector,
)
from pgvector.psycopg import register_vector

from jobs.config import load
from jobs.db import Database
from jobs.embeddings import get_embedder
from jobs.recall import Recaller, close_recallers, recall


def latency(data: BenchData, args: argparse.Namespace) -> None:
    counts = counts_of(args)
    rng = np.random.default_rng(args.seed)
    with psycopg.connect(data.url, autocommit=True) as conn:  # CLUSTER and VACUUM run outside a transaction
        size = conn.execute("SELECT pg_size_pretty(pg_total_relation_size('episodes'))").fetchone()
        if args.cluster:
            # CLUSTER cannot use the partial index episodes_user_recent_idx: one over the same columns for the
            # rewrite, dropped after (ids, foreign keys, lines and events stay as they are; pg_repack --order-by
            # does the same online). A copy through TRUNCATE ... CASCADE would empty the lines and events.
            started = time.perf_counter()
            conn.execute("CREATE INDEX IF NOT EXISTS bench_user_order ON episodes (tenant_id, user_id, ended_at DESC)")
            conn.execute("CLUSTER episodes USING bench_user_order")
            conn.execute("DROP INDEX bench_user_order")
            conn.execute("VACUUM ANALYZE episodes")
            print(f"clustered episodes by user in {time.perf_counter() - started:.0f} s")
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
    print("first recall of a user in this process:")
    print(f"  typical users (median {int(np.median(n_typ))} candidates): {percentiles(t_cold_typ)}")
    print(f"  heavy users ({int(np.median(n_heavy or [0])):,} candidates):   {percentiles(t_cold_heavy)}")
    rounds = max(1, args.queries // max(len(heavy), 1))
    t_typ, n_typ = measure(recaller, typical, rng, 1)
    t_heavy, n_heavy = measure(recaller, heavy, rng, rounds)
    print("later recall, nothing new since the user's previous recall:")
    print(f"  typical users: {percentiles(t_typ)}")
    print(f"  heavy users:   {percentiles(t_heavy)}")
    print(f"CPU per recall, median (OpenBLAS threads: {os.environ.get('OPENBLAS_NUM_THREADS', 'numpy default')}):")
    for label, group in (("typical users", typical), ("heavy users", heavy * rounds)):
        own, process = cpu_per_recall(recaller, group, rng)
        print(f"  {label}: the process {process:6.2f} ms, of which the recall's thread {own:6.2f} ms")
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
    print(f"peak RSS {peak_rss_mb():.0f} MB (before recalls {rss_before:.0f} MB)")
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


def cpu_per_recall(recaller: Recaller, users: list[int], rng: np.random.Generator) -> tuple[float, float]:
    """Median CPU of one recall: the recall's own thread and the whole process (BLAS's worker threads, if any,
    are the difference; PostgreSQL's CPU is another process's)."""
    own, process = [], []
    for u in users:
        t, th = time.process_time(), time.thread_time()
        recaller.recall_vector(f"t{u % TENANTS}", f"u{u}", sentence(rng, 10), unit_vector(rng), now=NOW)
        own.append(time.thread_time() - th)
        process.append(time.process_time() - t)
    return float(np.median(own)) * 1000, float(np.median(process)) * 1000


def timed_recalls(db: Database, users: list[int], rng: np.random.Generator) -> list[float]:
    """Seconds of one ``recall()`` per user: the documented function, which embeds the message itself."""
    times: list[float] = []
    for u in users:
        t = time.perf_counter()
        recall(f"t{u % TENANTS}", f"u{u}", sentence(rng, 10), now=NOW, db=db)
        times.append(time.perf_counter() - t)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_data_arguments(parser)
    parser.add_argument("--queries", type=int, default=400, help="typical users recalled")
    parser.add_argument("--shared-buffers", default=None, help="e.g. 4GB (embedded server; restarts it)")
    parser.add_argument("--cluster", action="store_true", help="rewrite the table in user order first")
    args = parser.parse_args()
    with bench_data(args, args.shared_buffers) as data:
        latency(data, args)
    print(f"cores: {os.cpu_count()}")


if __name__ == "__main__":
    main()
