"""Embedded database cold / warm start, and ingest rate for N generated transcripts.

    python bench/ingest_rate.py [--transcripts 10000] [--messages 12]

Prints: cold start (initdb + start), warm start (start an existing stopped data dir), reuse (the
server is already running: what every later CLI call pays), ingest transcripts/s, peak RSS.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import time
from pathlib import Path

from _common import peak_rss_mb, scratch_home, stop_embedded

from jobs import config, migrate
from jobs.db import Database, start_embedded
from jobs.ingest import ingest

WORDS = (
    "pricing plan invoice warehouse migration dashboard export seats contract renewal budget "
    "timeline report api webhook latency hiring interview offer trip hotel kitchen quote"
).split()


def generate(path: Path, n: int, messages: int, seed: int = 7) -> None:
    rng = random.Random(seed)
    with path.open("w") as handle:
        for i in range(n):
            day = 1 + i % 28
            msgs = [
                {
                    "role": "user" if k % 2 == 0 else "assistant",
                    "content": " ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 40))),
                    "ts": f"2025-03-{day:02d}T10:{k % 60:02d}:00Z",
                }
                for k in range(messages)
            ]
            handle.write(
                json.dumps(
                    {
                        "tenant_id": f"t{i % 4}",
                        "user_id": f"u{i % 500}",
                        "session_id": f"s{i}",
                        "started_at": f"2025-03-{day:02d}T10:00:00Z",
                        "ended_at": f"2025-03-{day:02d}T11:00:00Z",
                        "messages": msgs,
                    }
                )
                + "\n"
            )


def start_in_new_process(pgdata: Path) -> float:
    """Seconds that start_embedded takes in a fresh process, as a CLI call would see it."""
    code = (
        "import time; from pathlib import Path; from jobs.db import start_embedded; "
        f"t = time.perf_counter(); start_embedded(Path({str(pgdata)!r})); print(time.perf_counter() - t)"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    return float(out.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--transcripts", type=int, default=10_000)
    parser.add_argument("--messages", type=int, default=12)
    args = parser.parse_args()
    with scratch_home() as home:
        pgdata = home / "pgdata"
        cold = start_in_new_process(pgdata)  # initdb + start
        reuse = start_in_new_process(pgdata)  # already running: what every later CLI call pays
        stop_embedded(pgdata)
        warm = start_in_new_process(pgdata)  # existing data dir, server stopped
        url = start_embedded(pgdata)
        settings = config.Settings(database_url=url, home=home)
        with Database(settings) as db, db.connect() as conn:
            migrate.migrate(conn, embedding_dim=384, embedder="all-MiniLM-L6-v2")
        data = home / "bench.jsonl"
        generate(data, args.transcripts, args.messages)
        size_mb = data.stat().st_size / 1e6
        with Database(settings) as db:
            t = time.perf_counter()
            report = ingest(db, [data])
            took = time.perf_counter() - t
            t = time.perf_counter()
            again = ingest(db, [data])
            took_again = time.perf_counter() - t
    print(
        f"embedded start (in a new process, excluding interpreter start): cold {cold:.2f}s · "
        f"warm {warm:.2f}s · reuse (already running) {reuse * 1000:.0f}ms"
    )
    print(
        f"ingest: {report.inserted:,} transcripts ({size_mb:.1f} MB, {args.messages} messages each) "
        f"in {took:.1f}s = {report.inserted / took:,.0f} transcripts/s; rejected {len(report.rejected)}"
    )
    print(
        f"re-ingest (all unchanged): {again.unchanged:,} in {took_again:.1f}s = "
        f"{again.unchanged / took_again:,.0f} transcripts/s"
    )
    print(f"peak RSS {peak_rss_mb():.0f} MB")


if __name__ == "__main__":
    main()
