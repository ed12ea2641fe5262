"""Summarize and recall on one PostgreSQL and on the Citus cluster, side by side; prints figures and ratios.

    python bench/cluster_scaleout.py                              # 100k episodes / 1,000 users, 320 transcripts
    python bench/cluster_scaleout.py --episodes 20000 --users 200 --transcripts 160   # quick

The same code and the same data on both: the embedded PostgreSQL (one node, a scratch home) and a
scratch database on the Citus cluster of ../shared/citus/cluster.sh (coordinator + 2 workers on this
machine, EPISODES_TEST_CITUS_URL or its default URL), migrated and distributed as `episodes init`
does (--shards per table). Both run on the same 2 cores, so the cluster pays its coordinator hop
and gains no hardware: the ratios say what the distribution itself costs.

Summarize (bench/summarize_throughput.py's phase, the fake Anthropic server in its own process):
overhead per episode outside the model call at C=1, L=0, and episodes/s at C, L with its ratio to
the limit C/L; exactly once is checked (current episodes = sessions = transcripts).
Recall (bench/_data.py's data and measure, as in bench/recall.py --mode latency): a user's first
recall in the process, a later
recall with one new episode committed since (the usual case), typical and heavy users.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np
import psycopg
from _common import peak_rss_mb, scratch_home
from _data import load_data, measure, percentiles, plan_users
from ingest_rate import generate
from pgvector.psycopg import register_vector
from summarize_throughput import breakdown, phase
from support.citus_cluster import create_database, drop_database, unreachable

from jobs import config, migrate
from jobs.db import Database, start_embedded
from jobs.embeddings import get_embedder
from jobs.recall import Recaller

CLUSTER_DB = f"episodes_bench_cluster_{os.getpid()}"  # others may run this bench on the same cluster


def summarize_figures(settings: config.Settings, small: Path, big: Path, args: argparse.Namespace) -> dict:
    one = phase(settings, args.overhead_transcripts, 1, 0.0, small, "anthropic")
    full = phase(settings, args.transcripts, args.concurrency, args.latency, big, "anthropic")
    return {
        "overhead_ms": (one["wall"] - one["http_s"]) / one["done"] * 1000,
        "rate": full["rate"],
        "limit": args.concurrency / args.latency,
        "stages": breakdown(one),
        "stages_full": breakdown(full),
        "once": (full["episodes"], full["distinct"], args.transcripts),
    }


def recall_figures(url: str, settings: config.Settings, counts: np.ndarray, args: argparse.Namespace) -> dict:
    with psycopg.connect(url) as conn:
        register_vector(conn)
        conn.execute("TRUNCATE episodes CASCADE")
        conn.commit()
        load_data(conn, counts, args.seed)
    rng = np.random.default_rng(args.seed)
    heavy = list(range(args.heavy_users))
    typical = [int(u) for u in rng.choice(np.arange(args.heavy_users, len(counts)), size=args.queries, replace=False)]
    with Database(settings.with_(database_url=url)) as db, psycopg.connect(url) as write:
        register_vector(write)
        recaller = Recaller(db)
        first, _ = measure(recaller, typical, rng, 1)
        first_heavy, _ = measure(recaller, heavy, rng, 1)
        later, _ = measure(recaller, typical, rng, 1, write)
        later_heavy, _ = measure(recaller, heavy, rng, 3, write)
    return {"first": first, "first_heavy": first_heavy, "later": later, "later_heavy": later_heavy}


def p95(samples: list[float]) -> float:
    return float(np.percentile(np.array(samples) * 1000, 95))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--episodes", type=int, default=100_000)
    parser.add_argument("--users", type=int, default=1_000)
    parser.add_argument("--heavy-users", type=int, default=5)
    parser.add_argument("--heavy-size", type=int, default=5_000)
    parser.add_argument("--queries", type=int, default=200, help="typical users recalled")
    parser.add_argument("--transcripts", type=int, default=320)
    parser.add_argument("--overhead-transcripts", type=int, default=100)
    parser.add_argument("--latency", type=float, default=1.0)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--shards", type=int, default=32, help="shards per distributed table")
    parser.add_argument("--seed", type=int, default=7)
    only = parser.add_mutually_exclusive_group()
    only.add_argument("--summarize-only", action="store_true", help="skip recall (a couple of minutes)")
    only.add_argument("--recall-only", action="store_true", help="skip summarize (a few minutes)")
    args = parser.parse_args()
    if (reason := unreachable()) is not None:
        sys.exit(reason)
    get_embedder("minilm").embed(["warm up"])
    counts = plan_users(args.episodes, args.users, args.heavy_users, args.heavy_size, np.random.default_rng(args.seed))
    results: dict[str, dict] = {}
    with scratch_home() as home:
        small, big = home / "small.jsonl", home / "big.jsonl"
        if not args.recall_only:
            generate(small, args.overhead_transcripts, 12)
            generate(big, args.transcripts, 12)
        single_url = start_embedded(home / "pgdata")
        with psycopg.connect(single_url) as conn:
            migrate.migrate(conn, embedding_dim=384, embedder="all-MiniLM-L6-v2")
        cluster_url = create_database(CLUSTER_DB, shards=args.shards)
        try:
            for name, url in (("single", single_url), ("citus", cluster_url)):
                settings = config.Settings(database_url=url, home=home)
                results[name] = {}
                if not args.recall_only:
                    print(f"[{name}] summarize ...", file=sys.stderr)
                    results[name].update(summarize_figures(settings, small, big, args))
                if args.summarize_only:
                    continue
                print(f"[{name}] recall: loading {int(counts.sum()):,} episodes ...", file=sys.stderr)
                results[name].update(recall_figures(url, settings, counts, args))
                if name == "citus":  # the same, with every read through the coordinator (jobs/citus/routes.py off)
                    print("[citus, through the coordinator] recall ...", file=sys.stderr)
                    results["via coordinator"] = recall_figures(
                        url, settings.with_(recall_on_workers=False), counts, args
                    )
        finally:
            drop_database(CLUSTER_DB)
    s, c, v = results["single"], results["citus"], results.get("via coordinator", {})
    data = (
        ""
        if args.summarize_only
        else (
            f"data: {int(counts.sum()):,} episodes, {len(counts):,} users "
            f"({args.heavy_users} heavy x {args.heavy_size:,}); "
        )
    )
    print(f"{data}cluster: coordinator + 2 workers, {args.shards} shards per table; cores {os.cpu_count()}")
    print("citus: recall reads on the tenant's worker (the default); via coordinator: Settings.recall_on_workers=False")
    print(f"{'':44} {'single':>12} {'citus':>12} {'citus/single':>13} {'via coord.':>11} {'ratio':>7}")
    rows: list[tuple[str, float, float, float | None]] = (
        []
        if args.recall_only
        else [
            ("summarize overhead, ms/episode (C=1, L=0)", s["overhead_ms"], c["overhead_ms"], None),
            (f"summarize episodes/s (C={args.concurrency}, L={args.latency}s)", s["rate"], c["rate"], None),
        ]
    )
    rows += (
        []
        if args.summarize_only
        else [
            (f"recall p95 ms, {label}", p95(s[key]), p95(c[key]), p95(v[key]))
            for label, key in (
                ("first of a typical user", "first"),
                ("first of a heavy user", "first_heavy"),
                ("later, typical (1 new)", "later"),
                ("later, heavy (1 new)", "later_heavy"),
            )
        ]
    )
    for label, a, b, via in rows:
        tail = "" if via is None else f" {via:11.2f} {via / a:6.2f}x"
        print(f"{label:44} {a:12.2f} {b:12.2f} {b / a:12.2f}x{tail}")
    for name, r in results.items():
        if not args.summarize_only:
            print(f"[{name}] later recall, typical: {percentiles(r['later'])}")
        if args.recall_only or "rate" not in r:
            continue
        print(
            f"[{name}] summarize: {r['rate']:.2f} episodes/s = {r['rate'] / r['limit']:.1%} of C/L; exactly once: "
            f"{r['once'][0]} current episodes for {r['once'][1]} sessions of {r['once'][2]} transcripts"
        )
        print(f"[{name}] summarize stages, ms/episode at C=1: {r['stages']}")
        print(f"[{name}] summarize stages, ms/episode at C={args.concurrency}: {r['stages_full']}")
    print(f"peak RSS {peak_rss_mb():.0f} MB")


if __name__ == "__main__":
    main()
