"""Claude Code integration: settings merged and removed exactly, hooks that fail open, and the real CLI.

The real-client tests run the Claude Code CLI (npm ``@anthropic-ai/claude-code``) with our hooks
installed by ``episodes claude-code install`` into a temporary HOME, against a local stand-in for
the Anthropic API that streams (tests/support/stream_anthropic.py). They are skipped, saying why, when the
CLI is not found: set EPISODES_CLAUDE_BIN, put ``claude`` on PATH, or ``npm install
@anthropic-ai/claude-code`` in the repository (node_modules/.bin/claude).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from support.claude_code_cli import (
    CLAUDE,
    DECISION,
    HOOK_BUDGET,
    MODEL_CACHE,
    Claude,
    _at,
    _hook,
    _session_file,
    _stored,
    _summarise,
    needs_claude,
)
from support.stream_anthropic import StreamAnthropic

from jobs.claude_code import hook_settings, session_state
from jobs.claude_code.places import log_file, project_purpose
from jobs.cli import cli
from jobs.db import Database

# --- settings.json -------------------------------------------------------------------------------

USER_SETTINGS: dict[str, Any] = {
    "model": "opus",
    "permissions": {"allow": ["Bash(ls:*)"]},
    "hooks": {
        "SessionStart": [{"matcher": "startup", "hooks": [{"type": "command", "command": "echo mine"}]}],
        "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "./check.sh", "timeout": 3}]}],
    },
}


def test_install_merges_beside_other_hooks_is_idempotent_and_uninstall_removes_exactly_ours(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    path = tmp_path / "home" / ".claude" / "settings.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(USER_SETTINGS))
    runner = CliRunner()
    args = ["claude-code", "install", "--user", "ann", "--api", "http://127.0.0.1:9", "--key-env", "MY_KEY"]

    first = runner.invoke(cli, args)
    assert first.exit_code == 0, first.output
    installed = json.loads(path.read_text())
    ours = hook_settings.installed_commands(installed)
    assert sorted(ours) == ["PreCompact", "SessionEnd", "SessionStart", "UserPromptSubmit"]
    assert all(
        len(commands) == 1 and "--user ann" in commands[0] and "--key-env MY_KEY" in commands[0]
        for event, commands in ours.items()
        if event != "SessionStart"
    )
    # The remote session start runs no Python: sh and curl (tests/test_claude_code_remote_start.py).
    assert "session_start.sh" in ours["SessionStart"][0] and "user_id=ann" in ours["SessionStart"][0]
    assert " MY_KEY " in ours["SessionStart"][0]
    # The user's hooks and settings are untouched, theirs first.
    assert installed["hooks"]["SessionStart"][0] == USER_SETTINGS["hooks"]["SessionStart"][0]
    assert installed["hooks"]["PreToolUse"] == USER_SETTINGS["hooks"]["PreToolUse"]
    assert installed["model"] == "opus" and installed["permissions"] == USER_SETTINGS["permissions"]
    assert installed["hooks"]["SessionStart"][1]["matcher"] == "startup|resume|clear|compact"

    again = runner.invoke(cli, args)
    assert again.exit_code == 0 and "nothing changed" in again.output
    assert json.loads(path.read_text()) == installed

    other_user = runner.invoke(cli, [*args[:3], "bob", *args[4:]])  # options changed: ours replaced, not added
    assert other_user.exit_code == 0, other_user.output
    replaced = hook_settings.installed_commands(json.loads(path.read_text()))
    assert all(len(c) == 1 and ("--user bob" in c[0] or "user_id=bob" in c[0]) for c in replaced.values())

    removed = runner.invoke(cli, ["claude-code", "uninstall"])
    assert removed.exit_code == 0 and "Removed 4 hooks" in removed.output
    assert json.loads(path.read_text()) == USER_SETTINGS
    assert "nothing changed" in runner.invoke(cli, ["claude-code", "uninstall"]).output


def test_install_refuses_a_settings_file_it_cannot_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    path = tmp_path / "home" / ".claude" / "settings.json"
    path.parent.mkdir(parents=True)
    path.write_text('{"hooks": {')
    result = CliRunner().invoke(cli, ["claude-code", "install", "--api", "http://127.0.0.1:9"])
    assert result.exit_code == 1 and "not valid JSON" in result.output
    assert path.read_text() == '{"hooks": {'


def test_project_purpose_is_a_valid_purpose_and_tells_projects_apart() -> None:
    from jobs.recall.purposes import purpose_filter

    a, b = project_purpose("/home/ann/Code/My Project"), project_purpose("/srv/My Project")
    assert a.startswith("cc-my-project-") and b.startswith("cc-my-project-") and a != b
    assert purpose_filter(a) == sorted([a, "general"])  # recall: this project and the user's general episodes
    assert project_purpose("/").startswith("cc-root-")


def _episode(id: int, *, relevant: bool) -> Any:
    import datetime as dt

    from jobs.recall.result import RecalledEpisode

    when = dt.datetime(2026, 3, 1, tzinfo=dt.UTC)
    return RecalledEpisode(
        id,
        "session",
        f"s{id}",
        "general",
        f"summary {id}",
        [],
        0.5,
        when,
        when,
        None,
        None,
        0.1,
        0.2,
        None,
        1 if relevant else None,
        None,
        id,
        1 if relevant else None,
        ["relevant" if relevant else "recent"],
    )


def test_the_first_prompt_adds_only_relevant_episodes_and_open_items_not_injected_at_start() -> None:
    import datetime as dt

    from jobs.claude_code import injection
    from jobs.recall.result import RecalledOpenItem

    when = dt.datetime(2026, 3, 1, tzinfo=dt.UTC)
    state = session_state.SessionState()
    session_state.remember_start(state, [1], [10])
    items = [
        RecalledOpenItem(10, 1, "commitment", "old item", None, None, when),
        RecalledOpenItem(11, 2, "open_question", "new item", None, None, when),
    ]
    block = injection.prompt_block(
        state, when, [_episode(1, relevant=True), _episode(2, relevant=True), _episode(3, relevant=False)], items
    )
    assert "summary 2" in block and "new item" in block
    assert "summary 1" not in block and "summary 3" not in block and "old item" not in block
    assert state.episodes == [1, 2] and state.open_items == [10, 11]
    assert injection.prompt_block(state, when, [_episode(1, relevant=True), _episode(2, relevant=True)], items) == ""


# --- fail open -------------------------------------------------------------------------------------


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_hook_with_the_database_unreachable_exits_0_quickly_prints_nothing_and_logs(tmp_path: Path) -> None:
    env = {"DATABASE_URL": f"postgresql://nobody@127.0.0.1:{_closed_port()}/none?connect_timeout=2"}
    payload = {
        "hook_event_name": "SessionStart",
        "session_id": "s-down",
        "cwd": str(tmp_path),
        "source": "startup",
        "transcript_path": str(tmp_path / "s-down.jsonl"),
    }
    done, took = _hook(payload, "--user", "ann", "--budget", "60", env=env)
    assert done.returncode == 0 and done.stdout == ""
    assert took < 60  # it failed on the refused connection, not at its budget (a busy machine's cold imports vary)
    assert "SessionStart: failed open" in log_file().read_text()


def test_hook_gives_up_within_its_budget_when_the_service_hangs(tmp_path: Path) -> None:
    """A service that accepts the connection and never answers: the watchdog ends the hook at its budget."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    accepted: list[socket.socket] = []
    threading.Thread(target=lambda: accepted.append(server.accept()[0]), daemon=True).start()
    try:
        payload = {"hook_event_name": "SessionStart", "session_id": "s-hang", "cwd": str(tmp_path), "source": "startup"}
        done, took = _hook(
            payload,
            "--api",
            f"http://127.0.0.1:{server.getsockname()[1]}",
            "--budget",
            "1.5",
            env={"EPISODES_API_KEY": "k"},
        )
    finally:
        server.close()
        for conn in accepted:
            conn.close()
    assert done.returncode == 0 and done.stdout == ""
    assert accepted, "the hook never reached the service"
    assert took < 1.5 + 10  # budget plus a cold interpreter on a busy machine; never the 4 s request timeout x N
    assert "gave up after 1.5s" in log_file().read_text()


def test_hook_with_a_bad_payload_or_arguments_exits_0(tmp_path: Path) -> None:
    done, _ = _hook({"hook_event_name": "SessionStart"}, "--no-such-option")
    assert done.returncode == 0 and done.stdout == ""
    assert "failed open" in log_file().read_text()


def test_the_hooks_do_not_import_the_anthropic_sdk() -> None:
    """It took 80 % of a local hook's start (recall -> privacy -> compress -> llm); no hook calls the model."""
    code = (
        "import sys, jobs.claude_code.hook, jobs.claude_code.local, jobs.claude_code.remote, "
        "jobs.claude_code.injection; print(sorted(m for m in sys.modules if m.split('.')[0] == 'anthropic'))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


# What the SessionStart hook must not import: the embedding model's runtime (it passes a zero vector),
# the model's SDK, the pydantic models (a third of a cold start: recall counts tokens with jobs.tokens)
# and what only the hand-over or other jobs use (issue 30: a cold process per session start).
NOT_AT_SESSION_START = (
    "onnxruntime",
    "onnx",
    "tokenizers",
    "anthropic",
    "pydantic",
    "pandas",
    "httpx",
    "jobs.models",
    "jobs.ingest",
    "jobs.pii",
    "jobs.compress",
    "jobs.llm",
    "jobs.extract",
    "jobs.summarize",
    "jobs.lifecycle",
    "jobs.claude_code.handover",
)


@pytest.mark.parametrize("waiting", [False, True], ids=["summarised", "waiting-for-summarize"])
def test_a_local_session_start_prints_the_block_without_importing_what_it_does_not_use(
    tmp_path: Path, db: Database, waiting: bool
) -> None:
    """Also with a session still waiting for summarize (common while `serve` is not running): its last
    words are shown redacted, from the stored text, without building a pydantic model per message."""
    project = str(tmp_path / "shop-api")
    said = DECISION + (" Mail the plan to ann@example.com." if waiting else "")
    file = _session_file(tmp_path / "projects" / "shop", "55555555-eeee", project, said)
    args = ["--tenant", "acme", "--user", "ann", "--budget", "60"]
    env = {**os.environ, "DATABASE_URL": db.url}
    end = {
        "hook_event_name": "SessionEnd",
        "reason": "other",
        "session_id": "55555555-eeee",
        "cwd": project,
        "transcript_path": str(file),
    }
    assert _hook(end, *args, env={"DATABASE_URL": db.url})[0].returncode == 0
    if not waiting:
        assert _summarise(db) == 1  # nothing waits for summarize: the block is episodes and open items only
    start = {
        "hook_event_name": "SessionStart",
        "source": "startup",
        "session_id": "66666666-ffff",
        "cwd": project,
        "transcript_path": str(tmp_path / "none.jsonl"),
    }
    modules = tmp_path / "modules.json"
    code = (
        "import json, sys\nfrom jobs.claude_code import hook\nhook.main(sys.argv[2:])\n"
        "open(sys.argv[1], 'w').write(json.dumps(sorted(sys.modules)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(modules), *args],
        input=json.dumps(start),
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("<previous_episodes") and "pgvector" in done.stdout.lower(), log_file().read_text()
    assert "ann@example.com" not in done.stdout
    assert ("Not yet summarised" in done.stdout and "[EMAIL]" in done.stdout) is waiting, done.stdout
    loaded = json.loads(modules.read_text())
    forbidden = tuple(name for name in NOT_AT_SESSION_START if not (waiting and name == "jobs.pii"))
    assert [m for m in loaded if m.startswith(tuple(f"{name}." for name in forbidden)) or m in forbidden] == []
    assert {"jobs.recall.recaller", "jobs.recall.result", "jinja2", "numpy", "psycopg"} <= set(loaded)


# --- the real Claude Code CLI ------------------------------------------------------------------------


@pytest.fixture
def claude(tmp_path: Path, db: Database, monkeypatch: pytest.MonkeyPatch) -> Iterator[Claude]:
    """Hooks installed by `episodes claude-code install` (local mode) into a temporary HOME."""
    if CLAUDE is None:
        pytest.skip("the Claude Code CLI is not installed")
    home, project = tmp_path / "cc-home", tmp_path / "work" / "shop-api"
    project.mkdir(parents=True)
    (home / ".claude").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    monkeypatch.setenv("EPISODES_CACHE_DIR", MODEL_CACHE)
    result = CliRunner().invoke(
        cli, ["claude-code", "install", "--tenant", "acme", "--user", "ann", "--budget", str(HOOK_BUDGET)]
    )
    assert result.exit_code == 0, result.output
    env = {"DATABASE_URL": db.url, "EPISODES_CACHE_DIR": MODEL_CACHE, "EPISODES_HOME": os.environ["EPISODES_HOME"]}
    with StreamAnthropic(reply="Noted: PostgreSQL with pgvector it is.") as stand_in:
        yield Claude(home, project, stand_in, env)


@needs_claude
@pytest.mark.slow
def test_real_claude_code_session_2_sees_session_1s_decision_and_no_injected_block_is_stored(
    claude: Claude, db: Database
) -> None:
    first = claude.run(DECISION)
    assert first.returncode == 0, first.stderr
    assert "PostgreSQL with pgvector it is" in first.stdout
    stored = _stored(db)
    assert len(stored) == 1, "the SessionEnd hook handed session 1 over"
    one = stored[0]
    assert one["ended_at"] is not None and one["agent_id"] == "claude-code"
    assert one["purpose"] == project_purpose(str(claude.project))
    assert "pgvector" in one["messages"]
    assert _summarise(db) == 1

    second = claude.run("Which database do we use for the memory store?")
    assert second.returncode == 0, second.stderr
    asked = claude.stand_in.messages()[-1].text()
    start, end = asked.find("<previous_episodes"), asked.find("</previous_episodes>")
    assert 0 <= start < end, "session 2's request carries the recall block"
    block = asked[start:end]
    assert "pgvector" in block.lower() and "postgresql" in block.lower(), block
    assert "clearly relates to the opening message" not in block  # there was none at session start
    # The first prompt's hook found that episode relevant, but SessionStart had injected it already.
    assert asked.count("<previous_episodes") == 1

    # Claude Code recorded the injected block in session 2's file; none of it is stored.
    files = claude.session_files()
    assert len(files) == 2 and "<previous_episodes" in files[-1].read_text()
    stored = _stored(db)
    assert len(stored) == 2
    assert sum(row["messages"].count("previous_episodes") for row in stored) == 0
    assert sum(row["messages"].count("Quotes from earlier sessions") for row in stored) == 0

    # Handing the same sessions over again (sync) changes nothing: summarised exactly once.
    again = CliRunner().invoke(cli, ["claude-code", "sync", "--tenant", "acme", "--user", "ann", "--all"])
    assert again.exit_code == 0, again.output
    assert "0 sessions stored, 2 already stored" in again.output
    assert _summarise(db) == 1  # session 2 only
    with db.tenant("acme") as conn:
        episodes = conn.execute("SELECT session_id FROM episodes WHERE kind = 'session'").fetchall()
    assert sorted(e["session_id"] for e in episodes) == sorted(row["session_id"] for row in stored)


@needs_claude
@pytest.mark.slow
def test_real_claude_code_session_runs_with_the_database_down_and_sync_stores_it_after(
    claude: Claude, db: Database
) -> None:
    down = f"postgresql://nobody@127.0.0.1:{_closed_port()}/none?connect_timeout=2"
    started = time.monotonic()
    done = claude.run(DECISION, DATABASE_URL=down)
    took = time.monotonic() - started
    assert done.returncode == 0, done.stderr
    assert "PostgreSQL with pgvector it is" in done.stdout
    assert took < 120, took
    assert _stored(db) == []
    log = log_file().read_text()
    assert "SessionStart: failed open" in log and "SessionEnd: failed open" in log
    sid = claude.session_files()[0].stem
    assert session_state.load(sid).ended, "the SessionEnd hook noted the end before failing"

    result = CliRunner().invoke(cli, ["claude-code", "sync", "--tenant", "acme", "--user", "ann"])
    assert result.exit_code == 0, result.output
    assert "1 session stored" in result.output
    stored = _stored(db)
    assert [row["session_id"] for row in stored] == [sid]
    assert stored[0]["ended_at"] is not None, "closed, so serve summarises it"
    assert (
        "1 unchanged since stored"
        in CliRunner().invoke(cli, ["claude-code", "sync", "--tenant", "acme", "--user", "ann"]).output
    )


# --- remote mode: the hooks through `episodes api` ----------------------------------------------------


def test_remote_mode_hands_over_through_the_api_and_injects_its_block_once(tmp_path: Path, db: Database) -> None:
    from support.api_server import serve

    from jobs.service.keys import create_key

    _, secret = create_key(db, "acme", ["recall", "ingest"], name="claude code")
    project = str(tmp_path / "shop-api")
    file = _session_file(tmp_path / "projects" / "shop", "11111111-aaaa", project, DECISION)
    env = {"EPISODES_API_KEY": secret}
    with serve(db) as api:
        args = ("--user", "ann", "--api", api, "--budget", "60")
        end = {
            "hook_event_name": "SessionEnd",
            "reason": "other",
            "session_id": "11111111-aaaa",
            "cwd": project,
            "transcript_path": str(file),
        }
        done, _ = _hook(end, *args, env=env)
        assert done.returncode == 0 and done.stdout == "", done.stderr
        assert "failed open" not in log_file().read_text() and "SessionEnd: ok in" in log_file().read_text()
        stored = _stored(db)
        assert [(r["session_id"], r["purpose"]) for r in stored] == [("11111111-aaaa", project_purpose(project))]
        assert stored[0]["ended_at"] is not None and "previous_episodes" not in stored[0]["messages"]
        assert _summarise(db) == 1
        assert _hook(end, *args, env=env)[0].returncode == 0  # handed over again: unchanged, not re-summarised
        assert _summarise(db) == 0

        start = {
            "hook_event_name": "SessionStart",
            "source": "startup",
            "session_id": "22222222-bbbb",
            "cwd": project,
            "transcript_path": str(tmp_path / "none.jsonl"),
        }
        shown, _ = _hook(start, *args, env=env)
        assert shown.returncode == 0 and shown.stdout.startswith("<previous_episodes"), shown.stdout
        assert "pgvector" in shown.stdout.lower() and "clearly relates" not in shown.stdout
        assert session_state.load("22222222-bbbb").episodes, "what was injected is remembered"

        prompt = {**start, "hook_event_name": "UserPromptSubmit", "prompt": "Which database did we choose?"}
        again, _ = _hook(prompt, *args, env=env)
        assert again.returncode == 0 and again.stdout == "", "the one relevant episode was injected at start already"
        assert session_state.load("22222222-bbbb").prompted

        other = {**start, "session_id": "33333333-cccc", "cwd": str(tmp_path / "another-project")}
        assert "pgvector" not in _hook(other, *args, env=env)[0].stdout  # another project's sessions stay out

        wrong, _ = _hook(start, *args, env={"EPISODES_API_KEY": "ep_" + "x" * 43})
        assert wrong.returncode == 0 and wrong.stdout == ""
        assert "answered 401" in log_file().read_text()


def test_precompact_hands_over_open_and_sessionend_closes_the_same_transcript(tmp_path: Path, db: Database) -> None:
    """Local mode: PreCompact stores the session so far, still open; SessionEnd replaces it, closed."""
    project = str(tmp_path / "shop-api")
    file = _session_file(tmp_path / "projects" / "shop", "44444444-dddd", project, DECISION)
    env = {"DATABASE_URL": db.url}
    args = ("--tenant", "acme", "--user", "ann", "--budget", "60")
    base = {"session_id": "44444444-dddd", "cwd": project, "transcript_path": str(file)}
    done, _ = _hook({**base, "hook_event_name": "PreCompact", "trigger": "auto"}, *args, env=env)
    assert done.returncode == 0, log_file().read_text()
    stored = _stored(db)
    assert [(r["session_id"], r["ended_at"]) for r in stored] == [("44444444-dddd", None)]
    later = _at(60)
    with file.open("a") as handle:  # the session goes on after the compaction
        handle.write(
            json.dumps(
                {
                    "type": "user",
                    "sessionId": "44444444-dddd",
                    "cwd": project,
                    "timestamp": later,
                    "message": {"role": "user", "content": "And add an index on user_id."},
                }
            )
            + "\n"
        )
    done, _ = _hook({**base, "hook_event_name": "SessionEnd", "reason": "prompt_input_exit"}, *args, env=env)
    assert done.returncode == 0, log_file().read_text()
    stored = _stored(db)
    assert len(stored) == 1 and stored[0]["ended_at"] is not None
    assert stored[0]["ended_at"].isoformat().startswith(later[:19])  # its last message, not the hook's time
    assert "index on user_id" in stored[0]["messages"]
    assert session_state.load("44444444-dddd").ended
