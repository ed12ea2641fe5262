"""``POST /v1/claude-code/session-start``: the block a Claude Code session starts with, for the remote hook.

Claude Code runs a SessionStart hook as a new process before the session's first request, so the
hook's cost is paid at every start. In remote mode the installed hook is a few lines of ``sh`` and
``curl`` (jobs/claude_code/session_start.sh) that pass the hook's JSON on to this route and print
the answer: no Python starts on the client, and the work is done here, in a warm process, by
:func:`jobs.claude_code.start_view.start_recall`, as the local hook does it on the database.

The body is Claude Code's hook input as it comes (``cwd``, ``session_id``, ``source``, ...; only
``cwd`` is read, other fields are allowed, as Claude Code adds some between versions). The answer is
the block as ``text/plain`` ("" when there is nothing), or with ``format=json`` also the ids of the
episodes and open items shown, which the first prompt's hook leaves out of what it adds.
"""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import PlainTextResponse
from pydantic import BaseModel, ConfigDict, Field

from jobs.claude_code.start_view import remote_purpose, start_block, start_recall
from jobs.recall.recaller import Recaller
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
    key: ApiKey = Depends(scope("recall")),
) -> PlainTextResponse | SessionStartView:
    """The SessionStart block of ``user_id`` in the project at ``cwd``: recent episodes, open items and
    sessions not yet summarised (no relevance: there is no prompt yet)."""
    recaller: Recaller = request.app.state.recaller
    purpose = remote_purpose(recaller.db, key.tenant_id, user_id, body.cwd)  # the folder may be on another machine
    result = start_recall(recaller, key.tenant_id, user_id, body.cwd, purpose=purpose)
    block = start_block(result)
    if format == "json":
        return SessionStartView(
            block=block,
            episodes=[ep.id for ep in result.episodes] if block else [],
            open_items=[item.id for item in result.open_items] if block else [],
        )
    return PlainTextResponse(block, media_type="text/plain; charset=utf-8")
