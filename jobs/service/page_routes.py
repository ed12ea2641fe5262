"""The user's memory page ("What do you remember about me?") and the API call that makes its link.

- ``POST /v1/users/{user_id}/memory-link`` (a key with the ``recall`` and ``edit`` scopes: the page
  shows the user's memories and changes them) answers a link valid for 15 minutes for that user of
  the key's tenant (:mod:`jobs.service.page_link`). The link is ``EPISODES_PUBLIC_URL`` + the page's
  path when that is set, else the path alone (relative): never built from the request's Host header,
  which whoever sends the request chooses (a link pointing at their host would hand them the token).
- ``GET /memory?token=…`` shows the page; ``POST /memory/forget``, ``/memory/correct`` and
  ``/memory/item`` are its forms. They are authorised by the signed token carried in each form
  (never a cookie, never an API key), so another site cannot make the browser post one: it would
  need the token. Every answer is the page again, with what happened at the top.

A link that was altered, or signed with another secret, answers 403; an expired one 410, and so does
one whose key was revoked or whose user was erased since it was made (checked on every request, the
page's actions too); all as a plain page saying to ask for a new link.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable

from fastapi import APIRouter, Depends, Form, Path, Query, Request
from fastapi.responses import HTMLResponse
from pydantic import BaseModel, Field

from jobs.db import Database
from jobs.service import page_actions
from jobs.service.auth import KeyFirstRoute, scope
from jobs.service.errors import ApiError
from jobs.service.keys import ApiKey, key_is_live
from jobs.service.page_link import (
    LinkExpired,
    LinkRefused,
    MemoryLink,
    link_secret,
    sign,
    verify,
)
from jobs.service.page_view import (
    Notice,
    Urls,
    erased_since,
    new_nonce,
    page_content,
    render,
    security_headers,
)
from jobs.service.schemas import NO_NUL

router = APIRouter(route_class=KeyFirstRoute)

Action = Callable[[Database, MemoryLink], tuple[int, Notice]]


class MemoryLinkResponse(BaseModel):
    url: str = Field(description="The page for the user; hand it to them (it works for 15 minutes, for this user only). "
                                 "Absolute on EPISODES_PUBLIC_URL when the service has it, else a path on the service.")
    user_id: str
    expires_at: dt.datetime


def _secret(request: Request) -> bytes:
    """The link secret, looked up once per worker (see :func:`jobs.service.page_link.link_secret`)."""
    state = request.app.state
    if not hasattr(state, "link_secret"):
        state.link_secret = link_secret(state.db)
    secret: bytes = state.link_secret
    return secret


def _urls(request: Request) -> Urls:
    root = str(request.scope.get("root_path", ""))
    return Urls(*(root + request.app.url_path_for(name) for name in
                  ("memory_page", "memory_forget", "memory_correct", "memory_item")))


def _answer(request: Request, token: str, action: Action | None = None) -> HTMLResponse:
    """Verify the token, run ``action`` for its user, and answer the page (or the refusal)."""
    nonce = new_nonce()
    headers = security_headers(nonce)
    try:
        link = verify(_secret(request), token, dt.datetime.now(dt.timezone.utc))
    except LinkExpired:
        return HTMLResponse(render(nonce=nonce, refused="expired"), status_code=410, headers=headers)
    except LinkRefused:
        return HTMLResponse(render(nonce=nonce, refused="invalid"), status_code=403, headers=headers)
    request.state.tenant_id = link.tenant_id
    db: Database = request.app.state.db
    if _withdrawn(db, link):
        return HTMLResponse(render(nonce=nonce, refused="withdrawn"), status_code=410, headers=headers)
    status, notice = action(db, link) if action is not None else (200, None)
    with db.tenant(link.tenant_id) as conn:
        content = page_content(conn, link, request.app.state.settings)
    html = render(nonce=nonce, link=link, token=token, urls=_urls(request), content=content, notice=notice)
    return HTMLResponse(html, status_code=status, headers=headers)


def _withdrawn(db: Database, link: MemoryLink) -> bool:
    """The key that asked for the link was revoked, or the user was erased since it was made."""
    if not key_is_live(db, link.key_id):
        return True
    with db.tenant(link.tenant_id) as conn:
        return erased_since(conn, link)


def _id(text: str) -> int:
    """A form's id field; anything else reads as an id that is not here (0 matches nothing)."""
    return int(text) if text.isdigit() and len(text) < 19 else 0


Token = Form("", max_length=2000)
_ITEM_ACTIONS: dict[str, page_actions.ItemAction] = {"done": "done", "correct": "correct", "forget": "forget"}


@router.post("/v1/users/{user_id}/memory-link", response_model=MemoryLinkResponse, tags=["users"])
def memory_link(request: Request, user_id: str = Path(min_length=1, max_length=256, pattern=NO_NUL),
                key: ApiKey = Depends(scope("edit"))) -> MemoryLinkResponse:
    """A link to the user's memory page, where they see what is remembered about them, correct it and
    forget it. Valid for 15 minutes, for this user of this key's tenant only, while this key is live.
    Absolute on ``EPISODES_PUBLIC_URL`` when that is set, else relative to the service."""
    if not key.allows("recall"):
        raise ApiError(403, "forbidden", "the memory page shows the user's memories and changes them: the key needs "
                                         f"both the 'recall' and 'edit' scopes (it has: {', '.join(key.scopes)})")
    token, link = sign(_secret(request), key.tenant_id, user_id, key.id, dt.datetime.now(dt.timezone.utc))
    settings = request.app.state.settings
    base = settings.public_url or str(request.scope.get("root_path", ""))  # never the request's Host header
    url = base + request.app.url_path_for("memory_page") + f"?token={token}"
    return MemoryLinkResponse(url=url, user_id=user_id, expires_at=link.expires_at)


@router.get("/memory", response_class=HTMLResponse, include_in_schema=False, name="memory_page")
def show(request: Request, token: str = Query("", max_length=2000)) -> HTMLResponse:
    return _answer(request, token)


@router.post("/memory/forget", response_class=HTMLResponse, include_in_schema=False, name="memory_forget")
def forget(request: Request, token: str = Token, episode_id: str = Form(""),
           confirm: str = Form("")) -> HTMLResponse:
    return _answer(request, token,
                   lambda db, link: page_actions.forget(db, link, _id(episode_id), confirm == "yes"))


@router.post("/memory/correct", response_class=HTMLResponse, include_in_schema=False, name="memory_correct")
def correct(request: Request, token: str = Token, episode_id: str = Form(""),
            summary: str = Form("", max_length=5000)) -> HTMLResponse:
    return _answer(request, token, lambda db, link: page_actions.correct(db, link, _id(episode_id), summary))


@router.post("/memory/item", response_class=HTMLResponse, include_in_schema=False, name="memory_item")
def item(request: Request, token: str = Token, event_id: str = Form(""), action: str = Form(""),
         text: str = Form("", max_length=5000), confirm: str = Form("")) -> HTMLResponse:
    def run(db: Database, link: MemoryLink) -> tuple[int, Notice]:
        chosen = _ITEM_ACTIONS.get(action)
        if chosen is None:
            return 422, Notice("Nothing was changed: that button is not one this page offers.", ok=False)
        return page_actions.item(db, link, _id(event_id), chosen, text, confirm == "yes")
    return _answer(request, token, run)
