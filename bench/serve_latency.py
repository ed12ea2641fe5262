"""`episodes serve` end to end: close -> stored latency through NOTIFY, and drain throughput.

    python bench/serve_latency.py [--latency 1.0] [--sessions 60] [--drain 10000] [--workers 1,2,4]

Latency: sessions are closed one at a time (0.25 s apart) while one serve process (poll 60 s, so
only NOTIFY can explain a fast pickup) runs against the fake Anthropic server at latency L.
Drain: N closed transcripts, then 1, 2 and 4 serve processes (4 threads each) against the fake at
latency 0; wall time until all are done, throughput, and the exactly-once check.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time

from _common import bench_database, median, percentile, scratch_home
from psycopg.types.json import Jsonb
from summarize_throughput import fake_server

from jobs import config, migrate
from jobs.db import Database, notify_eligible

WAIT_SECONDS = 300  # far beyond any healthy start or drain at bench sizes

MESSAGES = [
    {"role": "user", "name": "Maria", "content": "We'll go with the Team plan at $49 per seat."},
    {"role": "assistant", "content": "Done. I'll send the invoice by Friday."},
]


def serve(url: str, fake_url: str, concurrency: int) -> subprocess.Popen:
    env = {
        **os.environ,
        "DATABASE_URL": url,
        "ANTHROPIC_API_KEY": "bench",
        "ANTHROPIC_BASE_URL": fake_url,
        "HF_HUB_OFFLINE": "1",
        "EPISODES_LOG_LEVEL": "WARNING",
    }
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "jobs.cli",
            "serve",
            "--concurrency",
            str(concurrency),
            "--poll",
            "60s",
            "--extractor",
            "anthropic",
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def stop(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        p.send_signal(signal.SIGTERM)
    for p in procs:
        p.wait(timeout=60)


def check_running(procs: list[subprocess.Popen], deadline: float, waiting_for: str) -> None:
    """Stop the bench with a reason instead of waiting forever on a serve process that died or stalled."""
    if dead := [p.returncode for p in procs if p.poll() is not None]:
        raise SystemExit(f"a serve process exited (codes {dead}) while waiting for {waiting_for}")
    if time.monotonic() > deadline:
        raise SystemExit(f"gave up waiting for {waiting_for} after {WAIT_SECONDS} s")


def wait_ready(db: Database, procs: list[subprocess.Popen]) -> None:
    """Wait until the serve processes have started (each records a maintenance run at start)."""
    deadline = time.monotonic() + WAIT_SECONDS
    while True:
        with db.admin() as conn:
            if conn.execute("SELECT count(*) AS n FROM job_runs WHERE job = 'maintenance'").fetchone()["n"] >= len(
                procs
            ):
                return
        check_running(procs, deadline, f"{len(procs)} serve process(es) to start")
        time.sleep(0.2)


def reset(db: Database) -> None:
    with db.admin() as conn:
        conn.execute("TRUNCATE transcripts, episodes, model_calls, job_runs CASCADE")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--latency", type=float, default=1.0)
    parser.add_argument("--sessions", type=int, default=60)
    parser.add_argument("--drain", type=int, default=10_000)
    parser.add_argument("--workers", default="1,2,4")
    args = parser.parse_args()
    with scratch_home() as home:
        url = bench_database(home / "pgdata")
        settings = config.Settings(database_url=url, home=home)
        with Database(settings) as db:
            with db.connect() as conn:
                migrate.migrate(conn, embedding_dim=384, embedder="all-MiniLM-L6-v2")

            fake, fake_url = fake_server(args.latency)
            procs = [serve(url, fake_url, 8)]
            try:
                wait_ready(db, procs)
                time.sleep(2.0)  # let it load the embedder and subscribe
                closed_at: dict[str, float] = {}
                for n in range(args.sessions):
                    with db.tenant("acme") as conn:
                        conn.execute(
                            "INSERT INTO transcripts (tenant_id, user_id, session_id, started_at, ended_at, "
                            "messages, content_hash) VALUES ('acme', 'u1', %s, now(), now(), %s, %s)",
                            (f"lat{n}", Jsonb(MESSAGES), f"h{n}"),
                        )
                        # as ingest does: the NOTIFY is the application's, not a trigger's, since migration 0016
                        notify_eligible(conn, "acme")
                    closed_at[f"lat{n}"] = time.time()  # committed
                    time.sleep(0.25)
                deadline = time.time() + 120
                while time.time() < deadline:
                    with db.admin() as conn:
                        rows = conn.execute(
                            "SELECT session_id, extract(epoch FROM created_at) AS at FROM episodes"
                        ).fetchall()
                    if len(rows) == args.sessions:
                        break
                    time.sleep(0.2)
                delays = [float(r["at"]) - closed_at[r["session_id"]] for r in rows]
            finally:
                stop(procs)
                fake.terminate()
                fake.wait()
            goal = args.latency + 0.5
            print(
                f"close -> stored via NOTIFY (L={args.latency}s, {len(delays)}/{args.sessions} sessions): "
                f"p50 {median(delays):.3f}s p95 {percentile(delays, 0.95):.3f}s max {max(delays):.3f}s; "
                f"goal p95 <= L + 0.5 = {goal:.1f}s -> p95 is {percentile(delays, 0.95) / goal:.0%} of the goal"
            )

            fake, fake_url = fake_server(0.0)
            try:
                for workers in [int(w) for w in args.workers.split(",")]:
                    reset(db)
                    with db.tenant("acme") as conn, conn.cursor() as cur:
                        cur.executemany(
                            "INSERT INTO transcripts (tenant_id, user_id, session_id, ended_at, messages, "
                            "content_hash) VALUES ('acme', %s, %s, now(), %s, %s)",
                            [(f"u{n % 100}", f"d{n}", Jsonb(MESSAGES), f"h{n}") for n in range(args.drain)],
                        )
                    started = time.time()
                    procs = [serve(url, fake_url, 4) for _ in range(workers)]
                    try:
                        deadline = time.monotonic() + WAIT_SECONDS
                        while True:
                            with db.admin() as conn:
                                done = conn.execute(
                                    "SELECT count(*) AS n FROM transcripts WHERE status = 'done'"
                                ).fetchone()["n"]
                            if done >= args.drain:
                                break
                            check_running(procs, deadline, f"{args.drain} transcripts to drain ({done} done)")
                            time.sleep(0.5)
                        took = time.time() - started
                    finally:
                        stop(procs)
                    with db.admin() as conn:
                        check = conn.execute(
                            "SELECT count(*) AS n, count(DISTINCT session_id) AS d FROM episodes "
                            "WHERE status = 'current'"
                        ).fetchone()
                    print(
                        f"drain {args.drain} with {workers} serve process(es) x 4 threads: {took:.1f}s = "
                        f"{args.drain / took:.0f} episodes/s (including process start); exactly once: "
                        f"{check['n']} episodes for {check['d']} sessions"
                    )
            finally:
                fake.terminate()
                fake.wait()


if __name__ == "__main__":
    main()
