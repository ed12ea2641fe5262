"""`episodes run`'s exit status (issue 46 #14): a session that failed in the run on the model's answer
(an unreadable body, an answer that never validates) makes the run exit 1 with a one-line reason, even
when other sessions were summarised; a run where nothing failed exits 0."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from support import fake_anthropic as fa
from support.episode_responder import responder
from support.summarize_steps import add

from jobs.db import Database, one


def run_command(db: Database, fake: fa.FakeAnthropic) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("EPISODES_", "ANTHROPIC_"))}
    env.update(
        DATABASE_URL=db.url,
        ANTHROPIC_API_KEY="test-key",
        ANTHROPIC_BASE_URL=fake.base_url,
        EPISODES_HOME=os.environ["EPISODES_HOME"],
        HF_HUB_OFFLINE="1",
    )
    worker = str(Path(__file__).parent / "support" / "crash_worker.py")  # `episodes run` with no SDK retries
    return subprocess.run(
        [sys.executable, worker, "-", "run", "--extractor", "anthropic", "--concurrency", "1"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.slow
def test_a_session_failed_on_the_models_answer_makes_the_run_exit_1_with_its_reason(
    db: Database, fake: fa.FakeAnthropic
) -> None:
    add(db, "s1")
    add(db, "s2")
    answers = itertools.count()

    def first_unreadable(body: dict[str, Any]) -> fa.Step | dict[str, Any]:  # a proxy's page for the first call
        return fa.raw(200, b"<html><body>Proxy login</body></html>") if next(answers) < 1 else responder(body)

    fake.responder = first_unreadable
    result = run_command(db, fake)
    assert result.returncode == 1, (result.stdout, result.stderr)
    assert "done 1" in result.stdout, result.stdout  # the counts are still printed
    lines = [line for line in result.stderr.splitlines() if line.startswith("episodes: ")]
    assert len(lines) == 1 and "1 session failed on the model's answer or call" in lines[0], result.stderr
    assert "Traceback" not in result.stderr
    with db.admin() as conn:
        failed = one(conn.execute("SELECT count(*) AS n FROM model_calls WHERE outcome <> 'ok'"))["n"]
    assert failed >= 1


@pytest.mark.slow
def test_a_run_where_nothing_failed_exits_0(db: Database, fake: fa.FakeAnthropic) -> None:
    add(db, "s1")
    fake.responder = responder
    result = run_command(db, fake)
    assert result.returncode == 0, (result.stdout, result.stderr)
    assert "done 1" in result.stdout
