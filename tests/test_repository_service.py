"""The recall request and the MCP recall tool carry ``repo``, ``branch`` and ``head`` (issue 49).

Without git on the service, another branch's sessions are judged as the local session starts recorded
their branch (repository_branches): a decision of the open ``feat/a`` is left out for a caller on
``main`` (the MCP block says "pending on `feat/a`") and kept for a caller on ``feat/a``; ``repo`` alone
(its remote URL written either way) scopes recall to the repository.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp import Client
from support.api_server import serve
from support.claude_code_cli import DECISION
from support.git_repos import commit, git, scene
from support.mcp_http import http_transport
from support.repository_hooks import end_session as _end
from support.repository_hooks import start_session as _start

from jobs.db import Database
from jobs.service.keys import create_key

QUESTION = "Which database do we use for the memory store?"


def _recall(api: str, key: str, **extra: Any) -> list[str]:
    body = {"user_id": "ann", "message": QUESTION, **extra}
    answer = httpx.post(f"{api}/v1/recall", json=body, headers={"Authorization": f"Bearer {key}"}, timeout=60)
    assert answer.status_code == 200, answer.text
    return [e["session_id"] for e in answer.json()["episodes"]]


@pytest.mark.citus
def test_recall_over_http_and_mcp_leaves_out_an_open_branchs_sessions(tmp_path: Path, db: Database) -> None:
    repos = scene(tmp_path)
    git(repos.main, "remote", "add", "origin", "git@github.com:acme/app.git")
    commit(repos.wt_a, "a.txt")
    _end(db, "sess-a", repos.wt_a, DECISION, tmp_path)
    assert "pending on `feat/a`" in _start(db, "start-1", repos.main)  # the local start records feat/a as open
    head = git(repos.main, "rev-parse", "HEAD")
    _, key = create_key(db, "acme", ["recall"], name="issue 49")
    with serve(db) as api:
        assert _recall(api, key, repo="https://github.com/acme/app") == ["sess-a"]  # the repository's scope
        assert _recall(api, key, repo="https://github.com/someone/else") == []
        assert _recall(api, key, repo="git@github.com:acme/app.git", branch="main", head=head) == []
        assert _recall(api, key, repo="https://github.com/acme/app", branch="feat/a") == ["sess-a"]
        bad = httpx.post(
            f"{api}/v1/recall",
            json={"user_id": "ann", "message": QUESTION, "head": "not-a-commit"},
            headers={"Authorization": f"Bearer {key}"},
            timeout=60,
        )
        assert bad.status_code == 422 and "head" in bad.text

        async def mcp() -> str:
            headers = {"Authorization": f"Bearer {key}", "X-Episodes-User": "ann"}
            async with Client(http_transport(f"{api}/mcp", headers), read_timeout_seconds=60) as client:
                args = {"message": QUESTION, "repo": "https://github.com/acme/app", "branch": "main", "head": head}
                result = await client.call_tool("recall_memory", args)
            return "\n".join(getattr(block, "text", "") for block in result.content)

        block = anyio.run(mcp)
    assert "pending on `feat/a`" in block and "pgvector" not in block.lower(), block


@pytest.mark.citus
def test_the_remote_start_block_finds_a_folder_of_another_machine_by_its_stored_sessions(
    tmp_path: Path, db: Database
) -> None:
    """The sh/curl SessionStart hook sends only the folder; on a service elsewhere that folder is not there,
    so its repository cannot be read: the purpose the folder's sessions were stored under is used."""
    from support.claude_code_cli import _summarise

    from jobs.formats.claude_code import path_purpose, repository_purpose
    from jobs.ingest import ingest_records

    folder = "/home/ann/elsewhere/app-a"  # a worktree on the user's machine, not on this one
    purpose = repository_purpose("app", "github.com/acme/app")  # as the user's own hook computed it
    record = {
        "tenant_id": "acme",
        "user_id": "ann",
        "session_id": "far-1",
        "agent_id": "claude-code",
        "purpose": purpose,
        "started_at": "2026-11-20T10:00:00+00:00",
        "ended_at": "2026-11-20T10:05:00+00:00",
        "messages": [{"role": "user", "content": DECISION}, {"role": "assistant", "content": "Noted."}],
        "metadata": {"project": folder, "git_branch": "main", "git_repo": "github.com/acme/app"},
    }
    assert ingest_records(db, [("far", record)], tenant_id="acme").inserted == 1
    assert _summarise(db) == 1
    assert path_purpose(folder) != purpose
    _, key = create_key(db, "acme", ["recall"], name="issue 49")
    with serve(db) as api:
        answer = httpx.post(
            f"{api}/v1/claude-code/session-start?user_id=ann",
            json={"cwd": folder, "session_id": "s"},
            headers={"Authorization": f"Bearer {key}"},
            timeout=60,
        )
    assert answer.status_code == 200, answer.text
    assert "pgvector" in answer.text.lower(), answer.text
