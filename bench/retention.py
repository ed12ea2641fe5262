"""Transcript retention on 100,000 summarised transcripts: bytes reclaimed, episodes untouched.

Builds the table in SQL (generate_series; one episode with an event per transcript, in an embedded
scratch PostgreSQL), runs `prune_transcripts` in its batches, and prints the message bytes removed,
the size of `transcripts` (with TOAST and indexes) before, after the prune, after VACUUM and after
VACUUM FULL, and whether any episode or event changed.

    python bench/retention.py [--transcripts 100000] [--messages 12] [--batch 500]
"""

from __future__ import annotations

import argparse
import time

from _common import scratch_database

from jobs.lifecycle import prune_transcripts

BUILD = """
INSERT INTO transcripts (tenant_id, user_id, session_id, purpose, started_at, ended_at, messages, content_hash, status)
SELECT 't' || (g % 10), 'u' || (g % 1000), 's' || g, 'support',
       now() - interval '500 days' + g * interval '1 minute', now() - interval '500 days' + g * interval '1 minute',
       (SELECT jsonb_agg(jsonb_build_object('role', CASE WHEN m % 2 = 0 THEN 'user' ELSE 'assistant' END,
                                            'content', 'Message ' || m || ' of session ' || g || ': '
                                                || (SELECT string_agg(md5((g * 1000 + m * 10 + w)::text), ' ')
                                                    FROM generate_series(1, 8) w)))
        FROM generate_series(0, %(messages)s - 1) m),
       md5(g::text), 'done'
FROM generate_series(1, %(n)s) g;
INSERT INTO episodes (tenant_id, user_id, kind, transcript_id, session_id, summary, importance, started_at,
                      ended_at, model, prompt_version, content_hash)
SELECT tenant_id, user_id, 'session', id, session_id, 'Summary of ' || session_id, 0.5, started_at, ended_at,
       'offline', 'offline-2', content_hash
FROM transcripts;
INSERT INTO episode_events (tenant_id, user_id, episode_id, ordinal, type, what, occurred_at, evidence, evidence_quote)
SELECT tenant_id, user_id, id, 0, 'decision', 'Decided in ' || session_id, ended_at, '{0}', 'Message 0 of ' || session_id
FROM episodes;
"""
SIZE = "SELECT pg_total_relation_size('transcripts') AS total"
FINGERPRINT = """SELECT count(*) AS n, md5(string_agg(e.id || e.summary || e.changed_version::text || ev.what
                                                     || ev.evidence_quote, ',' ORDER BY e.id)) AS digest
                 FROM episodes e JOIN episode_events ev ON ev.episode_id = e.id"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--transcripts", type=int, default=100_000)
    parser.add_argument("--messages", type=int, default=12)
    parser.add_argument("--batch", type=int, default=500)
    args = parser.parse_args()
    with scratch_database() as db:
        started = time.perf_counter()
        with db.admin() as conn:
            conn.execute(BUILD.replace("%(messages)s", str(args.messages)).replace("%(n)s", str(args.transcripts)))
        with db.connect(autocommit=True) as conn:
            conn.execute("VACUUM ANALYZE transcripts")
            size_before = conn.execute(SIZE).fetchone()["total"]
            episodes_before = conn.execute(FINGERPRINT).fetchone()
        print(
            f"built {args.transcripts:,} transcripts x {args.messages} messages with an episode and an event "
            f"each in {time.perf_counter() - started:.1f}s"
        )
        started = time.perf_counter()
        report = prune_transcripts(db, 365 * 86400.0, batch_size=args.batch)
        seconds = time.perf_counter() - started
        with db.connect(autocommit=True) as conn:
            size_pruned = conn.execute(SIZE).fetchone()["total"]
            conn.execute("VACUUM transcripts")
            size_vacuum = conn.execute(SIZE).fetchone()["total"]
            conn.execute("VACUUM FULL transcripts")
            size_full = conn.execute(SIZE).fetchone()["total"]
            episodes_after = conn.execute(FINGERPRINT).fetchone()
    mb = 1e6
    print(
        f"prune: {report.transcripts:,} transcripts in {seconds:.1f}s ({report.transcripts / seconds:,.0f}/s, "
        f"batches of {args.batch})"
    )
    print(
        f"message bytes (pg_column_size): {report.bytes_before / mb:,.1f} MB -> {report.bytes_after / mb:,.1f} MB, "
        f"reclaimed {report.reclaimed / mb:,.1f} MB"
    )
    print(
        f"transcripts table with TOAST and indexes: before {size_before / mb:,.1f} MB · after prune "
        f"{size_pruned / mb:,.1f} MB · after VACUUM {size_vacuum / mb:,.1f} MB · after VACUUM FULL "
        f"{size_full / mb:,.1f} MB"
    )
    touched = episodes_before["digest"] != episodes_after["digest"] or episodes_before["n"] != episodes_after["n"]
    print(f"episodes with events: {episodes_after['n']:,} · touched: {0 if not touched else 'SOME'}")


if __name__ == "__main__":
    main()
