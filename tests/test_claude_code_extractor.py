"""The claude-code extractor through the REAL Claude Code CLI against a local stand-in for the
Anthropic API (tests/support/stream_anthropic.py), under a scratch HOME: what it asks the model, what it
stores, each failure's one-line reason and state, and what our runs may not do (leave a session
file, run the user's hooks, MCP servers or CLAUDE.md). Skipped, saying why, without the CLI.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from psycopg.types.json import Jsonb
from support.stream_anthropic import Answer, Fault, StreamAnthropic, ToolUse

from jobs.cli import cli
from jobs.db import Database
from jobs.extract.claude_code import ClaudeCodeExtractor
from jobs.summarize import run_summarize

ROOT = Path(__file__).resolve().parent.parent


def _find_claude() -> str | None:
    for candidate in (
        os.environ.get("EPISODES_CLAUDE_BIN"),
        shutil.which("claude"),
        str(ROOT / "node_modules" / ".bin" / "claude"),
    ):
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return candidate
    return None


CLAUDE = _find_claude()
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        CLAUDE is None, reason="the Claude Code CLI is not installed: put `claude` on PATH or set EPISODES_CLAUDE_BIN"
    ),
]

EPISODE = {
    "summary": "Maria chose the Team plan at $49 per seat; the agent will send the invoice by Friday.",
    "topic_tags": ["billing"],
    "importance": 0.7,
    "key_events": [
        {"type": "decision", "what": "Team plan at $49 per seat", "who": "Maria", "evidence": [0]},
        {"type": "commitment", "what": "Refund sent today", "who": "agent", "evidence": [7]},
    ],
    "entities": [{"name": "Maria", "kind": "person"}],
}


class Script:
    """What the stand-in answers: queued answers first, then ``otherwise``; every request kept."""

    def __init__(self, *answers: Answer, otherwise: Answer | Callable[[], Answer] = ToolUse(EPISODE)) -> None:  # noqa: B008 - a frozen answer
        self.queue = list(answers)
        self.otherwise = otherwise

    def __call__(self, body: dict[str, Any]) -> Answer:
        if self.queue:
            return self.queue.pop(0)
        return self.otherwise() if callable(self.otherwise) else self.otherwise


@pytest.fixture
def stand_in() -> Iterator[StreamAnthropic]:
    with StreamAnthropic(reply=Script()) as server:
        yield server


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stand_in: StreamAnthropic) -> Path:
    """A scratch HOME the CLI runs under, pointed at the stand-in with a dummy key."""
    home = tmp_path / "cc-home"
    (home / ".claude").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", stand_in.base_url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "dummy-key")
    monkeypatch.setenv("PATH", f"{Path(CLAUDE or 'claude').parent}{os.pathsep}{os.environ.get('PATH', '')}")
    return home


@pytest.fixture
def cc_db(db: Database, home: Path) -> Iterator[Database]:
    """The test database, summarising with claude-code; no retries inside the CLI, two attempts."""
    database = Database(db.settings.with_(extractor="claude-code", max_retries=0, max_attempts=2), url=db.url)
    yield database
    database.close()


def add(db: Database, session: str = "s1") -> None:
    messages = [
        {"role": "user", "name": "Maria", "content": "We'll go with the Team plan at $49 per seat."},
        {"role": "assistant", "content": "Done. I'll send the invoice by Friday."},
    ]
    with db.tenant("acme") as conn:
        conn.execute(
            "INSERT INTO transcripts (tenant_id, user_id, session_id, purpose, started_at, ended_at, messages, "
            "content_hash) VALUES ('acme', 'u1', %s, 'support', '2025-03-04 09:00Z', '2025-03-04 09:20Z', %s, "
            "%s)",
            (session, Jsonb(messages), f"hash-{session}"),
        )


def run(db: Database, embedder: Any) -> dict[str, int]:
    with ClaudeCodeExtractor(db.settings) as extractor:
        return dict(run_summarize(db, extractor=extractor, embedder=embedder).counts)


def rows(db: Database, sql: str) -> list[dict[str, Any]]:
    with db.admin() as conn:
        return list(conn.execute(sql).fetchall())


def session_files(home: Path) -> list[Path]:
    return sorted((home / ".claude" / "projects").rglob("*.jsonl"))


def retry_now(db: Database) -> None:
    with db.admin() as conn:
        conn.execute("UPDATE transcripts SET next_attempt_at = now()")  # skip the backoff wait


def test_episodes_run_with_claude_code_end_to_end(
    cc_db: Database, home: Path, stand_in: StreamAnthropic, monkeypatch: pytest.MonkeyPatch
) -> None:
    add(cc_db)
    result = CliRunner().invoke(cli, ["run", "--extractor", "claude-code"])
    assert result.exit_code == 0, result.output
    assert "done 1" in result.output and "by claude-code (claude-haiku-4-5)" in result.output
    (episode,) = rows(cc_db, "SELECT model, prompt_version, summary FROM episodes")
    assert episode["model"] == "claude-code:claude-haiku-4-5" and episode["summary"] == EPISODE["summary"]
    from jobs.extract.claude import prompt_version

    assert episode["prompt_version"] == prompt_version()  # the Claude path's prompts, asked the same way
    events = rows(cc_db, "SELECT type, evidence FROM episode_events")
    # Grounded like the Claude path: the event citing a message that does not exist is dropped.
    assert [(e["type"], e["evidence"]) for e in events] == [("decision", [0])]
    (call,) = rows(cc_db, "SELECT model, outcome, input_tokens, output_tokens, cost_usd FROM model_calls")
    assert call["model"] == "claude-code:claude-haiku-4-5" and call["outcome"] == "ok"
    assert call["input_tokens"] > 0 and call["output_tokens"] > 0 and float(call["cost_usd"]) > 0  # the CLI's figures
    # What the model was asked: our system prompt, our schema as the CLI's one tool, the transcript.
    (request,) = stand_in.messages()
    body = request.body
    assert [t["name"] for t in body["tools"]] == ["StructuredOutput"]
    assert body["tools"][0]["input_schema"]["properties"].keys() >= {"summary", "topic_tags", "key_events"}
    system = json.dumps(body["system"])
    assert "You write episodic memory for an AI agent" in system and "`StructuredOutput` tool" in system
    assert "record_episode" not in request.text() and "We'll go with the Team plan" in request.text()
    assert body["model"] == "claude-haiku-4-5"
    # No session file: our own runs never come back as memory.
    assert session_files(home) == []
    monkeypatch.setenv("EPISODES_EXTRACTOR", "claude-code")
    status = CliRunner().invoke(cli, ["status"])
    assert "extractor    claude-code, model claude-haiku-4-5 through your Claude Code login" in status.output
    assert "made by      claude-code (claude-haiku-4-5) 1" in status.output


def test_an_answer_that_fails_validation_is_repaired_once_quoting_the_error(
    cc_db: Database, stand_in: StreamAnthropic, embedder: Any
) -> None:
    add(cc_db)
    # Valid for the JSON schema (the CLI accepts it), invalid for the pydantic model: a blank tag.
    stand_in.reply = Script(ToolUse({**EPISODE, "topic_tags": ["   "]}))
    assert run(cc_db, embedder) == {"done": 1}
    assert [c["outcome"] for c in rows(cc_db, "SELECT outcome FROM model_calls ORDER BY id")] == ["invalid", "ok"]
    repair = stand_in.messages()[1].text()
    assert "topic tags must not be empty" in repair and "Call the tool again with corrected input" in repair


def test_a_schema_invalid_answer_dead_letters_and_leaves_the_existing_episode(
    cc_db: Database, stand_in: StreamAnthropic, embedder: Any
) -> None:
    add(cc_db)
    assert run(cc_db, embedder) == {"done": 1}
    before = rows(cc_db, "SELECT * FROM episodes")
    cc_db.settings = cc_db.settings.with_(max_attempts=3)  # the first success counted one attempt
    with cc_db.admin() as conn:  # the session changed: it is summarised again
        conn.execute(
            "UPDATE transcripts SET status = 'pending', content_hash = 'changed', "
            'messages = messages || \'[{"role": "user", "content": "One more thing."}]\'::jsonb'
        )
    stand_in.reply = Script(otherwise=ToolUse({"summary": 42}))  # the CLI retries it, then gives up
    assert run(cc_db, embedder) == {"failed": 1}
    retry_now(cc_db)
    assert run(cc_db, embedder) == {"dead": 1}
    (transcript,) = rows(cc_db, "SELECT status, attempts, last_error FROM transcripts")
    assert transcript["status"] == "dead" and transcript["attempts"] == 3
    assert transcript["last_error"].startswith("schema-invalid answer after the claude CLI's own retries")
    assert rows(cc_db, "SELECT * FROM episodes") == before  # a failed attempt changes no episode
    assert [c["outcome"] for c in rows(cc_db, "SELECT outcome FROM model_calls ORDER BY id")] == [
        "ok",
        "invalid",
        "invalid",
    ]


def test_an_empty_answer_is_repaired_once_then_fails(cc_db: Database, stand_in: StreamAnthropic, embedder: Any) -> None:
    add(cc_db)
    stand_in.reply = Script(otherwise="")
    assert run(cc_db, embedder) == {"failed": 1}
    (transcript,) = rows(cc_db, "SELECT status, attempts, last_error FROM transcripts")
    assert transcript["status"] == "pending" and transcript["attempts"] == 1
    assert transcript["last_error"] == "invalid model output after one repair request: empty answer"
    assert [c["outcome"] for c in rows(cc_db, "SELECT outcome FROM model_calls ORDER BY id")] == ["invalid", "invalid"]
    assert "You must call the StructuredOutput tool. Problem: empty answer" in stand_in.messages()[-1].text()
    assert rows(cc_db, "SELECT id FROM episodes") == []


@pytest.mark.parametrize("fault", [Fault(500), Fault(529, "overloaded_error", "Overloaded")], ids=["500", "529"])
def test_an_api_error_is_transient(cc_db: Database, stand_in: StreamAnthropic, embedder: Any, fault: Fault) -> None:
    add(cc_db)
    stand_in.reply = Script(otherwise=fault)
    assert run(cc_db, embedder) == {"failed": 1}
    (transcript,) = rows(cc_db, "SELECT status, attempts, last_error FROM transcripts")
    assert transcript["status"] == "pending" and transcript["attempts"] == 1
    assert transcript["last_error"].startswith(f"model service error {fault.status} through the claude CLI")
    assert [c["outcome"] for c in rows(cc_db, "SELECT outcome FROM model_calls")] == ["transient"]


def test_a_timeout_is_transient(cc_db: Database, stand_in: StreamAnthropic, embedder: Any) -> None:
    add(cc_db)

    def stall() -> Answer:
        time.sleep(20)
        return ToolUse(EPISODE)

    stand_in.reply = Script(otherwise=stall)
    settings = cc_db.settings.with_(claude_code_timeout_seconds=4.0)
    with ClaudeCodeExtractor(settings) as extractor:
        assert dict(run_summarize(cc_db, extractor=extractor, embedder=embedder).counts) == {"failed": 1}
    (transcript,) = rows(cc_db, "SELECT status, last_error FROM transcripts")
    assert transcript == {"status": "pending", "last_error": "the claude CLI did not answer within 4s (timeout)"}
    assert rows(cc_db, "SELECT id FROM episodes") == []


def test_the_cli_missing_from_path_stops_the_run_with_one_line(
    cc_db: Database, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    add(cc_db)
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    result = CliRunner().invoke(cli, ["run", "--extractor", "claude-code"])
    assert result.exit_code == 1
    assert (
        result.output.strip()
        .splitlines()[-1]
        .startswith("episodes: The claude-code extractor needs the Claude Code CLI (`claude`) on PATH")
    )
    (transcript,) = rows(cc_db, "SELECT status, attempts FROM transcripts")
    assert transcript == {"status": "pending", "attempts": 0}  # given back, not counted against the session


def test_not_logged_in_stops_the_run_with_one_line(
    cc_db: Database, stand_in: StreamAnthropic, monkeypatch: pytest.MonkeyPatch
) -> None:
    add(cc_db)
    monkeypatch.delenv("ANTHROPIC_API_KEY")  # the scratch HOME holds no login either
    result = CliRunner().invoke(cli, ["run", "--extractor", "claude-code"])
    assert result.exit_code == 1
    assert "Claude Code is not logged in or its credentials were rejected (Not logged in" in result.output
    assert "log in (/login)" in result.output
    assert rows(cc_db, "SELECT status, attempts FROM transcripts") == [{"status": "pending", "attempts": 0}]
    assert stand_in.messages() == []


def test_our_runs_skip_the_users_hooks_mcp_servers_and_memory_and_leave_no_session(
    cc_db: Database, home: Path, stand_in: StreamAnthropic, embedder: Any, tmp_path: Path
) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    touch = {
        event: [{"hooks": [{"type": "command", "command": f"touch {marks}/{event}"}]}]
        for event in ("SessionStart", "UserPromptSubmit", "Stop", "SessionEnd")
    }
    (home / ".claude" / "settings.json").write_text(json.dumps({"hooks": touch}))
    server = {"command": "sh", "args": ["-c", f"touch {marks}/mcp; sleep 5"]}
    (home / ".claude.json").write_text(json.dumps({"mcpServers": {"mine": server}}))
    (home / ".claude" / "CLAUDE.md").write_text("Always answer in the voice of a pirate (user memory marker).")
    add(cc_db)
    assert run(cc_db, embedder) == {"done": 1}
    assert sorted(p.name for p in marks.iterdir()) == []
    assert "pirate" not in stand_in.messages()[0].text()
    assert session_files(home) == []
    # The control: the same HOME without our flags runs those hooks and keeps a session file, so the
    # checks above would have seen them.
    stand_in.reply = Script(otherwise="Noted.")
    done = subprocess.run(
        [CLAUDE or "claude", "-p", "hello"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"},
    )
    assert done.returncode == 0, done.stderr
    assert {"SessionStart", "UserPromptSubmit", "Stop", "mcp"} <= {p.name for p in marks.iterdir()}
    assert session_files(home) != []
    assert "pirate" in stand_in.messages()[-1].text()


def test_compress_and_resummarize_take_claude_code_too(
    cc_db: Database, stand_in: StreamAnthropic, embedder: Any
) -> None:
    from support.compress_data import supers, year_2024

    from jobs.extract.claude import prompt_version

    sources = year_2024(cc_db, embedder)
    period = {
        "summary": "Over 2024 Maria chose the Acme Team plan and kept monthly billing.",
        "topic_tags": ["pricing"],
        "importance": 0.7,
        "key_events": [],
        "entities": [{"name": "Maria", "kind": "person"}],
    }
    stand_in.reply = Script(otherwise=ToolUse(period))
    result = CliRunner().invoke(cli, ["compress", "--extractor", "claude-code", "--now", "2026-11-21"])
    assert result.exit_code == 0, result.output
    (sup,) = supers(cc_db)
    assert sup["model"] == "claude-code:claude-haiku-4-5" and sup["summary"] == period["summary"]
    (request,) = stand_in.messages()
    assert [t["name"] for t in request.body["tools"]] == ["StructuredOutput"]
    assert "record_period_summary" not in request.text() and "`StructuredOutput` tool" in request.text()
    assert len(sources) == 3
    # resummarize: claude-code's episodes are on the Claude path's prompt version.
    dry = CliRunner().invoke(cli, ["resummarize", "--extractor", "claude-code", "--dry-run"])
    assert dry.exit_code == 0 and f"for prompt {prompt_version()}" in dry.output, dry.output


def test_no_session_file_under_a_claude_config_dir_either(
    cc_db: Database, stand_in: StreamAnthropic, embedder: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config_dir = tmp_path / "claude-config"
    config_dir.mkdir()
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(config_dir))
    add(cc_db)
    assert run(cc_db, embedder) == {"done": 1}
    assert sorted((config_dir / "projects").rglob("*.jsonl")) == []
    # The control: a plain run under the same CLAUDE_CONFIG_DIR keeps its session there.
    stand_in.reply = Script(otherwise="Noted.")
    done = subprocess.run(
        [CLAUDE or "claude", "-p", "hello"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"},
    )
    assert done.returncode == 0, done.stderr
    assert sorted((config_dir / "projects").rglob("*.jsonl")) != []
