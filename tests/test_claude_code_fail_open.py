"""Claude Code hooks fail open: with the database down, a hanging service or a bad payload they exit 0, print
nothing and log; and a session start imports only what it uses."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from support.claude_code_cli import (
    DECISION,
    _closed_port,
    _hook,
    _session_file,
    _summarise,
)

from jobs.claude_code.places import log_file
from jobs.db import Database

# --- fail open -------------------------------------------------------------------------------------


def test_hook_with_the_database_unreachable_exits_0_quickly_prints_nothing_and_logs(tmp_path: Path) -> None:
    env = {"DATABASE_URL": f"postgresql://nobody@127.0.0.1:{_closed_port()}/none?connect_timeout=2"}
    payload = {
        "hook_event_name": "SessionStart",
        "session_id": "s-down",
        "cwd": str(tmp_path),
        "source": "startup",
        "transcript_path": str(tmp_path / "s-down.jsonl"),
    }
    done, _ = _hook(payload, "--user", "ann", "--budget", "60", env=env)
    assert done.returncode == 0 and done.stdout == ""
    log = log_file().read_text()  # it failed on the refused connection, not at its budget (the watchdog's line)
    assert "SessionStart: failed open" in log and "DatabaseError: Could not connect" in log, log
    assert "gave up after" not in log, log


def test_hook_gives_up_within_its_budget_when_the_service_hangs(tmp_path: Path) -> None:
    """A service that accepts the connection and never answers: the watchdog ends the hook at its budget."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    accepted: list[socket.socket] = []
    threading.Thread(target=lambda: accepted.append(server.accept()[0]), daemon=True).start()
    try:
        payload = {"hook_event_name": "SessionStart", "session_id": "s-hang", "cwd": str(tmp_path), "source": "startup"}
        done, _ = _hook(
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
    log = log_file().read_text()  # the watchdog ended it at its budget, before any request timeout (4 s) fired
    assert "gave up after 1.5s" in log and "failed open" not in log, log


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
