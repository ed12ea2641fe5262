"""The user's memory page ("What do you remember about me?") and the API call that makes its link.

- ``POST /v1/users/{user_id}/memory-link`` (a key with the ``recall`` and ``edit`` scopes: the page
  shows the user's memories and changes them) answers a link valid for 15 minutes for that user of
  the key's tenant (:mod:`jobs.service.page_link`). The link is ``EPISODES_PUBLIC_URL`` + the page's
  path when that is set, else the path alone (relative): never built from the request's Host header,
  which whoever sends the request chooses (a link pointing at their host would hand them the token).
- ``GET /memory?token=…`` shows the page; ``POST /memory/forget?token=…``, ``/memory/correct?token=…`` and
  ``/memory/item?token=…`` are its forms. They are authorised by the signed token in each form's address
  (never a cookie, never an API key), so another site cannot make the browser post one: it would need
  the token. Every answer is the page again, with what happened at the top.
- The token is checked before the form's body is read (:class:`TokenFirstRoute`, as API keys are by
  :class:`~jobs.service.auth.KeyFirstRoute`): a post with an altered, expired or withdrawn link is
  refused at once, and nobody without a live link can make a worker read and parse a body. That is why
  it is in the address and not in the body; the address already held it (the page's own), and the page
  is never named in a Referer.

A link that was altered, or signed with another secret, answers 403; an expired one 410, and so does
one whose key was revoked or whose user was erased since it was made (checked on every request, the
page's actions too); all as a plain page saying to ask for a new link.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Coroutine
from typing import Any
from urllib.parse import quote

import anyio
from fastapi import APIRouter, Depends, Form, Path, Query, Request, Response
from fastapi.responses import HTMLResponse
from fastapi.routing import APIRoute
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
    url: str = Field(
        description="The page for the user; hand it to them (it works for 15 minutes, for this user only). "
        "Absolute on EPISODES_PUBLIC_URL when the service has it, else a path on the service."
    )
    user_id: str
    expires_at: dt.datetime


def _secret(request: Request) -> bytes:
    """The link secret, looked up once per worker (see :func:`jobs.service.page_link.link_secret`)."""
    state = request.app.state
    if not hasattr(state, "link_secret"):
        state.link_secret = link_secret(state.db)
    secret: bytes = state.link_secret
    return secret


def _urls(request: Request, token: str) -> Urls:
    """The page's endpoints; the forms' carry the token in their address (checked before their body)."""
    root = str(request.scope.get("root_path", ""))
    show, *forms = (
        root + request.app.url_path_for(name)
        for name in ("memory_page", "memory_forget", "memory_correct", "memory_item")
    )
    return Urls(show, *(f"{form}?token={quote(token, safe='')}" for form in forms))


def _admit(request: Request, token: str) -> MemoryLink | HTMLResponse:
    """The live link ``token`` stands for, or the plain page refusing it (403 altered, 410 expired or
    withdrawn: its key revoked or its user erased since it was made)."""
    nonce = new_nonce()
    headers = security_headers(nonce)
    try:
        link = verify(_secret(request), token, dt.datetime.now(dt.UTC))
    except LinkExpired:
        return HTMLResponse(render(nonce=nonce, refused="expired"), status_code=410, headers=headers)
    except LinkRefused:
        return HTMLResponse(render(nonce=nonce, refused="invalid"), status_code=403, headers=headers)
    request.state.tenant_id = link.tenant_id
    if _withdrawn(request.app.state.db, link):
        return HTMLResponse(render(nonce=nonce, refused="withdrawn"), status_code=410, headers=headers)
    return link


class TokenFirstRoute(APIRoute):
    """A form of the page: the link in its address (``?token=``) is admitted, or refused, before FastAPI
    reads and parses the form's body."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def token_first(request: Request) -> Response:
            token = request.query_params.get("token", "")[:2000]
            admitted = await anyio.to_thread.run_sync(_admit, request, token)  # signature, time, then the database
            if isinstance(admitted, HTMLResponse):
                return admitted
            request.state.memory_link, request.state.memory_token = admitted, token
            return await handler(request)

        return token_first


def _answer(request: Request, token: str, action: Action | None = None) -> HTMLResponse:
    """Verify the token (a form's was, before its body was read), run ``action`` for its user, and answer
    the page (or the refusal)."""
    admitted = getattr(request.state, "memory_link", None)
    link = admitted if isinstance(admitted, MemoryLink) else _admit(request, token)
    if isinstance(link, HTMLResponse):
        return link
    nonce = new_nonce()
    headers = security_headers(nonce)
    db: Database = request.app.state.db
    status, notice = action(db, link) if action is not None else (200, None)
    with db.tenant(link.tenant_id) as conn:
        content = page_content(conn, link, request.app.state.settings)
    html = render(nonce=nonce, link=link, token=token, urls=_urls(request, token), content=content, notice=notice)
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


_ITEM_ACTIONS: dict[str, page_actions.ItemAction] = {"done": "done", "correct": "correct", "forget": "forget"}


@router.post("/v1/users/{user_id}/memory-link", response_model=MemoryLinkResponse, tags=["users"])
def memory_link(
    request: Request,
    user_id: str = Path(min_length=1, max_length=256, pattern=NO_NUL),
    key: ApiKey = Depends(scope("edit")),
) -> MemoryLinkResponse:
    """A link to the user's memory page, where they see what is remembered about them, correct it and
    forget it. Valid for 15 minutes, for this user of this key's tenant only, while this key is live.
    Absolute on ``EPISODES_PUBLIC_URL`` when that is set, else relative to the service."""
    if not key.allows("recall"):
        raise ApiError(
            403,
            "forbidden",
            "the memory page shows the user's memories and changes them: the key needs "
            f"both the 'recall' and 'edit' scopes (it has: {', '.join(key.scopes)})",
        )
    token, link = sign(_secret(request), key.tenant_id, user_id, key.id, dt.datetime.now(dt.UTC))
    settings = request.app.state.settings
    base = settings.public_url or str(request.scope.get("root_path", ""))  # never the request's Host header
    url = base + request.app.url_path_for("memory_page") + f"?token={token}"
    return MemoryLinkResponse(url=url, user_id=user_id, expires_at=link.expires_at)


@router.get("/memory", response_class=HTMLResponse, include_in_schema=False, name="memory_page")
def show(request: Request, token: str = Query("", max_length=2000)) -> HTMLResponse:
    return _answer(request, token)


forms = APIRouter(route_class=TokenFirstRoute)


def _form_token(request: Request) -> str:
    token: str = request.state.memory_token
    return token


@forms.post("/memory/forget", response_class=HTMLResponse, include_in_schema=False, name="memory_forget")
def forget(request: Request, episode_id: str = Form(""), confirm: str = Form("")) -> HTMLResponse:
    return _answer(
        request, _form_token(request), lambda db, link: page_actions.forget(db, link, _id(episode_id), confirm == "yes")
    )


@forms.post("/memory/correct", response_class=HTMLResponse, include_in_schema=False, name="memory_correct")
def correct(request: Request, episode_id: str = Form(""), summary: str = Form("", max_length=5000)) -> HTMLResponse:
    return _answer(
        request, _form_token(request), lambda db, link: page_actions.correct(db, link, _id(episode_id), summary)
    )


@forms.post("/memory/item", response_class=HTMLResponse, include_in_schema=False, name="memory_item")
def item(
    request: Request,
    event_id: str = Form(""),
    action: str = Form(""),
    text: str = Form("", max_length=5000),
    confirm: str = Form(""),
) -> HTMLResponse:
    def run(db: Database, link: MemoryLink) -> tuple[int, Notice]:
        chosen = _ITEM_ACTIONS.get(action)
        if chosen is None:
            return 422, Notice("Nothing was changed: that button is not one this page offers.", ok=False)
        return page_actions.item(db, link, _id(event_id), chosen, text, confirm == "yes")

    return _answer(request, _form_token(request), run)


router.include_router(forms)
