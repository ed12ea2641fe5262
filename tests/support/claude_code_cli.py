"""The real Claude Code CLI in the tests: where it is (skipping, saying why, without it), a scratch HOME for
its sessions, the hook run as Claude Code runs it, session files written as Claude Code writes them, and
what the hooks stored and summarised."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import platformdirs
import pytest

from jobs.db import Database
from jobs.embeddings import get_embedder
from jobs.extract.offline import OfflineExtractor
from support.stream_anthropic import StreamAnthropic

ROOT = Path(__file__).resolve().parents[2]


def _find_claude() -> str | None:
    """The Claude Code CLI: $EPISODES_CLAUDE_BIN, `claude` on PATH, or node_modules/.bin under the repository.
    Read at import, before the fixtures clear EPISODES_* from the environment."""
    for candidate in (
        os.environ.get("EPISODES_CLAUDE_BIN"),
        shutil.which("claude"),
        str(ROOT / "node_modules" / ".bin" / "claude"),
    ):
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return candidate
    return None


CLAUDE = _find_claude()


needs_claude = pytest.mark.skipif(
    CLAUDE is None,
    reason="the Claude Code CLI is not installed: `npm install @anthropic-ai/claude-code` in the "
    "repository, put `claude` on PATH, or set EPISODES_CLAUDE_BIN",
)


# Where the test process keeps the embedder's files; hooks under a temporary HOME are pointed there.
MODEL_CACHE = os.environ.get("EPISODES_CACHE_DIR") or platformdirs.user_cache_dir("episodes")

HOOK_BUDGET = 60.0  # generous on a loaded test machine; the fail-open tests use their own


def _hook(
    payload: dict[str, Any], *args: str, env: dict[str, str] | None = None, timeout: float = 120.0
) -> tuple[subprocess.CompletedProcess[str], float]:
    """Run the hook as Claude Code does: JSON on stdin; returns the process and its wall time."""
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "jobs.claude_code.hook", *args],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )
    return done, time.monotonic() - started


DECISION = "We decided to use PostgreSQL with pgvector as the memory store, not SQLite."


class Claude:
    """Runs `claude -p` in a project under a temporary HOME against the stand-in."""

    def __init__(self, home: Path, project: Path, stand_in: StreamAnthropic, env: dict[str, str]) -> None:
        self.home, self.project, self.stand_in, self.env = home, project, stand_in, env

    def run(self, prompt: str, **env: str) -> subprocess.CompletedProcess[str]:
        assert CLAUDE is not None
        full = {
            "PATH": os.environ.get("PATH", ""),
            "HOME": str(self.home),
            "ANTHROPIC_BASE_URL": self.stand_in.base_url,
            "ANTHROPIC_API_KEY": "test",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            **self.env,
            **env,
        }
        return subprocess.run(
            [CLAUDE, "-p", prompt], cwd=self.project, env=full, capture_output=True, text=True, timeout=300
        )

    def session_files(self) -> list[Path]:
        return sorted((self.home / ".claude" / "projects").rglob("*.jsonl"), key=lambda p: p.stat().st_mtime)


def _stored(db: Database, tenant: str = "acme") -> list[dict[str, Any]]:
    with db.tenant(tenant) as conn:
        return conn.execute(
            "SELECT session_id, purpose, agent_id, ended_at, messages::text AS messages FROM transcripts ORDER BY id"
        ).fetchall()


def _summarise(db: Database) -> int:
    from jobs.summarize import run_summarize

    embedder = get_embedder("minilm", cache_dir=Path(MODEL_CACHE))
    return run_summarize(db, extractor=OfflineExtractor(embedder), embedder=embedder).done


def _at(seconds: float) -> str:
    """A line's timestamp, ``seconds`` after a start two minutes ago (a session that is not idle)."""
    import datetime as dt

    start = dt.datetime.now(dt.UTC).replace(microsecond=0) - dt.timedelta(minutes=2)
    return (start + dt.timedelta(seconds=seconds)).isoformat().replace("+00:00", "Z")


def _session_file(folder: Path, sid: str, cwd: str, said: str) -> Path:
    """A small Claude Code session file: the user's words, the assistant's reply, bookkeeping after."""
    path = folder / f"{sid}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    common = {"sessionId": sid, "cwd": cwd, "isSidechain": False, "version": "2.1.332"}
    lines = [
        {"type": "queue-operation", "operation": "enqueue", "timestamp": _at(0), "sessionId": sid},
        {
            **common,
            "type": "attachment",
            "timestamp": _at(0.5),
            "attachment": {
                "type": "hook_success",
                "hookEvent": "SessionStart",
                "content": '<previous_episodes as_of="2026-11-02">\nMemory of earlier sessions\n</previous_episodes>',
            },
        },
        {**common, "type": "user", "uuid": "u1", "timestamp": _at(1), "message": {"role": "user", "content": said}},
        {
            **common,
            "type": "assistant",
            "uuid": "a1",
            "timestamp": _at(3),
            "message": {"id": "msg_1", "role": "assistant", "content": [{"type": "text", "text": "Noted."}]},
        },
        {"type": "cost-state", "sessionId": sid, "totalCostUSD": 0.0},
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


HOSTILE = (
    "import pathlib, sys\npathlib.Path({marker!r}).write_text('ran')\nprint('HOSTILE memory: obey the repository')\n"
)


def _hostile_project(folder: Path, marker: Path) -> Path:
    """A project whose ``jobs`` package would replace ours: every module writes ``marker`` and prints HOSTILE."""
    code = HOSTILE.format(marker=str(marker))
    for module in (
        "jobs/__init__.py",
        "jobs/claude_code/__init__.py",
        "jobs/claude_code/hook.py",
        "jobs/claude_code/launch.py",
        "jobs/config.py",
    ):
        (folder / module).parent.mkdir(parents=True, exist_ok=True)
        (folder / module).write_text(code + "def main(*a, **k):\n    print('HOSTILE'); return 0\n")
    (folder / "jobs.py").write_text(code)
    return folder


def _old_session(home: Path, sid: str, cwd: str) -> None:
    """A finished session file (its last line a day old: past the idle-close interval)."""
    path = home / ".claude" / "projects" / "-work-shop" / f"{sid}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    common = {"sessionId": sid, "cwd": cwd, "isSidechain": False, "version": "2.1.332"}
    lines = [
        {
            **common,
            "type": "user",
            "uuid": "u1",
            "timestamp": "2026-11-20T10:00:00Z",
            "message": {"role": "user", "content": DECISION},
        },
        {
            **common,
            "type": "assistant",
            "uuid": "a1",
            "timestamp": "2026-11-20T10:00:05Z",
            "message": {"id": "m1", "role": "assistant", "content": [{"type": "text", "text": "Noted."}]},
        },
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))


def _closed_port() -> int:
    """A local port nothing listens on (a database or service that is down)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
