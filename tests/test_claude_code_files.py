"""`episodes ingest --format claude-code`: Claude Code session files as transcripts (issue 30).

The real files are read from ../shared/data/claude-code (never copied into the repository); those
tests skip, saying so, when the folder is absent. The rest write small session files of their own.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from support.claude_code_sessions import (
    CLAUDE_CODE,
    PROJECT,
    SESSION,
    assistant,
    line,
    session_lines,
    stamp,
    text,
    tool_result,
    tool_use,
    user,
    write_lines,
)

from jobs.cli import cli
from jobs.db import Database
from jobs.embeddings import Embedder
from jobs.extract.offline import OfflineExtractor
from jobs.formats.claude_code import project_purpose, read_session_file
from jobs.ingest import ingest
from jobs.summarize import run_summarize

needs_files = pytest.mark.skipif(
    not CLAUDE_CODE.exists(), reason=f"the real Claude Code session files are not at {CLAUDE_CODE}"
)


def stored(db: Database) -> list[dict[str, Any]]:
    with db.admin() as conn:
        return conn.execute(
            "SELECT session_id, user_id, tenant_id, agent_id, purpose, started_at, ended_at, "
            "messages, metadata, message_count FROM transcripts ORDER BY session_id"
        ).fetchall()


def test_a_session_file_is_one_transcript_of_conversation_only(db: Database, tmp_path: Path) -> None:
    write_lines(tmp_path / "projects" / "-home-dana-src-billing" / f"{SESSION}.jsonl", session_lines())
    report = ingest(db, [tmp_path / "projects"], fmt="claude-code", tenant_id="acme", user_id="dana")
    assert (report.inserted, report.rejected) == (1, [])
    [row] = stored(db)
    assert (row["session_id"], row["tenant_id"], row["user_id"], row["agent_id"]) == (
        SESSION,
        "acme",
        "dana",
        "claude-code",
    )
    assert row["purpose"] == project_purpose(PROJECT) and row["purpose"].startswith("cc-billing-")
    assert row["metadata"] == {"project": PROJECT, "git_branch": "main", "claude_code_version": "2.1.332"}
    assert row["started_at"] == dt.datetime(2025, 3, 4, 9, 0, 0, tzinfo=dt.UTC)  # the first line's time
    assert row["ended_at"] == dt.datetime(2025, 3, 4, 9, 1, 54, tzinfo=dt.UTC)  # long idle: its last message
    messages = [(m["role"], m["content"]) for m in row["messages"]]
    assert messages == [
        ("user", "The invoice PDF export times out. We'll go with streaming the PDF instead of buffering it."),
        ("assistant", "Let me look at the exporter."),  # three lines of msg_1 joined, thinking left out
        (
            "tool",
            '[tool call Grep: pattern="render_pdf"]\n'
            "[tool result Grep: billing/export.py:40: def render_pdf(invoice):]\n"
            '[tool call Task: description="check callers", prompt="Find callers"]\n'
            "[tool result Task: render_pdf has two callers: the API and the nightly job.]",
        ),
        ("assistant", "Switched render_pdf to stream the PDF. I'll add a test for the timeout."),
        ("user", "/model opus"),  # a slash command as typed, not its markup
    ]
    everything = json.dumps(row["messages"])
    for injected in (
        "previous_episodes",
        "legacy invoice exporter",
        "system-reminder",
        "The date is Tuesday",
        "Do not mention",
        "SUBAGENT STEP",
        "Turn took",
        "local-command",
        "Caveat",
        "command-",
    ):
        assert injected not in everything, injected
    assert all(m.get("ts") for m in row["messages"])


def test_open_session_then_grown_file_replaces_never_doubles(db: Database, tmp_path: Path) -> None:
    now = dt.datetime.now(dt.UTC).replace(microsecond=0)
    lines = [
        user(0, "Rename the billing module to invoicing.", timestamp=stamp(-3, now)),
        assistant(0, "msg_a", text("Renamed billing to invoicing."), timestamp=stamp(-2, now)),
    ]
    path = write_lines(tmp_path / f"{SESSION}.jsonl", lines)
    first = ingest(db, [path], fmt="claude-code", user_id="dana")
    assert first.inserted == 1 and stored(db)[0]["ended_at"] is None  # idle 2 minutes: still open
    assert stored(db)[0]["tenant_id"] == "local"
    grown = [
        *lines,
        user(0, "Thanks, that's all.", timestamp=stamp(-1, now)),
        line("progress", 0, data={"type": "hook_progress", "hookEvent": "SessionEnd"}, timestamp=stamp(0, now)),
    ]
    write_lines(path, grown)
    second = ingest(db, [path], fmt="claude-code", user_id="dana")
    assert (second.inserted, second.updated, second.unchanged) == (0, 1, 0)
    [row] = stored(db)
    assert row["message_count"] == 3 and row["ended_at"] == dt.datetime.fromisoformat(stamp(-1, now))
    again = ingest(db, [path], fmt="claude-code", user_id="dana")
    assert (again.inserted, again.updated, again.unchanged) == (0, 0, 1)


def test_multi_megabyte_session_is_stored_within_limits_and_summarises(
    db: Database, tmp_path: Path, embedder: Embedder
) -> None:
    lines: list[dict[str, Any]] = [
        user(0, "The nightly import job is failing. We'll go with retrying each batch three times before giving up.")
    ]
    for n in range(1, 1201):  # 1,200 tool calls, 5 KB of output each: ~6 MB, most of it tool output
        lines.append(assistant(n, f"msg_{n}", tool_use(f"toolu_{n}", "Bash", command=f"./import.sh --batch {n}")))
        lines.append(user(n + 0.5, [tool_result(f"toolu_{n}", f"batch {n}\n" + "row ok\n" * 700)]))
        if n % 100 == 0:
            lines.append(assistant(n + 0.6, f"msg_t{n}", text(f"Batches up to {n} imported.")))
    lines.append(user(1300, "I'll check the retry logs tomorrow morning."))
    path = write_lines(tmp_path / f"{SESSION}.jsonl", lines)
    assert path.stat().st_size > 5_000_000
    report = ingest(db, [path], fmt="claude-code", user_id="dana")
    assert (report.inserted, report.rejected) == (1, [])
    [row] = stored(db)
    chars = sum(len(m["content"]) for m in row["messages"])
    assert row["message_count"] <= db.settings.max_messages and row["message_count"] == 2 + 2 * 12
    assert chars < db.settings.max_transcript_bytes and chars < 800_000
    assert summary_counts(db, embedder) == {"done": 1}
    with db.admin() as conn:
        events = conn.execute("SELECT type, evidence FROM episode_events").fetchall()
    assert {e["type"] for e in events} >= {"decision", "commitment"}
    assert all(row["messages"][i]["role"] != "tool" for e in events for i in e["evidence"])


def summary_counts(db: Database, embedder: Any) -> dict[str, int]:
    return run_summarize(db, extractor=OfflineExtractor(embedder), embedder=embedder).counts


def test_bad_lines_are_reported_with_their_line_and_the_rest_loads(db: Database, tmp_path: Path) -> None:
    lines: list[Any] = [
        user(0, "We'll go with Postgres 17."),
        "{not json",
        "42",
        '{"silly": "this"}',
        line("user", 1, None),
        user(2, "Thanks."),
    ]
    lines[4]["message"] = "error"
    path = write_lines(tmp_path / f"{SESSION}.jsonl", lines)
    result = CliRunner().invoke(
        cli, ["ingest", "--format", "claude-code", "--tenant", "acme", "--user", "dana", str(path)]
    )
    assert result.exit_code == 1
    assert f"rejected {path}:2: not valid JSON" in result.stderr
    assert f"rejected {path}:3: not a Claude Code line (a JSON int" in result.stderr
    assert f"rejected {path}:4: not a Claude Code line (no type)" in result.stderr
    assert f"rejected {path}:5: user line without a message object" in result.stderr
    assert "ingested 1 transcript (1 new" in result.stdout
    [row] = stored(db)
    assert [m["content"] for m in row["messages"]] == ["We'll go with Postgres 17.", "Thanks."]


def test_sidechain_only_files_store_nothing(db: Database, tmp_path: Path) -> None:
    path = write_lines(
        tmp_path / SESSION / "subagents" / "agent-1.jsonl",
        [user(0, "Find callers", isSidechain=True), assistant(1, "m", text("Found two."), isSidechain=True)],
    )
    report = ingest(db, [tmp_path], fmt="claude-code", user_id="dana")
    assert (report.loaded, report.rejected) == (0, []) and stored(db) == []
    assert list(read_session_file(path, tenant_id="t", user_id="u", idle_close_seconds=60)) == []


@needs_files
def test_every_real_session_file_ingests(db: Database) -> None:
    files = sorted(CLAUDE_CODE.glob("*.jsonl"))
    assert len(files) >= 8
    report = ingest(db, [CLAUDE_CODE], fmt="claude-code", tenant_id="acme", user_id="dana")
    edge = CLAUDE_CODE / "claude-code-log-edge_cases.jsonl"
    assert sorted(r.location for r in report.rejected) == sorted(f"{edge}:{n}" for n in (10, 11, 13, 14, 15, 16))
    with db.admin() as conn:
        rows = conn.execute("SELECT session_id, source, message_count, messages, ended_at FROM transcripts").fetchall()
    sources = {r["source"].rsplit(":", 1)[0] for r in rows}
    assert sources == {str(f) for f in files}  # every file gave its session(s)
    by_id = {r["session_id"]: r for r in rows}
    assert by_id["edge_cases"]["message_count"] == 9  # the good lines around the bad ones kept (less a caveat)
    assert all(r["ended_at"] is not None for r in rows)  # old files: idle long ago
    tools = " ".join(m["content"] for r in rows for m in r["messages"] if m["role"] == "tool")
    for name in ("Bash", "Glob", "WebSearch", "TodoWrite", "Task"):
        assert f"[tool call {name}" in tools, name
    everything = json.dumps([r["messages"] for r in rows])
    assert "system-reminder" not in everything and '"thinking"' not in everything
    again = ingest(db, [CLAUDE_CODE], fmt="claude-code", tenant_id="acme", user_id="dana")
    assert again.inserted == 0 and again.loaded == report.loaded
