"""Issue 46, findings 10 and 11, with a stand-in ``claude`` (a small Python script on PATH that says
its version, records what it was started with and answers like the CLI): the child sees only the
allow-listed environment, dies with its parent, and an old CLI is refused before any request."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from psycopg.types.json import Jsonb
from pydantic import BaseModel
from support.claude_code_cli import MODEL_CACHE

from jobs.cli import cli
from jobs.config import Settings
from jobs.db import Database
from jobs.errors import ConfigError
from jobs.llm.claude_cli import ClaudeCli
from jobs.models import ModelCall

ROOT = Path(__file__).resolve().parent.parent
EPISODE = {"summary": "Maria chose the Team plan.", "topic_tags": ["billing"], "importance": 0.5, "key_events": []}
SHIM = """#!{python}
import json, os, pathlib, sys, time
folder = pathlib.Path({folder!r})
with (folder / "log").open("a") as log:
    log.write(" ".join(sys.argv[1:2]) + "\\n")
if sys.argv[1:] == ["--version"]:
    print({version!r})
    sys.exit(0)
sys.stdin.read()
(folder / "env.json").write_text(json.dumps(dict(os.environ)))
(folder / "pid").write_text(str(os.getpid()))
if {hang!r}:
    time.sleep(600)
print(json.dumps({{"type": "result", "subtype": "success", "is_error": False, "result": "",
                  "structured_output": {answer!r}, "stop_reason": "tool_use", "total_cost_usd": 0.0,
                  "usage": {{"input_tokens": 5, "output_tokens": 5}}}}))
"""


@dataclass
class Shim:
    folder: Path

    @property
    def path(self) -> Path:
        return self.folder / "claude"

    def log(self) -> list[str]:
        log = self.folder / "log"
        return log.read_text().splitlines() if log.exists() else []

    def env(self) -> dict[str, str]:
        return dict(json.loads((self.folder / "env.json").read_text()))


def make_shim(folder: Path, version: str = "2.1.332 (Claude Code)", hang: bool = False) -> Shim:
    folder.mkdir(parents=True)
    shim = Shim(folder)
    shim.path.write_text(
        SHIM.format(python=sys.executable, folder=str(folder), version=version, hang=hang, answer=EPISODE)
    )
    shim.path.chmod(0o755)
    return shim


class Out(BaseModel):
    summary: str


@dataclass
class Prompt:
    system: str = "Summarise."
    user: str = "Maria chose the Team plan."
    template: str = "test"
    tool_name: str = "record_episode"
    tool_description: str = "Record it."
    schema: dict[str, Any] = field(
        default_factory=lambda: {"type": "object", "properties": {"summary": {"type": "string"}}}
    )

    @property
    def prompt_hash(self) -> str:
        return "test"


SECRETS = {
    "DATABASE_URL": "postgresql://episodes:db-pass-4411@db.internal/episodes",
    "EPISODES_SERVICE_DATABASE_URL": "postgresql://svc:svc-pass-8812@db.internal/episodes",
    "PGPASSWORD": "pg-pass-2290",
    "OPENAI_API_KEY": "sk-openai-secret-3391",
    "VOYAGE_API_KEY": "pa-voyage-secret-7720",
    "EPISODES_LINK_SECRET": "link-secret-6604",
    "AWS_SECRET_ACCESS_KEY": "aws-secret-1188",
    "NODE_OPTIONS": "--require /tmp/evil.js",
}
ALLOWED = {
    "ANTHROPIC_API_KEY": "sk-ant-for-the-cli",
    "ANTHROPIC_BASE_URL": "http://127.0.0.1:9",
    "CLAUDE_CONFIG_DIR": "/tmp/claude-config",
    "HTTPS_PROXY": "http://proxy.internal:3128",
    "NO_PROXY": "localhost",
    "LC_ALL": "C.UTF-8",
    "DISABLE_TELEMETRY": "1",
}


def test_the_child_sees_only_the_allowed_environment(
    settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shim = make_shim(tmp_path / "bin")
    for name, value in {**SECRETS, **ALLOWED}.items():
        monkeypatch.setenv(name, value)
    ClaudeCli(settings, str(shim.path)).call(Prompt(), Out, [])
    env = shim.env()
    assert {name for name in SECRETS if name in env} == set()
    assert not [value for value in SECRETS.values() if value in json.dumps(env)]
    assert {name: env.get(name) for name in ALLOWED} == ALLOWED
    assert env["PATH"] == os.environ["PATH"] and env["HOME"] == os.environ["HOME"]
    assert env["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] == "1"
    # Bedrock's credentials go along only when the CLI is told to use Bedrock.
    monkeypatch.setenv("CLAUDE_CODE_USE_BEDROCK", "1")
    ClaudeCli(settings, str(shim.path)).call(Prompt(), Out, [])
    assert shim.env()["AWS_SECRET_ACCESS_KEY"] == SECRETS["AWS_SECRET_ACCESS_KEY"]
    assert "OPENAI_API_KEY" not in shim.env()


def alive(pid: int) -> bool:
    """Whether ``pid`` still runs (a zombie waiting for its reaper counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state not in ("Z", "X")


def wait_until(predicate: object, seconds: float = 60.0) -> bool:
    assert callable(predicate)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return bool(predicate())


@pytest.fixture
def hanging(tmp_path: Path) -> Iterator[Shim]:
    shim = make_shim(tmp_path / "bin", hang=True)
    yield shim
    pid_file = shim.folder / "pid"
    if pid_file.exists() and alive(int(pid_file.read_text())):
        os.kill(int(pid_file.read_text()), signal.SIGKILL)  # the test failed: leave nothing running


PARENT = """
import sys
sys.path[:0] = [{root!r}, {tests!r}]
from test_claude_cli_hardening import Out, Prompt
from jobs.config import load
from jobs.llm.claude_cli import ClaudeCli
ClaudeCli(load(), {shim!r}).call(Prompt(), Out, [])
"""


@pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="the kernel ends the child (PR_SET_PDEATHSIG) on Linux"
)
def test_the_child_dies_when_its_parent_is_killed(settings: Settings, hanging: Shim) -> None:
    code = PARENT.format(root=str(ROOT), tests=str(ROOT / "tests"), shim=str(hanging.path))
    parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        assert wait_until(lambda: (hanging.folder / "pid").exists()), "the stand-in claude never started"
        child = int((hanging.folder / "pid").read_text())
        assert alive(child)
        parent.kill()  # SIGKILL: no handler, no atexit runs
        parent.wait(timeout=60)
        assert wait_until(lambda: not alive(child)), "the claude child outlived its killed parent"
    finally:
        if parent.poll() is None:
            parent.kill()


def add(db: Database) -> None:
    messages = [{"role": "user", "content": "We'll go with the Team plan."}, {"role": "assistant", "content": "Done."}]
    with db.tenant("acme") as conn:
        conn.execute(
            "INSERT INTO transcripts (tenant_id, user_id, session_id, purpose, started_at, ended_at, messages, "
            "content_hash) VALUES ('acme', 'u1', 's1', 'support', '2025-03-04 09:00Z', '2025-03-04 09:20Z', %s, 'h1')",
            (Jsonb(messages),),
        )


def test_an_interrupted_run_leaves_no_claude_child(db: Database, hanging: Shim) -> None:
    add(db)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("EPISODES_", "ANTHROPIC_"))}
    env.update(
        DATABASE_URL=db.url,
        EPISODES_HOME=os.environ["EPISODES_HOME"],
        EPISODES_CACHE_DIR=MODEL_CACHE,
        HF_HUB_OFFLINE="1",
        PATH=f"{hanging.folder}{os.pathsep}{os.environ['PATH']}",
    )
    run = subprocess.Popen(
        [sys.executable, "-m", "jobs.cli", "run", "--extractor", "claude-code", "--concurrency", "1"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert wait_until(lambda: (hanging.folder / "pid").exists(), 120), "the stand-in claude never started"
        child = int((hanging.folder / "pid").read_text())
        run.send_signal(signal.SIGINT)  # to `episodes run` alone, as `kill -INT` does
        _, err = run.communicate(timeout=120)
        assert "interrupted" in err, err
        assert wait_until(lambda: not alive(child)), "the claude child outlived the interrupted run"
    finally:
        if run.poll() is None:
            run.kill()
    with db.admin() as conn:
        row = conn.execute("SELECT status, attempts FROM transcripts").fetchone()
    assert row == {"status": "pending", "attempts": 0}  # given back


def test_an_old_cli_is_refused_before_any_request_and_counts_no_attempt(
    db: Database, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shim = make_shim(tmp_path / "bin", version="2.1.197 (Claude Code)")
    monkeypatch.setenv("PATH", f"{shim.folder}{os.pathsep}{os.environ['PATH']}")
    add(db)
    result = CliRunner().invoke(cli, ["run", "--extractor", "claude-code"])
    assert result.exit_code == 1, result.output
    last = result.output.strip().splitlines()[-1]
    assert last.startswith("episodes: Claude Code 2.1.197 is too old: the claude-code back end needs 2.1.332 or later")
    assert "npm install -g @anthropic-ai/claude-code@latest" in last
    assert shim.log() == ["--version"]  # asked once; no request was made
    with db.admin() as conn:
        assert conn.execute("SELECT status, attempts FROM transcripts").fetchall() == [
            {"status": "pending", "attempts": 0}
        ]
    # Asked once per process: a second caller is refused from what was learned.
    with pytest.raises(ConfigError, match="too old"):
        ClaudeCli(db.settings, str(shim.path)).call(Prompt(), Out, [])
    assert shim.log() == ["--version"]


def test_a_cli_that_does_not_say_its_version_is_refused(settings: Settings, tmp_path: Path) -> None:
    shim = make_shim(tmp_path / "bin", version="Claude Code (development build)")
    calls: list[ModelCall] = []
    with pytest.raises(ConfigError, match=r"Could not tell the Claude Code CLI's version .*needs 2\.1\.332 or later"):
        ClaudeCli(settings, str(shim.path)).call(Prompt(), Out, calls)
    assert shim.log() == ["--version"]
