"""The tenant-scoped reads of the memory service, as plain functions over a connection.

Each takes a :data:`~jobs.db.Conn` opened by ``Database.tenant(tenant_id)`` (row-level security
hides every other tenant) and also names the tenant in its SQL (sql/service.sql), as the design
asks of every query. The HTTP routes call them; so will the MCP tools.

Lists are paginated by an opaque cursor: the (time, id) of the last row returned, base64-encoded,
so a page never repeats or skips a row when new ones arrive in between.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import json
from dataclasses import dataclass
from typing import Any

from jobs.db import Conn
from jobs.sql import query


class BadCursor(ValueError):
    """A cursor that this service did not hand out (or that was altered)."""


@dataclass(frozen=True)
class Page:
    items: list[dict[str, Any]]
    next_cursor: str | None


def encode_cursor(moment: dt.datetime, row_id: int) -> str:
    raw = json.dumps([moment.isoformat(), row_id]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str | None) -> tuple[dt.datetime | None, int | None]:
    if not cursor:
        return None, None
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        moment, row_id = json.loads(raw)
        when = dt.datetime.fromisoformat(moment)
        # ids are bigint identities (1 .. 2^63-1): anything else was not handed out, and would reach the
        # database as an out-of-range parameter (a 500) instead of this 400
        if when.tzinfo is None or not isinstance(row_id, int) or isinstance(row_id, bool) or not 0 < row_id < 2**63:
            raise ValueError
        return when, row_id
    except (ValueError, TypeError, binascii.Error, UnicodeDecodeError, RecursionError):
        raise BadCursor("cursor is not one this service handed out; start again without it") from None


def _page(rows: list[Any], limit: int, time_key: str) -> Page:
    items = [dict(row) for row in rows[:limit]]
    more = len(rows) > limit
    return Page(items, encode_cursor(items[-1][time_key], items[-1]["id"]) if more and items else None)


def list_episodes(
    conn: Conn,
    tenant_id: str,
    user_id: str,
    *,
    kind: str | None = None,
    since: dt.datetime | None = None,
    until: dt.datetime | None = None,
    include_superseded: bool = False,
    q: str | None = None,
    limit: int = 50,
    cursor: str | None = None,
) -> Page:
    """A user's episodes, newest first (by end time), ``limit`` to a page; ``q`` keeps those whose
    summary, tags, events or entities match it (full text, web-search syntax: every word, unless
    joined by ``or``)."""
    after_ended, after_id = decode_cursor(cursor)
    rows = conn.execute(
        query("service_list_episodes"),
        {
            "tenant_id": tenant_id,
            "user_id": user_id,
            "kind": kind,
            "since": since,
            "until": until,
            "include_superseded": include_superseded,
            "q": q or None,
            "after_ended": after_ended,
            "after_id": after_id,
            "limit": limit + 1,
        },
    ).fetchall()
    return _page(rows, limit, "ended_at")


def get_episode(conn: Conn, tenant_id: str, episode_id: int) -> dict[str, Any] | None:
    """One episode with its events (evidence included), entities and lineage; None if not in the tenant."""
    row = conn.execute(query("service_get_episode"), {"tenant_id": tenant_id, "id": episode_id}).fetchone()
    return None if row is None else dict(row)


def search_events(
    conn: Conn,
    tenant_id: str,
    *,
    user_id: str | None = None,
    type: str | None = None,
    q: str | None = None,
    since: dt.datetime | None = None,
    status: str | None = None,
    stale_grace_seconds: float,
    stale_age_seconds: float,
    limit: int = 50,
    cursor: str | None = None,
) -> Page:
    """Typed events matching the full-text query ``q`` (web-search syntax), newest first, each with
    its status now: open, resolved, stale or superseded (see sql/service.sql)."""
    after, after_id = decode_cursor(cursor)
    rows = conn.execute(
        query("service_search_events"),
        {
            "tenant_id": tenant_id,
            "user_id": user_id,
            "type": type,
            "q": q or None,
            "since": since,
            "status": status,
            "grace": dt.timedelta(seconds=stale_grace_seconds),
            "age": dt.timedelta(seconds=stale_age_seconds),
            "after_occurred": after,
            "after_id": after_id,
            "limit": limit + 1,
        },
    ).fetchall()
    return _page(rows, limit, "occurred_at")


def user_known(conn: Conn, tenant_id: str, user_id: str) -> bool:
    """Whether the tenant holds a transcript or an episode of ``user_id`` (else the API answers 404)."""
    row = conn.execute(query("service_user_known"), {"tenant_id": tenant_id, "user_id": user_id}).fetchone()
    return bool(row and row["known"])
