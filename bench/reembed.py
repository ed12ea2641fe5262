"""Re-embed 100,000 episodes while a thread recalls the whole time; kill -9 the re-embed midway and resume.

Builds the episodes in SQL (an embedded database; 200 users x 500 episodes, 384-d vectors), then runs
`jobs.lifecycle.reembed` to ``hashing:64`` in a child process, kills it with SIGKILL once half is done,
and resumes it in a second child. A thread in this process recalls users round-robin from before the
first child starts until after the switch. Prints episodes/s per run, the vectors each run wrote
(the resumed run must write only what the killed one had not), the switch time, the child's peak
RSS, and the recalls that failed or came back empty.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import threading
import time

from _common import peak_rss_mb, scratch_database

from jobs import config
from jobs.db import Database
from jobs.embeddings import HashingEmbedder, get_embedder
from jobs.lifecycle.reembed import reembed, reembed_progress
from jobs.recall import Recaller

BUILD = """
INSERT INTO episodes (tenant_id, user_id, kind, session_id, purpose, summary, topic_tags, importance, started_at,
                      ended_at, search_tsv, model, prompt_version, embedding)
SELECT 'bench', 'u' || (i % %(users)s), 'session', 's' || i, 'general',
       'Session ' || i || ' about ' || (ARRAY['pricing','renewal','SSO','invoices','onboarding'])[1 + i % 5],
       ARRAY['topic' || (i % 17)], 0.5, now() - make_interval(hours => i), now() - make_interval(hours => i),
       to_tsvector('english', 'Session about ' || (ARRAY['pricing','renewal','SSO','invoices','onboarding'])[1 + i % 5]),
       'bench', 'bench', (SELECT array_agg(random() - 0.5)::vector FROM generate_series(1, 384) g WHERE i > 0)
FROM generate_series(1, %(n)s) i
"""


def child(url: str, batch: int) -> None:
    settings = config.load().with_(database_url=url)
    with Database(settings) as db:
        report = reembed(db, get_embedder("hashing:64"), "hashing:64", batch_size=batch)
    print(
        f"{report.written} {report.caught_up} {report.seconds:.3f} {report.switch_seconds:.4f} {peak_rss_mb():.0f}",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=100_000)
    parser.add_argument("--users", type=int, default=200)
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--child", metavar="URL", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args.child, args.batch)
    with scratch_database() as db:
        url = db.url
        with db.connect(autocommit=True) as conn:
            started = time.perf_counter()
            conn.execute(BUILD.replace("%(users)s", str(args.users)).replace("%(n)s", str(args.episodes)))
            conn.execute("VACUUM ANALYZE episodes")
            # The random vectors stand for the "old" embedder's, hashing:384 (the recalling thread's):
            # recall checks its embedder against the record and would follow any other.
            conn.execute("UPDATE episodes_settings SET value = 'hashing:384' WHERE key = 'embedder'")
        print(f"built {args.episodes:,} episodes of {args.users} users in {time.perf_counter() - started:.1f}s")
        stop = threading.Event()
        outcome = {"ok": 0, "empty": 0, "failed": 0}
        errors: list[str] = []

        def recalls() -> None:
            recaller = Recaller(db, HashingEmbedder(384))  # the "old" embedder: 384-d like the stored vectors
            i = 0
            while not stop.is_set():
                try:
                    answer = recaller.recall("bench", f"u{i % args.users}", "what did we decide about pricing?")
                    outcome["ok" if answer.episodes else "empty"] += 1
                except Exception as exc:
                    outcome["failed"] += 1
                    errors.append(repr(exc))
                i += 1

        thread = threading.Thread(target=recalls)
        thread.start()
        command = [sys.executable, __file__, "--child", url, "--batch", str(args.batch)]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
        started = time.perf_counter()
        first = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, text=True)
        done, deadline = 0, time.monotonic() + 600
        # Poll often: at small sizes a batch takes milliseconds. A finished child leaves no progress row,
        # so its exit ends the wait too (it finished before the kill could land), and a stall is an error.
        while done < args.episodes // 2 and first.poll() is None:
            if time.monotonic() > deadline:
                first.kill()
                sys.exit(f"the re-embed made no progress past {done:,} of {args.episodes:,} in 600 s")
            time.sleep(0.02)
            with db.admin() as conn:
                progress = reembed_progress(conn)
            done = progress.done if progress else 0
        killed = first.poll() is None
        if killed:
            os.kill(first.pid, signal.SIGKILL)
        first_out, _ = first.communicate()
        killed_seconds = time.perf_counter() - started
        if not killed and first.returncode != 0:
            sys.exit(f"the re-embed child failed (exit {first.returncode}) before it could be killed")
        with db.admin() as conn:
            progress = reembed_progress(conn)
        if killed:
            written_first = progress.done if progress else 0
            second = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
            written, caught_up, seconds, switch, rss = second.stdout.split()
        else:  # run 1 finished: there is nothing to resume, and its own figures are the run's
            written_first, (written, caught_up, seconds, switch, rss) = 0, first_out.split()
        time.sleep(1.0)  # recalls after the switch, on the new embedder
        stop.set()
        thread.join()
        with db.admin() as conn:
            dims = conn.execute("SELECT vector_dims(embedding) AS d, count(*) AS n FROM episodes GROUP BY 1").fetchall()
    if killed:
        print(
            f"run 1 (killed with SIGKILL at >= half): {written_first:,} vectors in {killed_seconds:.1f}s "
            f"({written_first / killed_seconds:,.0f} episodes/s)"
        )
    else:
        print(
            f"run 1 finished before the kill could land ({int(written):,} vectors in {killed_seconds:.1f}s); "
            "no resume was measured: use more --episodes"
        )
    print(
        f"run {2 if killed else 1} ({'resumed' if killed else 'whole'}): {int(written):,} vectors written + "
        f"{int(caught_up)} caught up at the switch in "
        f"{float(seconds):.1f}s ({int(written) / float(seconds):,.0f} episodes/s); switch {float(switch) * 1000:.0f} ms; "
        f"peak RSS of the re-embed process {rss} MB"
    )
    print(
        f"vectors written in total: {written_first + int(written):,} for {args.episodes:,} episodes "
        f"(redone: {written_first + int(written) - args.episodes}); after: {[(r['d'], r['n']) for r in dims]}"
    )
    print(
        f"recalls during the whole run: {outcome['ok']:,} answered, {outcome['empty']} empty, "
        f"{outcome['failed']} failed" + (f" (first: {errors[0]})" if errors else "")
    )


if __name__ == "__main__":
    main()
