"""Compress at scale: synthetic episodes over many users, offline and through Claude's API (fake server).

    python bench/compress_scale.py [--episodes 100000] [--users 1000] [--heavy 3000] [--budget 24000]
                                   [--concurrency 4] [--skip-claude]

Generates episodes spread over 2021-2025 (plus one "heavy" user with --heavy episodes in 2024),
COPYs them into a scratch embedded database, and compresses years <= 2024 (as of 2026-11-21, 12mo):
1. with the offline compressor, then once more (must change nothing);
2. after deleting the supers, with the Claude path against tests/support/fake_anthropic.py run as a separate
   process at latency 0 (so wall time excludes model latency; the local HTTP round trips are shown
   separately). Prints model calls and input tokens per call (max / p95): they are bounded by the
   budget, not by the length of the period, as the heavy user's group shows.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import random
import subprocess
import sys
import time

from _common import ROOT, bench_database, peak_rss_mb, percentile, scratch_home

from jobs import config, migrate
from jobs.compress import AnthropicCompressor, OfflineCompressor, run_compress
from jobs.db import Database
from jobs.embeddings import get_embedder

NOW = dt.datetime(2026, 11, 21, 12, tzinfo=dt.UTC)
TOPICS = [
    "pricing",
    "onboarding",
    "billing",
    "api limits",
    "single sign-on",
    "data export",
    "warehouse migration",
    "renewal",
    "security review",
    "webhooks",
    "mobile app",
    "reporting",
]
PRODUCTS = ["Acme Cloud", "Globex CRM", "Initech Ledger", "Umbrella Analytics", "Hooli Mail", "Stark Storage"]
NAMES = ["Maria", "Dana", "Ken", "Priya", "Tomas", "Aiko", "Lena", "Omar"]


def generate(episodes: int, users: int, heavy: int, seed: int = 7) -> tuple[list[tuple], list[tuple], list[tuple]]:
    """Rows for episodes, episode_events and episode_entities (ids assigned here)."""
    rng = random.Random(seed)
    start, span = dt.datetime(2021, 1, 1, tzinfo=dt.UTC), 5 * 365 * 86400
    owners = [(f"t{u % 10}", f"u{u}", None) for u in range(users) for _ in range(episodes // users)]
    owners += [("t0", "heavy", dt.datetime(2024, 1, 1, tzinfo=dt.UTC))] * heavy
    eps, events, ents = [], [], []
    for eid, (tenant, user, year) in enumerate(owners, start=1):
        topic, product, name = rng.randrange(len(TOPICS)), rng.randrange(len(PRODUCTS)), rng.choice(NAMES)
        ended = (
            year + dt.timedelta(seconds=rng.randrange(365 * 86400))
            if year
            else start + dt.timedelta(seconds=rng.randrange(span))
        )
        summary = (
            f"{name} worked with the agent on {TOPICS[topic]} for {PRODUCTS[product]}; "
            f"they went through the options and agreed on next steps (case {eid})."
        )
        eps.append(
            (
                eid,
                tenant,
                user,
                f"bench-{eid}",
                summary,
                "{" + f'"{TOPICS[topic]}","{PRODUCTS[product].lower()}"' + "}",
                round(rng.uniform(0.2, 0.9), 2),
                ended - dt.timedelta(minutes=25),
                ended,
                topic * len(PRODUCTS) + product,
            )
        )
        for ordinal, kind in enumerate(
            rng.sample(["decision", "open_question", "commitment", "surprise"], rng.randrange(4))
        ):
            what = {
                "decision": f"{name} decided to move {PRODUCTS[product]} to the annual plan (case {eid}).",
                "open_question": f"{name} asked whether {TOPICS[topic]} covers the EU region (case {eid}).",
                "commitment": f"The agent promised {name} a written {TOPICS[topic]} guide (case {eid}).",
                "surprise": f"{name} did not expect the {TOPICS[topic]} limit (case {eid}).",
            }[kind]
            status = "open" if kind in ("open_question", "commitment") else "n/a"
            events.append((tenant, user, eid, ordinal, kind, what, name, ended, f"{{{ordinal}}}", status))
        ents += [(tenant, user, eid, name, "person"), (tenant, user, eid, PRODUCTS[product], "product")]
    return eps, events, ents


def load(db: Database, episodes: list[tuple], events: list[tuple], entities: list[tuple], vectors: list[str]) -> None:
    with db.admin() as conn, conn.cursor() as cur:
        with cur.copy(
            "COPY episodes (id, tenant_id, user_id, kind, session_id, purpose, summary, topic_tags, "
            "importance, started_at, ended_at, embedding, model, prompt_version) FROM STDIN"
        ) as copy:
            for eid, tenant, user, session, summary, tags, importance, started, ended, vec in episodes:
                copy.write_row(
                    (
                        eid,
                        tenant,
                        user,
                        "session",
                        session,
                        "support",
                        summary,
                        tags,
                        importance,
                        started,
                        ended,
                        vectors[vec],
                        "bench",
                        "bench",
                    )
                )
        with cur.copy(
            "COPY episode_events (tenant_id, user_id, episode_id, ordinal, type, what, who, occurred_at, "
            "evidence, status) FROM STDIN"
        ) as copy:
            for row in events:
                copy.write_row(row)
        with cur.copy("COPY episode_entities (tenant_id, user_id, episode_id, name, kind) FROM STDIN") as copy:
            for row in entities:
                copy.write_row(row)
        cur.execute("SELECT setval(pg_get_serial_sequence('episodes', 'id'), (SELECT max(id) FROM episodes))")
    with db.connect(autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE episodes, episode_events, episode_entities")


def fake_server() -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen(
        [
            sys.executable,
            str(ROOT / "tests" / "support" / "fake_anthropic.py"),
            "--port",
            "0",
            "--latency",
            "0",
            "--responder",
            "support.compress_data:compress_responder",
        ],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT / "tests",
        env={**os.environ, "PYTHONPATH": str(ROOT / "tests")},
    )
    line = proc.stdout.readline().strip()
    if not line.startswith("FAKE_ANTHROPIC_URL="):
        proc.kill()
        raise SystemExit(f"the fake server did not start: {line!r}")
    return proc, line.split("=", 1)[1]


def check(db: Database) -> dict:
    """Sanity figures: supers, one per period, every carried event reachable, no super without lineage."""
    with db.admin() as conn:
        return conn.execute("""
            SELECT (SELECT count(*) FROM episodes WHERE kind = 'super' AND status = 'current') AS supers,
                   (SELECT count(*) FROM episodes WHERE compressed_into IS NOT NULL) AS compressed,
                   (SELECT max(n) FROM (SELECT count(*) AS n FROM episode_lineage GROUP BY super_episode_id) x)
                       AS max_sources,
                   (SELECT count(*) FROM episodes s WHERE s.kind = 'super' AND NOT EXISTS
                       (SELECT 1 FROM episode_lineage l WHERE l.super_episode_id = s.id)) AS without_lineage,
                   (SELECT count(*) FROM episode_events src JOIN episodes e ON e.id = src.episode_id
                     WHERE e.compressed_into IS NOT NULL
                       AND (src.type = 'decision' OR (src.type IN ('open_question', 'commitment')
                                                       AND src.status = 'open'))
                       AND NOT EXISTS (SELECT 1 FROM episode_events s WHERE s.episode_id = e.compressed_into
                                                                         AND s.source_event_id = src.id))
                       AS unreachable""").fetchone()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--episodes", type=int, default=100_000)
    parser.add_argument("--users", type=int, default=1_000)
    parser.add_argument("--heavy", type=int, default=3_000, help="episodes of one extra user, all in 2024")
    parser.add_argument("--budget", type=int, default=24_000, help="Settings.transcript_token_budget for Claude")
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--skip-claude", action="store_true")
    args = parser.parse_args()

    embedder = get_embedder("minilm")
    pool = [f"Someone worked on {t} for {p}." for t in TOPICS for p in PRODUCTS]
    vectors = ["[" + ",".join(f"{x:.6f}" for x in v) + "]" for v in embedder.embed(pool)]
    t = time.perf_counter()
    episodes, events, entities = generate(args.episodes, args.users, args.heavy)
    print(
        f"generated {len(episodes):,} episodes, {len(events):,} events, {len(entities):,} entities "
        f"in {time.perf_counter() - t:.1f}s"
    )
    with scratch_home() as home:
        url = bench_database(home / "pgdata")
        settings = config.Settings(database_url=url, home=home, pool_size=args.concurrency + 4)
        with Database(settings) as db:
            with db.connect() as conn:
                migrate.migrate(conn, embedding_dim=embedder.dim, embedder=embedder.name)
            t = time.perf_counter()
            load(db, episodes, events, entities, vectors)
            print(f"loaded with COPY in {time.perf_counter() - t:.1f}s")

            t = time.perf_counter()
            report = run_compress(
                db, compressor=OfflineCompressor(embedder), embedder=embedder, now=NOW, concurrency=args.concurrency
            )
            wall = time.perf_counter() - t
            sane = check(db)
            print(f"\noffline   {report.line()}")
            print(
                f"  wall {wall:.1f}s · {report.counts['created'] / wall:.1f} supers/s · "
                f"{report.sources / wall:,.0f} sessions/s · {sane}"
            )
            t = time.perf_counter()
            again = run_compress(db, compressor=OfflineCompressor(embedder), embedder=embedder, now=NOW)
            print(f"  re-run  {again.line()} (wall {time.perf_counter() - t:.2f}s)")

            if not args.skip_claude:
                t = time.perf_counter()
                with db.admin() as conn:  # what erasures and removals do (sources un-point, then delete), in bulk
                    conn.execute(
                        "SELECT episodes_release_references(tenant_id, array_agg(id)) FROM episodes "
                        "WHERE kind = 'super' GROUP BY tenant_id"
                    )
                    deleted = conn.execute("DELETE FROM episodes WHERE kind = 'super'").rowcount
                print(f"\ndeleted {deleted:,} supers (events, lineage, pointers) in {time.perf_counter() - t:.1f}s")
                proc, fake_url = fake_server()
                try:
                    claude = settings.with_(
                        anthropic_api_key="bench",
                        anthropic_base_url=fake_url,
                        max_retries=0,
                        transcript_token_budget=args.budget,
                    )
                    with Database(claude, url=db.url) as cdb:
                        compressor = AnthropicCompressor(claude)
                        t = time.perf_counter()
                        report = run_compress(
                            cdb, compressor=compressor, embedder=embedder, now=NOW, concurrency=args.concurrency
                        )
                        wall = time.perf_counter() - t
                        estimates = list(compressor.request_tokens)
                        compressor.close()
                        with cdb.admin() as conn:
                            rows = conn.execute(
                                "SELECT user_id, latency_ms, input_tokens + cache_read_tokens + "
                                "cache_write_tokens AS tokens FROM model_calls"
                            ).fetchall()
                        sane = check(cdb)
                finally:
                    proc.terminate()
                    proc.wait()
                tokens = [r["tokens"] for r in rows]
                heavy = [r["tokens"] for r in rows if r["user_id"] == "heavy"]
                model_s = sum(r["latency_ms"] for r in rows) / 1000
                print(f"\nclaude    {report.line()}")
                rate = report.counts["created"] / wall
                print(
                    f"  wall {wall:.1f}s with the fake server at latency 0 (local HTTP round trips "
                    f"{model_s:.1f}s summed over {args.concurrency} threads) · {rate:.1f} supers/s · {sane}"
                )
                print(
                    f"  model calls {len(rows):,} for {report.counts['created']:,} periods · input tokens per call "
                    f"(API count incl. system + tool schema) max {max(tokens):,} / "
                    f"p95 {percentile(tokens, 0.95):,.0f} / median {percentile(tokens, 0.5):,.0f}"
                )
                print(
                    f"  estimated user-message tokens per call max {max(estimates):,} / p95 "
                    f"{percentile(estimates, 0.95):,.0f} (budget {args.budget:,})"
                )
                if heavy:
                    print(
                        f"  heavy user ({args.heavy:,} sessions in 2024): {len(heavy)} calls, max "
                        f"{max(heavy):,} input tokens per call"
                    )
    print(f"\npeak RSS {peak_rss_mb():.0f} MB")


if __name__ == "__main__":
    main()
