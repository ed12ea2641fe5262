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
from test_repository_recall import _end, _start

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
