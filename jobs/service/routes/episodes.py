"""Reading episodes and typed events: ``GET /v1/users/{user_id}/episodes``, ``GET /v1/episodes/{id}``,
``GET /v1/events``. Each runs in the key's tenant; another tenant's episode answers 404."""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, Depends, Path, Query, Request
from pydantic import AwareDatetime

from jobs.concepts import EventStatus, EventType
from jobs.service import reads
from jobs.service.auth import KeyFirstRoute, scope
from jobs.service.errors import ApiError
from jobs.service.keys import ApiKey
from jobs.service.schemas import NO_NUL, EpisodePage

router = APIRouter(tags=["episodes"], route_class=KeyFirstRoute)

UserId = Path(min_length=1, max_length=256, pattern=NO_NUL)
Limit = Query(50, ge=1, le=500)
_CURSOR: dict[int | str, dict[str, Any]] = {400: {"description": "a cursor this service did not hand out"}}
Cursor = Query(None, max_length=200, pattern=NO_NUL, description="next_cursor of the previous page")


def _page(request: Request, key: ApiKey, read: Any, **params: Any) -> EpisodePage:
    try:
        with request.app.state.db.tenant(key.tenant_id) as conn:
            page = read(conn, key.tenant_id, **params)
    except reads.BadCursor as exc:
        raise ApiError(400, "invalid_cursor", str(exc), field="query.cursor") from None
    return EpisodePage(items=page.items, next_cursor=page.next_cursor)


@router.get("/v1/users/{user_id}/episodes", response_model=EpisodePage, responses=_CURSOR)
def list_episodes(
    request: Request,
    user_id: str = UserId,
    kind: Literal["session", "super"] | None = None,
    since: AwareDatetime | None = Query(None, description="episodes that ended at or after"),
    until: AwareDatetime | None = Query(None, description="episodes that ended before"),
    include_superseded: bool = False,
    limit: int = Limit,
    cursor: str | None = Cursor,
    key: ApiKey = Depends(scope("recall")),
) -> EpisodePage:
    """A user's episodes, newest first, a page at a time."""
    return _page(
        request,
        key,
        reads.list_episodes,
        user_id=user_id,
        kind=kind,
        since=since,
        until=until,
        include_superseded=include_superseded,
        limit=limit,
        cursor=cursor,
    )


@router.get(
    "/v1/episodes/{episode_id}",
    response_model=dict[str, Any],
    responses={404: {"description": "no such episode in this tenant"}},
)
def get_episode(
    request: Request, episode_id: int = Path(ge=1, le=2**63 - 1), key: ApiKey = Depends(scope("recall"))
) -> dict[str, Any]:
    """One episode with its events (and their evidence), entities and, for a super-summary, the episodes it replaces."""
    with request.app.state.db.tenant(key.tenant_id) as conn:
        found = reads.get_episode(conn, key.tenant_id, episode_id)
    if found is None:
        raise ApiError(404, "not_found", f"no episode {episode_id}")
    return found


@router.get("/v1/events", response_model=EpisodePage, responses=_CURSOR)
def search_events(
    request: Request,
    type: EventType | None = Query(None, description="One of the event types (jobs.concepts.EVENT_TYPES)."),
    user_id: str | None = Query(None, min_length=1, max_length=256, pattern=NO_NUL),
    q: str | None = Query(None, max_length=500, pattern=NO_NUL, description="full text, web-search syntax"),
    since: AwareDatetime | None = None,
    status: EventStatus | None = None,
    limit: int = Limit,
    cursor: str | None = Cursor,
    key: ApiKey = Depends(scope("recall")),
) -> EpisodePage:
    """Typed events by full text, newest first, with their status now ("what did we decide about pricing?")."""
    settings = request.app.state.settings
    return _page(
        request,
        key,
        reads.search_events,
        user_id=user_id,
        type=type,
        q=q,
        since=since,
        status=status,
        stale_grace_seconds=settings.stale_grace_seconds,
        stale_age_seconds=settings.stale_age_seconds,
        limit=limit,
        cursor=cursor,
    )
