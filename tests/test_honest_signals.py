"""Honest signals of the summarize job (issue 35, item 12): `episodes run` exits non-zero when every
model call failed, and `episodes status` counts the oldest pending session's wait from when it was
handed over, not from when the session ended."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from psycopg.types.json import Jsonb
from support import fake_anthropic as fa
from support.episode_responder import responder

from jobs.cli.status_view import render_status
from jobs.db import Database, one

MESSAGES = [
    {"role": "user", "content": "We'll go with the Team plan at $49 per seat."},
    {"role": "assistant", "content": "Done. I'll send the invoice by Friday."},
]


def add(db: Database, session: str, ended_at: str = "now()") -> None:
    with db.tenant("acme") as conn:
        conn.execute(
            "INSERT INTO transcripts (tenant_id, user_id, session_id, ended_at, messages, content_hash) "
            f"VALUES ('acme', 'u1', %s, {ended_at}, %s, %s)",
            (session, Jsonb(MESSAGES), f"h-{session}"),
        )


def run_command(db: Database, fake: fa.FakeAnthropic) -> subprocess.CompletedProcess[str]:
    """`episodes run` against the fake model service, with no SDK retries (tests/support/crash_worker.py)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("EPISODES_", "ANTHROPIC_"))}
    env.update(
        DATABASE_URL=db.url,
        ANTHROPIC_API_KEY="test-key",
        ANTHROPIC_BASE_URL=fake.base_url,
        EPISODES_HOME=os.environ["EPISODES_HOME"],
        HF_HUB_OFFLINE="1",
    )
    return subprocess.run(
        [
            sys.executable,
            str(Path(__file__).parent / "support" / "crash_worker.py"),
            "-",
            "run",
            "--extractor",
            "anthropic",
            "--concurrency",
            "1",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.slow
def test_run_exits_1_saying_so_when_every_model_call_failed(db: Database, fake: fa.FakeAnthropic) -> None:
    add(db, "s1")
    add(db, "s2")
    fake.responder = lambda body: fa.server_error()  # the model service answers 500, always
    result = run_command(db, fake)
    assert result.returncode == 1, (result.stdout, result.stderr)
    assert "failed 2 (will retry)" in result.stdout  # the counts are still printed
    (line,) = [line for line in result.stderr.splitlines() if line.startswith("episodes: ")]
    assert "every model call of this run failed (2 of 2" in line and "ANTHROPIC_API_KEY" in line, line
    with db.admin() as conn:
        run = one(conn.execute("SELECT status, error FROM job_runs WHERE job = 'summarize'"))
        states = {r["status"] for r in conn.execute("SELECT status FROM transcripts")}
    assert run["status"] == "failed" and run["error"].startswith("every model call of this run failed"), run
    assert states == {"pending"}  # still queued for the next run

    with db.admin() as conn:  # skip the backoff
        conn.execute("UPDATE transcripts SET next_attempt_at = now()")
    fake.responder = responder  # one call fails, the next succeeds
    fake.enqueue(fa.server_error())
    again = run_command(db, fake)
    # A session failed on the model's call: exit 1 with one line saying so (issue 46 #14), not "every call".
    assert again.returncode == 1, (again.stdout, again.stderr)
    assert "done 1 · failed 1" in again.stdout
    (line,) = [line for line in again.stderr.splitlines() if line.startswith("episodes: ")]
    assert line.startswith("episodes: 1 session failed on the model's answer or call in this run"), line


def test_oldest_pending_counts_from_when_the_session_was_handed_over(db: Database) -> None:
    add(db, "imported", ended_at="'2023-05-01 10:00Z'")  # an old session, handed over just now
    with db.admin() as conn:
        conn.execute("UPDATE transcripts SET updated_at = now() - interval '3 hours'")
    add(db, "closed-later", ended_at="NULL")  # inserted open, then closed by the host an hour ago
    with db.admin() as conn:
        conn.execute(
            "UPDATE transcripts SET updated_at = now() - interval '5 hours', "
            "ended_at = now() - interval '1 hour' WHERE session_id = 'closed-later'"
        )
    (line,) = [line for line in render_status(db).splitlines() if line.startswith("queue")]
    assert "oldest pending 3.0h" in line, line  # not 3 years (from ended_at) nor 5 hours (from the open row)
