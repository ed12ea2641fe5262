"""A row INSERTed by hand into `transcripts` (issue 35, item 9): every message shape that ingest accepts
is accepted from an INSERT too, through the same normaliser at claim time; anything else is
dead-lettered with a one-line reason naming where it is wrong, and the rest of the batch is summarised.
The INSERT that docs/transcripts.md shows is run here as it is written."""

from __future__ import annotations

import logging
import re
import threading
from pathlib import Path
from typing import Any

import pytest
from psycopg.types.json import Jsonb
from support.waiting import wait_until

from jobs import logs
from jobs.db import Database
from jobs.embeddings import Embedder
from jobs.extract.offline import OfflineExtractor
from jobs.serve import ServeOptions, Server
from jobs.summarize import run_summarize

# Python logic through the database: runs on one PostgreSQL only; the tests marked citus below are SQL shape.

ROOT = Path(__file__).resolve().parents[1]

ANTHROPIC = [
    {"role": "user", "content": [{"type": "text", "text": "Can we move the renewal call to Monday at 10:00?"}]},
    {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Checking the calendar."},
            {"type": "tool_use", "id": "toolu_1", "name": "calendar", "input": {"day": "Monday"}},
        ],
    },
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "free at 10:00"}]},
    {"role": "assistant", "content": [{"type": "text", "text": "Done: the renewal call is on Monday at 10:00."}]},
]
OPENAI = [
    {"role": "developer", "content": "You are the support bot."},
    {"role": "user", "content": "What is the weather in Oslo for the offsite?"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'}}
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": '{"temp_c": 4}'},
    {"role": "assistant", "content": "It is 4 degrees in Oslo: we decided to hold the offsite indoors."},
]
PLAIN = [
    {"role": "user", "content": "We'll go with the Team plan at $49 per seat."},
    {"role": "assistant", "content": "Done. I'll send the invoice by Friday."},
]


def insert(db: Database, session: str, messages: Any, tenant: str = "acme") -> None:
    """A host's own INSERT: no content_hash given (the database computes it), no NOTIFY sent."""
    with db.tenant(tenant) as conn:
        conn.execute(
            "INSERT INTO transcripts (tenant_id, user_id, session_id, ended_at, messages) "
            "VALUES (%s, 'u-maria', %s, now(), %s)",
            (tenant, session, Jsonb(messages)),
        )


def rows(db: Database) -> dict[str, dict[str, Any]]:
    with db.admin() as conn:
        return {
            r["session_id"]: r
            for r in conn.execute(
                "SELECT session_id, status, attempts, last_error, lease_owner, content_hash FROM transcripts"
            )
        }


def summaries(db: Database) -> dict[str, str]:
    with db.admin() as conn:
        return {
            r["session_id"]: r["summary"]
            for r in conn.execute("SELECT session_id, summary FROM episodes WHERE status = 'current'")
        }


@pytest.mark.citus  # rows a host INSERTs, claimed and dead-lettered
def test_hand_inserted_rows_of_every_shape_are_summarised_and_garbage_is_dead_lettered(
    db: Database, embedder: Embedder
) -> None:
    insert(db, "anthropic", ANTHROPIC)
    insert(db, "openai", OPENAI)
    insert(db, "plain", PLAIN)
    insert(db, "not-a-message", ["x"])
    insert(db, "no-role", [{"foo": 1}])
    insert(db, "bad-time", [{"role": "user", "content": "hello", "ts": "last tuesday"}])
    report = run_summarize(db, extractor=OfflineExtractor(embedder), embedder=embedder)  # never raises
    assert report.counts == {"done": 3, "dead": 3}
    found = rows(db)
    assert {s: r["status"] for s, r in found.items()} == {
        "anthropic": "done",
        "openai": "done",
        "plain": "done",
        "not-a-message": "dead",
        "no-role": "dead",
        "bad-time": "dead",
    }
    assert all(re.fullmatch(r"[0-9a-f]{64}", r["content_hash"]) for r in found.values())  # computed for the host
    # One line each, saying where the row is wrong and what was expected.
    assert found["not-a-message"]["last_error"].startswith("messages.0: expected a message object")
    assert found["no-role"]["last_error"].startswith("messages.0.role:")
    assert found["bad-time"]["last_error"].startswith("messages.0.ts:")
    for session in ("not-a-message", "no-role", "bad-time"):
        error = found[session]["last_error"]
        assert "\n" not in error and "validation error" not in error.lower() and len(error) < 300, error
        assert found[session]["attempts"] == 1 and found[session]["lease_owner"] is None
    summary = summaries(db)
    assert "Monday" in summary["anthropic"] and "type" not in summary["anthropic"]  # the text, not the blocks
    assert "Oslo" in summary["openai"]


def test_serve_dead_letters_a_garbage_row_without_a_traceback(
    db: Database, embedder: Embedder, capsys: pytest.CaptureFixture[str]
) -> None:
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    logs.setup("text", "INFO")  # as the CLI does
    srv = Server(
        db,
        OfflineExtractor(embedder),
        ServeOptions(concurrency=2, poll_seconds=0.2, maintenance_seconds=60, shutdown_deadline=5),
    )
    thread = threading.Thread(target=srv.run, kwargs={"install_signals": False})
    thread.start()
    try:
        insert(db, "garbage", [{"foo": 1}])
        insert(db, "anthropic", ANTHROPIC)
        wait_until(
            lambda: {s: r["status"] for s, r in rows(db).items()} == {"garbage": "dead", "anthropic": "done"},
            60,
            "the garbage row dead-lettered and the good one summarised",
        )
    finally:
        srv.stop()
        thread.join(timeout=30)
        root.handlers[:], level = saved
        root.setLevel(level)
    err = capsys.readouterr().err
    assert "Traceback" not in err, err
    assert thread.is_alive() is False
    assert dict(srv.counts) == {"dead": 1, "done": 1}
    (line,) = [line for line in err.splitlines() if "messages.0.role" in line]
    assert "garbage" in line  # the session it is about


def _documented_insert() -> str:
    """The SQL block of docs/transcripts.md's section on inserting by hand, as a reader would copy it."""
    page = (ROOT / "docs" / "transcripts.md").read_text(encoding="utf-8")
    section = page.split("## Inserting rows by hand", 1)[1].split("\n## ", 1)[0]
    (block,) = re.findall(r"```sql\n(.*?)```", section, flags=re.S)
    return str(block)


@pytest.mark.citus  # the documented INSERT into the distributed table
def test_the_documented_insert_works_as_written(db: Database, embedder: Embedder) -> None:
    with db.admin() as conn:
        conn.execute(_documented_insert())
    report = run_summarize(db, extractor=OfflineExtractor(embedder), embedder=embedder)
    assert report.counts == {"done": 1}
    (summary,) = summaries(db).values()
    assert "Monday" in summary


def test_a_batch_backfill_dead_letters_a_garbage_row_and_submits_the_rest(db: Database, embedder: Embedder) -> None:
    from support import fake_anthropic as fa
    from support.episode_responder import responder

    from jobs.extract.claude import AnthropicExtractor
    from jobs.summarize import BatchRunner

    insert(db, "garbage", [{"foo": 1}])
    insert(db, "anthropic", ANTHROPIC)
    with fa.FakeAnthropic(responder=responder) as fake:
        settings = db.settings.with_(
            anthropic_api_key="test-key", anthropic_base_url=fake.base_url, max_retries=0, extractor="anthropic"
        )
        database = Database(settings, url=db.url)
        try:
            with AnthropicExtractor(settings) as claude:
                report = BatchRunner(database, claude, embedder).submit()
        finally:
            database.close()
    assert len(report.submitted) == 1 and report.counts["claimed"] == 1 and report.counts["dead"] == 1
    assert "dead 1 (messages unreadable)" in report.line()
    found = rows(db)
    assert found["garbage"]["status"] == "dead" and found["garbage"]["last_error"].startswith("messages.0.role:")
    assert found["anthropic"]["lease_owner"].startswith("batch:")


def test_an_open_row_with_an_unreadable_time_does_not_stop_idle_close(db: Database, embedder: Embedder) -> None:
    """Maintenance closes idle sessions by their last message's ts: a hand-inserted open row whose ts is not a
    time made that statement fail every 30 s, for every tenant. Its time is now taken as unknown (the row's
    updated_at counts), and the row is dead-lettered with its reason once it is claimed."""
    with db.tenant("acme") as conn:
        conn.execute(
            "INSERT INTO transcripts (tenant_id, user_id, session_id, messages) VALUES "
            "('acme', 'u-maria', 'bad-ts', %s), ('acme', 'u-maria', 'idle', %s)",
            (Jsonb([{"role": "user", "content": "hello", "ts": "last tuesday"}]), Jsonb(PLAIN)),
        )
    with db.admin() as conn:
        conn.execute("UPDATE transcripts SET updated_at = now() - interval '2 hours'")
    srv = Server(db, OfflineExtractor(embedder), ServeOptions(idle_close_seconds=3600))
    assert srv.maintenance() == {"rescued": 0, "idle_closed": 2, "pruned_runs": 0}
    report = run_summarize(db, extractor=OfflineExtractor(embedder), embedder=embedder)
    assert report.counts == {"done": 1, "dead": 1}
    assert rows(db)["bad-ts"]["last_error"].startswith("messages.0.ts:")
