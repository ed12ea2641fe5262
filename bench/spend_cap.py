"""The daily cap's check: what it costs to read a back end's spend for the day before each claim.

With a cap set (EPISODES_DAILY_TOKEN_CAP / EPISODES_DAILY_SESSION_CAP), `run` and `serve` read the
back end's spend since 00:00 UTC (jobs.llm.spend.spend_today, query backend_spend_since) before every
claim. Builds, in an embedded scratch PostgreSQL, a day of model calls (two per session, over ten
tenants, half by the openai back end and half by anthropic) and as many from the day before, then
times the read, and the worker's check (jobs.llm.spend.CapGauge) far from the cap and near it.

    python bench/spend_cap.py [--sessions 50000] [--checks 50] [--claims 10000]
"""

from __future__ import annotations

import argparse
import datetime as dt
import time

from _common import median, percentile, scratch_database

from jobs.llm.spend import CapGauge, DailyCap, day_start, spend_today

BUILD = """
INSERT INTO transcripts (tenant_id, user_id, session_id, purpose, ended_at, messages, content_hash, status)
SELECT 't' || (g %% 10), 'u' || (g %% 1000), 's' || g, 'support', now(), '[{"role": "user", "content": "hi"}]',
       md5(g::text), 'done'
FROM generate_series(1, %(n)s) g;
INSERT INTO model_calls (tenant_id, user_id, transcript_id, template, prompt_hash, model, input_tokens, output_tokens,
                         outcome, created_at)
SELECT t.tenant_id, t.user_id, t.id, 'extract_episode_user.j2', 'h',
       CASE WHEN t.id %% 2 = 0 THEN 'openai:qwen2.5:7b' ELSE 'claude-haiku-4-5' END, 3000, 400, 'ok',
       CASE WHEN day = 0 THEN %(today)s ELSE %(yesterday)s END
FROM transcripts t, generate_series(0, 1) day, generate_series(1, 2) call;
ANALYZE model_calls;
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=50_000, help="sessions (two calls each) per day")
    parser.add_argument("--checks", type=int, default=50, help="reads of the day's spend timed")
    parser.add_argument("--claims", type=int, default=10_000, help="claims checked far from the cap")
    args = parser.parse_args()
    with scratch_database() as db:
        start = day_start()
        with db.admin() as conn:
            params = {
                "n": args.sessions,
                "today": start + dt.timedelta(minutes=1),
                "yesterday": start - dt.timedelta(hours=12),
            }
            for statement in BUILD.split(";")[:-1]:
                conn.execute(statement, params if "%(" in statement else None)
        times = []
        for _ in range(args.checks):
            began = time.perf_counter()
            spent = spend_today(db, "openai")
            times.append((time.perf_counter() - began) * 1000)
        print(
            f"a day of {args.sessions * 2:,} model calls over {args.sessions:,} sessions (and as many the day before)"
        )
        print(f"openai's spend today: {spent.tokens:,} tokens, {spent.sessions:,} sessions")
        print(
            f"reading the day's spend (spend_today): median {median(times):.1f} ms, p95 "
            f"{percentile(times, 0.95):.1f} ms over {args.checks} reads"
        )
        far = CapGauge(DailyCap("openai", tokens=spent.tokens * 10, sessions=spent.sessions * 10), db)
        began = time.perf_counter()
        for _ in range(args.claims):
            far.check(in_flight=0)
        took = (time.perf_counter() - began) * 1000
        print(
            f"the worker's check far from the cap (CapGauge): {args.claims:,} claims in {took:.1f} ms, "
            f"{far.reads} reads of the day's spend"
        )
        near = CapGauge(DailyCap("openai", tokens=spent.tokens + 1), db)
        began = time.perf_counter()
        for _ in range(args.checks):
            near.check(in_flight=0)
        took = (time.perf_counter() - began) * 1000
        print(f"... and near it: {args.checks} claims in {took:.1f} ms, {near.reads} reads (one per claim)")


if __name__ == "__main__":
    main()
