"""``POST /v1/claude-code/session-start``: the block a Claude Code session starts with, for the remote hook.

Claude Code runs a SessionStart hook as a new process before the session's first request, so the
hook's cost is paid at every start. In remote mode the installed hook is a few lines of ``sh`` and
``curl`` (jobs/claude_code/session_start.sh) that pass the hook's JSON on to this route and print
the answer: no Python starts on the client, and the work is done here, in a warm process, by
:func:`jobs.claude_code.start_view.start_recall`, as the local hook does it on the database.

The body is Claude Code's hook input as it comes (``cwd``, ``session_id``, ``source``, ...; only
``cwd`` is read, other fields are allowed, as Claude Code adds some between versions). Where the session
starts in git comes beside it, as the sh hook reads it with one ``git rev-parse`` and one ``git config``
(issue 49): headers ``X-Episodes-Repo`` (the remote's URL), ``X-Episodes-Branch`` and ``X-Episodes-Head``,
so sessions of branches not merged into this one are left out and named "pending on `feat/x`", as
``POST /v1/recall`` does with the same fields (jobs.claude_code.branch_view.sort_by_record). The answer is
the block as ``text/plain`` ("" when there is nothing), or with ``format=json`` also the ids of the
episodes and open items shown, which the first prompt's hook leaves out of what it adds.
"""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, Depends, Header, Query, Request
from fastapi.responses import PlainTextResponse
from pydantic import BaseModel, ConfigDict, Field

from jobs.claude_code.start_view import remote_purpose, start_block, start_recall
from jobs.recall.recaller import Recaller
from jobs.repository.identity import normalise_url
from jobs.service.auth import KeyFirstRoute, scope
from jobs.service.keys import ApiKey
from jobs.service.schemas import NO_NUL

router = APIRouter(tags=["claude-code"], route_class=KeyFirstRoute)


class SessionStartHook(BaseModel):
    """Claude Code's SessionStart hook input; fields other than ``cwd`` are allowed and not read."""

    model_config = ConfigDict(extra="allow")
    cwd: str | None = Field(
        default=None,
        max_length=4096,
        pattern=NO_NUL,
        description="The project directory: recall shows this project's episodes.",
    )


class SessionStartView(BaseModel):
    block: str = Field(description="What the hook prints ('' when there is nothing to show).")
    episodes: list[int] = Field(description="Ids of the episodes in the block.")
    open_items: list[int] = Field(description="Ids of the open items in the block.")


def _header_text(value: str | None) -> str | None:
    """A header's text as sent (HTTP hands it over as Latin-1: a branch or path in UTF-8 is read back as such)."""
    if not value:
        return None
    try:
        return value.encode("latin-1").decode("utf-8")
    except UnicodeError:
        return value


@router.post(
    "/v1/claude-code/session-start",
    response_model=None,
    responses={
        200: {
            "content": {
                "text/plain": {"schema": {"type": "string"}},
                "application/json": {"schema": SessionStartView.model_json_schema()},
            },
            "description": "The block (text/plain), or with format=json the block and its ids.",
        }
    },
)
def session_start(
    body: SessionStartHook,
    request: Request,
    user_id: str = Query(min_length=1, max_length=256, pattern=NO_NUL),
    format: Literal["text", "json"] = Query(default="text"),
    repo: str | None = Header(
        default=None,
        alias="X-Episodes-Repo",
        max_length=1000,
        pattern=NO_NUL,
        description="The repository's remote URL (credentials left out): its scope, when the folder is not here.",
    ),
    branch: str | None = Header(
        default=None, alias="X-Episodes-Branch", max_length=255, pattern=NO_NUL, description="The branch checked out."
    ),
    head: str | None = Header(
        default=None, alias="X-Episodes-Head", pattern=r"^[0-9a-f]{40}([0-9a-f]{24})?$", description="HEAD (full hex)."
    ),
    key: ApiKey = Depends(scope("recall")),
) -> PlainTextResponse | SessionStartView:
    """The SessionStart block of ``user_id`` in the project at ``cwd``: recent episodes, open items and
    sessions not yet summarised (no relevance: there is no prompt yet); with a branch or HEAD, other branches'
    unmerged sessions as one line each."""
    recaller: Recaller = request.app.state.recaller
    repo, branch = _header_text(repo), _header_text(branch)
    # the folder may be on another machine
    purpose = remote_purpose(recaller.db, key.tenant_id, user_id, body.cwd, repo=repo)
    result = start_recall(recaller, key.tenant_id, user_id, body.cwd, purpose=purpose)
    view = None
    if branch or head:
        from jobs.claude_code.branch_view import sort_by_record

        remote = repo if repo and normalise_url(repo) else None  # a local path names nothing on this machine
        view = sort_by_record(result, recaller.db, key.tenant_id, repo=remote, branch=branch, head=head)
    block = start_block(result, view)
    if format == "json":
        return SessionStartView(
            block=block,
            episodes=[ep.id for ep in result.episodes] if block else [],
            open_items=[item.id for item in result.open_items] if block else [],
        )
    return PlainTextResponse(block, media_type="text/plain; charset=utf-8")
