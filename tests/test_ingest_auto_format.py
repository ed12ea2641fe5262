"""`episodes ingest` with the default `--format auto` (issue 35, item 10): a Claude Code session file, a
pretty-printed JSON file (whatever its name) and a JSONL file load without being told their format; a
record of another format says which `--format` reads it; a syntax error names its line and the column
of the fault in that line (counted in characters, as an editor shows it).

Session files are written here in the shape Claude Code writes (tests/test_claude_code_files.py); the
real ones in ../shared/data/claude-code are read too when that folder is there.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from support.claude_code_sessions import CLAUDE_CODE, SESSION, session_lines, write_lines

from jobs.cli import cli
from jobs.db import Database
from jobs.formats.detect import detect

pytestmark = pytest.mark.usefixtures("db")


def record(session: str, **changes: object) -> dict[str, Any]:
    base = {
        "tenant_id": "acme",
        "user_id": "u1",
        "session_id": session,
        "ended_at": "2025-03-04T09:20:00Z",
        "messages": [
            {"role": "user", "content": "We'll go with the Team plan."},
            {"role": "assistant", "content": "Switching you now."},
        ],
    }
    return {**base, **changes}


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, ["ingest", *args])


def sessions(db: Database) -> list[tuple[str, str, str]]:
    with db.admin() as conn:
        rows = conn.execute("SELECT tenant_id, user_id, session_id FROM transcripts ORDER BY session_id").fetchall()
    return [(r["tenant_id"], r["user_id"], r["session_id"]) for r in rows]


def test_a_claude_code_session_file_is_detected(db: Database, tmp_path: Path) -> None:
    path = write_lines(tmp_path / "projects" / "-home-dana-src-billing" / f"{SESSION}.jsonl", session_lines())
    result = run("--user", "dana", str(tmp_path / "projects"))  # a folder, as ~/.claude/projects is given
    assert result.exit_code == 0, result.output
    assert "unknown field" not in result.output and "ingested 1 transcript (1 new" in result.stdout
    assert sessions(db) == [("local", "dana", SESSION)]
    assert detect(path) == "claude-code"


def test_a_pretty_printed_json_file_loads_whatever_its_name(db: Database, tmp_path: Path) -> None:
    array = tmp_path / "export.json"
    array.write_text(json.dumps([record("a"), record("b")], indent=2))
    single = tmp_path / "one.jsonl"  # one pretty-printed object under a JSONL name
    single.write_text(json.dumps(record("c"), indent=4))
    wrapped = tmp_path / "wrapped.jsonl"
    wrapped.write_text(json.dumps({"transcripts": [record("d")]}, indent=2))
    result = run(str(array), str(single), str(wrapped))
    assert result.exit_code == 0, result.output
    assert "ingested 4 transcripts (4 new" in result.stdout and "rejected" not in result.stderr
    assert [s for _, _, s in sessions(db)] == ["a", "b", "c", "d"]


def test_a_record_of_another_format_says_which_format_reads_it(tmp_path: Path) -> None:
    cc_line = json.dumps(session_lines()[3])  # a user turn of a session file, inside a JSON array
    path = tmp_path / "mixed.json"
    path.write_text(
        f"[{json.dumps(record('a'))},\n{cc_line},\n{json.dumps({'sample_id': 'x', 'conversation': {}, 'qa': []})}]"
    )
    result = run(str(path))
    assert result.exit_code == 1
    assert f"rejected {path}:2: this is a line of a Claude Code session file: use --format claude-code" in result.stderr
    assert f"rejected {path}:3: this is a LoCoMo conversation: use --format locomo" in result.stderr


def test_a_bad_line_names_its_line_and_the_column_of_the_fault(tmp_path: Path) -> None:
    good = json.dumps(record("a"))
    bad = '{"tenant_id": "acme", "note": "caf\u00e9 \u65e5\u672c", "messages": [1,]}'
    column = bad.index(",]") + 2  # the ] that no value precedes, counted in characters
    path = tmp_path / "t.jsonl"
    path.write_text(f"{good}\n{bad}\n", encoding="utf-8")
    result = run(str(path))
    assert result.exit_code == 1
    assert f"rejected {path}:2: not valid JSON at column {column}: Expecting value" in result.stderr
    assert "ingested 1 transcript" in result.stdout

    lines = [json.dumps(x) for x in session_lines()]
    lines[4] = lines[4][:-1] + ' "x" }'  # a missing comma in line 5 of a session file, found by auto
    session = tmp_path / f"{SESSION}.jsonl"
    session.write_text("\n".join(lines) + "\n")
    column = len(lines[4]) - len(' "x" }') + 2
    for fmt in ("auto", "claude-code"):
        result = run("--format", fmt, "--user", "dana", str(session))
        assert f"rejected {session}:5: not valid JSON at column {column}: Expecting ',' delimiter" in result.stderr, fmt


def test_a_fault_in_a_pretty_printed_file_is_told_once_at_its_line_and_column(tmp_path: Path) -> None:
    """It was told line by line, at columns of lines that were never records."""
    text = json.dumps([record("a"), record("b")], indent=2)
    lines = text.split("\n")
    fault = next(i for i, line in enumerate(lines) if '"user_id": "u1"' in line and i > 10)
    lines[fault] = lines[fault].rstrip(",") + " ,"  # a stray comma before the closing of nothing
    lines[fault] = lines[fault].replace('"u1" ,', '"u1" "u2",')
    path = tmp_path / "pretty.jsonl"
    path.write_text("\n".join(lines))
    result = run(str(path))
    column = lines[fault].index('"u2"') + 1
    assert result.exit_code == 1
    assert [line for line in result.stderr.splitlines() if line.startswith("rejected")] == [
        f"rejected {path}:{fault + 1}: not valid JSON at column {column}: Expecting ',' delimiter"
    ], result.stderr


@pytest.mark.skipif(not CLAUDE_CODE.exists(), reason=f"the real Claude Code session files are not at {CLAUDE_CODE}")
def test_every_real_session_file_is_detected() -> None:
    files = sorted(CLAUDE_CODE.rglob("*.jsonl"))
    assert files and all(detect(f) == "claude-code" for f in files)
