"""The user's still-open questions and commitments for a recall: those of candidate episodes.

``recall_open_items`` (``sql/recall.sql``) reads them a page at a time, in the order recall shows them
(fresh first, then stale ones related to the opening message; newest first), joined to their
episodes so that only items of recall candidates (current, not compressed, ended by ``now``, of an
allowed purpose) come back.

The same item said again in later sessions is one line (:func:`same_item`), so a page may hold fewer
distinct items than rows; the next page is read only while fewer than ``limit`` are kept and the page
was full. A typical user's items fit in the first page, which the recaller sends at once, beside the
other statements of its transaction (:func:`send_open_items`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from jobs.db import Conn, Cursor
from jobs.sql import query

PAGE_MIN = 16  # items a page reads at least (twice the limit when that is more)


def page_size(limit: int) -> int:
    return max(PAGE_MIN, 2 * limit)


def send_open_items(
    conn: Conn, params: dict[str, Any], limit: int, offset: int = 0, sql: Callable[[str], str] = query
) -> Cursor:
    """Send one page of ``recall_open_items`` (``conn`` may be in pipeline mode: read it later).

    ``params``: tenant_id, user_id, now, purposes, query_text (the opening message), grace_seconds,
    age_seconds.
    ``sql``: the texts of the transaction's statements (jobs.db.TenantRead.query)."""
    return conn.execute(sql("recall_open_items"), {**params, "limit": page_size(limit), "offset": offset})


def open_items(
    conn: Conn,
    first: Cursor,
    params: dict[str, Any],
    limit: int,
    sql: Callable[[str], str] = query,
) -> list[dict[str, Any]]:
    """The first ``limit`` distinct items: the page ``first`` sent, then more as needed.

    The same item said again in later sessions (five sessions each ending "Maria will send the order
    form") is one line, the newest, with ``times`` counting the sessions that said it among the items
    read: five identical lines would tell the agent nothing more and crowd out the other items."""
    kept: list[dict[str, Any]] = []
    seen: dict[tuple[str, str, str], dict[str, Any]] = {}
    cursor, offset = first, 0
    while True:
        page = cursor.fetchall()
        for row in page:
            key = same_item(row)
            if key in seen:
                seen[key]["times"] += 1
                continue
            seen[key] = item = {**row, "times": 1}
            kept.append(item)
        if len(kept) >= limit or len(page) < page_size(limit):
            return kept[:limit]
        offset += len(page)
        cursor = send_open_items(conn, params, limit, offset, sql)


def same_item(row: dict[str, Any]) -> tuple[str, str, str]:
    """What makes two open items one: the type, who, and the words (case, spacing and a final stop aside)."""
    words = " ".join(str(row["what"]).casefold().split()).rstrip(".!")
    return str(row["type"]), str(row["who"] or "").casefold(), words
