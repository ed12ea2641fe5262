"""Spend you can see and cap: the daily token and session caps hold the queue for the next day in
`run` and in serve's worker, per back end; `run --dry-run` prices the backlog without calling a model.
The model is the real `openai` SDK against tests/support/fake_openai.py.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from click.testing import CliRunner
from psycopg.types.json import Jsonb
from support import fake_openai as fo
from support.episode_responder import OPENAI_MODEL as MODEL
from support.episode_responder import model_like

from jobs.cli import cli
from jobs.db import Database, one
from jobs.extract.openai_chat import OpenAIExtractor
from jobs.lifecycle.resummarize import DEFAULT_OUTPUT_TOKENS, LINE_TOKENS, fixed_prompt_tokens
from jobs.llm import spend
from jobs.llm.spend import CapGauge, DailyCap, day_start, estimate_cost, spend_today
from jobs.summarize import Summarizer, run_summarize
from jobs.summarize.worker import Worker

MESSAGES = [
    {"role": "user", "name": "Maria", "content": "We'll go with the Team plan at $49 per seat."},
    {"role": "assistant", "content": "Done. I'll send the invoice by Friday."},
]


@pytest.fixture
def server() -> Iterator[fo.FakeOpenAI]:
    with fo.FakeOpenAI(model_like) as fake:
        yield fake


def add(db: Database, count: int) -> None:
    with db.tenant("acme") as conn:
        for n in range(count):
            conn.execute(
                "INSERT INTO transcripts (tenant_id, user_id, session_id, purpose, started_at, ended_at, "
                "messages, content_hash) VALUES ('acme', 'u1', %s, 'support', '2025-03-04 09:00Z', "
                "'2025-03-04 09:20Z', %s, %s)",
                (f"s{n}", Jsonb(MESSAGES), f"hash-{n}"),
            )


def statuses(db: Database) -> dict[str, int]:
    with db.admin() as conn:
        return {
            r["status"]: r["n"] for r in conn.execute("SELECT status, count(*) AS n FROM transcripts GROUP BY status")
        }


def a_day_passes(db: Database) -> None:
    """Today's spend becomes yesterday's (what the cap reads is the rows of the current UTC day)."""
    yesterday = day_start() - dt.timedelta(
        hours=1
    )  # a constant: Citus runs no STABLE function on a column in an UPDATE
    with db.admin() as conn:
        conn.execute("UPDATE model_calls SET created_at = %s", (yesterday,))


def capped(db: Database, server: fo.FakeOpenAI, **caps: int) -> Database:
    settings = db.settings.with_(openai_base_url=server.base_url, model=MODEL, max_retries=0, **caps)
    return Database(settings, url=db.url)


def run(db: Database, embedder: Any, concurrency: int = 1) -> Any:
    with OpenAIExtractor(db.settings) as extractor:
        return run_summarize(db, extractor=extractor, embedder=embedder, concurrency=concurrency)


@pytest.mark.citus  # the day's spend is read across shards
def test_the_session_cap_holds_the_rest_until_the_next_day(db: Database, server: fo.FakeOpenAI, embedder: Any) -> None:
    add(db, 5)
    database = capped(db, server, daily_session_cap=2)
    try:
        report = run(database, embedder, concurrency=3)  # three threads may not take a third session between them
        assert report.counts["done"] == 2 and report.held == 3
        assert report.line().endswith(
            "3 sessions held for tomorrow: the daily session cap of openai is reached "
            "(2 sessions of 2 today, EPISODES_DAILY_SESSION_CAP)"
        )
        assert statuses(db) == {"done": 2, "pending": 3}
        with db.admin() as conn:  # held, not tried: no attempt counted, no error
            assert (
                one(
                    conn.execute(
                        "SELECT count(*) AS n FROM transcripts WHERE status = 'pending' AND attempts = 0 "
                        "AND last_error IS NULL"
                    )
                )["n"]
                == 3
            )
        assert run(database, embedder).counts["done"] == 0  # still today: nothing more
        a_day_passes(db)
        assert run(database, embedder).counts["done"] == 2  # the next day's two
        assert statuses(db) == {"done": 4, "pending": 1}
    finally:
        database.close()


def test_the_token_cap_stops_claiming_once_reached(db: Database, server: fo.FakeOpenAI, embedder: Any) -> None:
    add(db, 3)
    database = capped(db, server, daily_token_cap=1)
    try:
        report = run(database, embedder)
        assert report.counts["done"] == 1 and report.held == 2  # the first is taken under the cap, then it is spent
        spent = spend_today(database, "openai")
        assert spent.sessions == 1 and spent.tokens == report.input_tokens + report.output_tokens > 1
        assert "the daily token cap of openai is reached" in (report.held_reason or "")
    finally:
        database.close()


def test_each_back_end_has_its_own_cap(db: Database, server: fo.FakeOpenAI, embedder: Any) -> None:
    add(db, 1)
    with db.admin() as conn:  # a day of Claude spend: not the openai back end's
        conn.execute(
            "INSERT INTO model_calls (tenant_id, template, prompt_hash, model, input_tokens, outcome) "
            "VALUES ('acme', 't', 'h', 'claude-haiku-4-5', 10000000, 'ok')"
        )
    database = capped(db, server, daily_token_cap=1000)
    try:
        assert run(database, embedder).counts["done"] == 1
        assert spend_today(database, "anthropic").tokens == 10_000_000
    finally:
        database.close()


def test_serve_holds_the_queue_and_says_so_once(
    db: Database, server: fo.FakeOpenAI, embedder: Any, caplog: pytest.LogCaptureFixture
) -> None:
    add(db, 2)
    database = capped(db, server, daily_session_cap=1)
    idles = threading.Semaphore(0)
    with OpenAIExtractor(database.settings) as extractor:
        summarizer = Summarizer(database, extractor, embedder=embedder)
        worker = Worker(summarizer, threads=2, idle=idles.release)  # serve's worker: idles instead of ending
        with caplog.at_level(logging.WARNING, logger="jobs.summarize.worker"):
            worker.start()
            for _ in range(6):  # woken six times (the poll, NOTIFY): each time it asks the cap again
                assert idles.acquire(timeout=30)
            worker.stop()
            assert worker.join(30)
        worker.release()
    database.close()
    assert worker.counts["done"] == 1 and statuses(db) == {"done": 1, "pending": 1}
    held = [r for r in caplog.records if getattr(r, "action", None) == "daily_cap_reached"]
    assert len(held) == 1  # once a day, not at every wake-up
    assert held[0].getMessage().startswith("the daily session cap of openai is reached (1 session of 1 today")
    assert "no more sessions are taken until" in held[0].getMessage()


def test_run_says_what_it_held(db: Database, server: fo.FakeOpenAI, monkeypatch: pytest.MonkeyPatch) -> None:
    add(db, 2)
    for name, value in (
        ("OPENAI_BASE_URL", server.base_url),
        ("EPISODES_MODEL", MODEL),
        ("EPISODES_DAILY_SESSION_CAP", "1"),
    ):
        monkeypatch.setenv(name, value)
    result = CliRunner().invoke(cli, ["run", "--extractor", "openai"])
    assert result.exit_code == 0, result.output
    assert "done 1 ·" in result.output and "1 session held for tomorrow" in result.output


@pytest.mark.citus
def test_the_dry_run_prices_the_backlog_and_calls_nothing(
    db: Database, server: fo.FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    add(db, 3)
    chars = sum(len(m["content"]) for m in MESSAGES) * 3
    tokens_in = 3 * fixed_prompt_tokens() + (chars + 3) // 4 + LINE_TOKENS * 6
    tokens_out = 3 * DEFAULT_OUTPUT_TOKENS  # no episode made by a model yet to measure
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    monkeypatch.setenv("EPISODES_MODEL", MODEL)
    local = CliRunner().invoke(cli, ["run", "--dry-run", "--extractor", "openai"])
    assert local.exit_code == 0, local.output
    assert local.output.strip() == (
        f"dry run, nothing claimed: 3 sessions queued for openai:{MODEL} · est. {tokens_in:,} input / "
        f"{tokens_out:,} output tokens · cost unknown: no price for {MODEL} (a local model costs what its machine does)"
    )

    monkeypatch.setenv("EPISODES_MODEL", "claude-haiku-4-5")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")  # the client is built, never called
    monkeypatch.setenv("EPISODES_DAILY_TOKEN_CAP", str(tokens_in + tokens_out))
    with db.admin() as conn:  # a third of the cap already spent today
        conn.execute(
            "INSERT INTO model_calls (tenant_id, template, prompt_hash, model, input_tokens, outcome) "
            "VALUES ('acme', 't', 'h', 'claude-haiku-4-5', %s, 'ok')",
            ((tokens_in + tokens_out) // 3,),
        )
    claude = CliRunner().invoke(cli, ["run", "--dry-run", "--extractor", "anthropic", "--limit", "2"])
    assert claude.exit_code == 0, claude.output
    two_in, two_out = 2 * fixed_prompt_tokens() + (chars * 2 // 3 + 3) // 4 + LINE_TOKENS * 4, 2 * DEFAULT_OUTPUT_TOKENS
    cost = estimate_cost("claude-haiku-4-5", two_in, two_out)
    assert cost is not None and cost > 0
    assert claude.output.strip() == (
        f"dry run, nothing claimed: 2 sessions queued for claude-haiku-4-5 · est. {two_in:,} input / {two_out:,} "
        f"output tokens · est. cost ${cost:,.4f} at claude-haiku-4-5's list price · daily cap: "
        f"{(tokens_in + tokens_out) // 3:,} of {tokens_in + tokens_out:,} tokens spent today; about 2 fit today, "
        "0 would wait for tomorrow"
    )
    assert server.calls() == [] and statuses(db) == {"pending": 3}  # no model called, nothing claimed


def test_status_shows_the_days_spend_and_the_cap(
    db: Database, server: fo.FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    add(db, 2)
    for name, value in (
        ("OPENAI_BASE_URL", server.base_url),
        ("EPISODES_MODEL", MODEL),
        ("EPISODES_DAILY_SESSION_CAP", "1"),
    ):
        monkeypatch.setenv(name, value)
    assert CliRunner().invoke(cli, ["run"]).exit_code == 0  # auto: openai, from OPENAI_BASE_URL
    spent = spend_today(db, "openai")
    status = CliRunner().invoke(cli, ["status"])
    assert status.exit_code == 0, status.output
    (today,) = [line for line in status.output.splitlines() if line.startswith("today")]
    assert today == (
        f"today        openai spent {spent.tokens:,} tokens on 1 session, est. $0.0000 · daily cap "
        "1 session: reached, the queue is held until 00:00 UTC"
    )


def test_the_gauge_reads_the_days_spend_rarely_far_from_the_cap_and_at_each_claim_near_it(db: Database) -> None:
    add(db, 1)
    with db.admin() as conn:  # one session of 1,000 tokens today
        conn.execute(
            "INSERT INTO model_calls (tenant_id, transcript_id, template, prompt_hash, model, input_tokens, "
            "outcome) SELECT 'acme', id, 't', 'h', 'openai:m', 1000, 'ok' FROM transcripts"
        )
    far = CapGauge(DailyCap("openai", tokens=1_000_000, sessions=1_000), db)
    assert all(far.check(in_flight=0) is None for _ in range(50))
    assert far.reads == 1  # 50 sessions projected at 2,000 tokens each: far from both caps
    near = CapGauge(DailyCap("openai", tokens=3_000), db)
    assert [near.check(in_flight=0) is None for _ in range(5)] == [True] * 5
    assert near.reads == 5  # within twice a session's tokens of the cap: read before every claim
    sessions = CapGauge(DailyCap("openai", sessions=3), db)
    # The worker passes the sessions it holds; the two started here are still in progress.
    assert [sessions.check(in_flight=n) for n in (0, 1)] == [None, None]
    assert "(3 sessions of 3 today" in (sessions.check(in_flight=2) or "")  # 1 recorded + 2 in progress


def slow_model(delay: float) -> Any:
    """model_like answering after ``delay`` seconds: the workers' calls overlap."""

    def respond(*args: Any, **kwargs: Any) -> Any:
        time.sleep(delay)
        return model_like(*args, **kwargs)

    return respond


def in_progress_elsewhere(db: Database, transcript_id: int) -> None:
    """``transcript_id`` claimed by another process: running, its lease good for ten minutes."""
    with db.admin() as conn:
        conn.execute(
            "UPDATE transcripts SET status = 'running', lease_owner = 'another-process', "
            "lease_until = now() + interval '10 minutes' WHERE id = %s",
            (transcript_id,),
        )


def recorded_and_done(db: Database, transcript_id: int, input_tokens: int, output_tokens: int) -> None:
    """The other process's session ends: its model call recorded (openai) and the session done, in one transaction."""
    with db.admin() as conn:
        conn.execute(
            "INSERT INTO model_calls (tenant_id, user_id, transcript_id, template, prompt_hash, model, "
            "input_tokens, output_tokens, outcome) VALUES ('acme', 'u1', %s, 't', 'h', 'openai:m', %s, %s, 'ok')",
            (transcript_id, input_tokens, output_tokens),
        )
        conn.execute("UPDATE transcripts SET status = 'done', lease_owner = NULL WHERE id = %s", (transcript_id,))


@pytest.mark.citus  # the sessions in progress are read across shards
def test_the_token_cap_holds_within_one_session_when_nothing_is_spent_yet(db: Database, embedder: Any) -> None:
    """With nothing recorded today every claim read 0 tokens spent, and the first wave of concurrent workers all
    started (issue 46 #7: a cap of 1,000 tokens followed by 1,604,000 spent). Now a claimed session waits while
    others are in progress that would reach the cap: four workers, six sessions, a cap below one session's
    tokens: one session is summarised, the other five are held, no attempt counted."""
    add(db, 6)
    with fo.FakeOpenAI(slow_model(0.5)) as server:
        database = capped(db, server, daily_token_cap=1_000)
        try:
            report = run(database, embedder, concurrency=4)
            one_session = report.input_tokens + report.output_tokens
            spent = spend_today(database, "openai")
            assert (report.counts["done"], spent.sessions, report.held) == (1, 1, 5)
            assert spent.tokens == one_session > 1_000  # over the cap by that one session, no more
            assert "the daily token cap of openai is reached" in (report.held_reason or "")
            # (spent.sessions counts the sessions the recorded calls were made for: one. The back end may make more
            # than one call for it, e.g. when an answer is re-asked, so the stand-in's call count is not the measure.)
        finally:
            database.close()
    assert statuses(db) == {"done": 1, "pending": 5}
    with db.admin() as conn:  # held, not tried
        assert one(conn.execute("SELECT max(attempts) AS n FROM transcripts WHERE status = 'pending'"))["n"] == 0


def test_sessions_in_progress_wait_for_room_and_go_on_when_it_is_left(db: Database, embedder: Any) -> None:
    """A cap with room for about three sessions: workers that would pass it with those in progress wait for them
    and then take what fits; the spend ends within one session of the cap."""
    add(db, 8)
    with fo.FakeOpenAI(slow_model(0.3)) as server:
        probe = capped(db, server)
        try:
            with OpenAIExtractor(probe.settings) as extractor:  # one session, to learn its tokens
                first = run_summarize(probe, extractor=extractor, embedder=embedder, limit=1)
        finally:
            probe.close()
        per_session = first.input_tokens + first.output_tokens
        a_day_passes(db)
        cap = per_session * 3 + per_session // 2
        database = capped(db, server, daily_token_cap=cap)
        try:
            report = run(database, embedder, concurrency=4)
            spent = spend_today(database, "openai")
        finally:
            database.close()
    assert report.counts["done"] >= 3, report.line()
    assert spent.tokens < cap + per_session + per_session // 2
    assert spent.sessions == report.counts["done"] and report.held == 7 - report.counts["done"]


def test_a_session_that_ends_between_the_two_reads_is_counted(db: Database, monkeypatch: pytest.MonkeyPatch) -> None:
    """The check before a claimed session's first call reads the sessions in progress and today's spend. A session
    that is recorded between those two reads must count in one of them (a CI run saw it count in neither, and a
    cap of 4,357 tokens end at 6,278). Here the other session ends right after the first read, whichever it is."""
    add(db, 2)
    with db.admin() as conn:
        ids = [r["id"] for r in conn.execute("SELECT id FROM transcripts ORDER BY session_id")]
    in_progress_elsewhere(db, ids[1])

    reads: list[str] = []

    def then_end(name: str, read: Any) -> Any:
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            value = read(*args, **kwargs)
            reads.append(name)
            if len(reads) == 1:  # the other session ends right after the first read
                recorded_and_done(db, ids[1], 3000, 500)
            return value

        return wrapped

    monkeypatch.setattr(spend, "in_flight", then_end("in progress", spend.in_flight))
    monkeypatch.setattr(spend, "spend_today", then_end("spent", spend.spend_today))
    spent, others = spend.spend_and_in_flight(db, "openai", "acme", ids[0])
    assert sorted(reads) == ["in progress", "spent"]
    assert others.sessions + spent.sessions >= 1, (reads, spent, others)
    assert spent.tokens + others.tokens >= 3_500
    cap = DailyCap("openai", tokens=5_000)
    # 3,500 tokens spent and the same session still counted in progress (2,000 tokens or more): over 5,000
    assert (cap.reached(spent) or cap.crowded(spent, others)) is not None


def test_the_session_cap_counts_what_other_processes_have_in_progress(
    db: Database, server: fo.FakeOpenAI, embedder: Any
) -> None:
    """A session cap of 1 and another process summarising a session now: this process's worker does not start a
    second one beside it (each process counted only its own claims, so two processes could pass the cap), waits,
    and holds the queue once the other session is recorded."""
    add(db, 3)
    with db.admin() as conn:
        other = one(conn.execute("SELECT min(id) AS id FROM transcripts"))["id"]
    in_progress_elsewhere(db, other)

    def the_other_process_finishes() -> None:
        time.sleep(2.0)  # past the first check and a wait or two
        recorded_and_done(db, other, 900, 300)

    finisher = threading.Thread(target=the_other_process_finishes)
    database = capped(db, server, daily_session_cap=1)
    try:
        finisher.start()
        report = run(database, embedder, concurrency=2)
        spent = spend_today(database, "openai")
    finally:
        finisher.join()
        database.close()
    assert (report.counts["done"], report.held, spent.sessions) == (0, 2, 1), report.line()
    assert "the daily session cap of openai is reached (1 session of 1 today" in (report.held_reason or "")
    assert statuses(db) == {"done": 1, "pending": 2}
