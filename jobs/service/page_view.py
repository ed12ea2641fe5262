"""What the user's memory page shows, and its HTML (``reports/memory_page.html.j2``).

Jinja2 with autoescape and StrictUndefined. The page is self-contained: inline CSS allowed by a
per-response nonce in the Content-Security-Policy (:func:`security_headers`), no script, no image,
no font, nothing fetched from anywhere; forms post back to the page's own endpoints.
"""

from __future__ import annotations

import datetime as dt
import secrets
from dataclasses import dataclass
from functools import cache
from typing import Any

import jinja2

from jobs.compress.offline import without_head
from jobs.config import Settings
from jobs.db import Conn
from jobs.resources import reports_dir
from jobs.rights.forget import user_hash
from jobs.service import reads
from jobs.service.page_link import MemoryLink
from jobs.sql import query

TEMPLATE = "memory_page.html.j2"
MAX_EPISODES = 500  # the page lists this many, newest first, and says so when there are more
MAX_ITEMS = 200


@dataclass(frozen=True)
class Notice:
    """What happened after an action, in plain words; ``ok`` False shows it as a problem."""

    text: str
    ok: bool = True


@dataclass(frozen=True)
class Urls:
    """The page's own endpoints (paths, so the page works behind a reverse proxy's prefix)."""

    show: str
    forget: str
    correct: str
    item: str


def day(moment: dt.datetime | dt.date | None) -> str:
    """3 June 2025 (UTC): how the page writes dates."""
    if moment is None:
        return "an unknown date"
    if isinstance(moment, dt.datetime):
        moment = moment.astimezone(dt.UTC).date()
    return f"{moment.day} {moment:%B %Y}"


def describe(episode: dict[str, Any]) -> str:
    """ "the conversation of 3 June 2025", "the summary of 1 January 2025 to 31 March 2025"."""
    if episode["kind"] == "super":
        return f"the summary of {day(episode['period_start'])} to {day(episode['period_end'])}"
    return f"the conversation of {day(episode['ended_at'] or episode['started_at'])}"


def page_content(conn: Conn, link: MemoryLink, settings: Settings) -> dict[str, Any]:
    """The user's current episodes (newest first) and open items, ready for the template.

    Open items that recall counts as stale (past their due date by more than the grace, or older than
    the age without one: Settings.stale_grace_seconds, stale_age_seconds) are listed apart, as older
    and probably settled, not as still open: recall no longer brings them up unless the user talks of
    the same thing, and a promise from two years ago listed as open tells the user something untrue.
    """
    scope = {"tenant_id": link.tenant_id, "user_id": link.user_id}
    # The same read as GET /v1/users/{u}/episodes: current episodes (compressed sessions too), newest first.
    listed = reads.list_episodes(conn, link.tenant_id, link.user_id, limit=MAX_EPISODES)
    episodes = listed.items
    items = [
        dict(r)
        for r in conn.execute(
            query("page_open_items"),
            {
                **scope,
                "limit": MAX_ITEMS + 1,
                "grace": dt.timedelta(seconds=settings.stale_grace_seconds),
                "age": dt.timedelta(seconds=settings.stale_age_seconds),
            },
        )
    ]
    for episode in episodes:
        title = describe(episode)
        episode["title"] = title[0].upper() + title[1:]
        offline_super = episode["kind"] == "super" and episode["model"] == "offline"
        episode["text"] = without_head(episode["summary"]) if offline_super else episode["summary"]
        episode["by_program"] = offline_super
    for item in items:
        item["date"] = day(item["occurred_at"])
        item["due_text"] = day(item["due"]) if item["due"] else None
        item["who_text"] = {"user": "you", "assistant": "the assistant"}.get(item["who"] or "", item["who"])
    shown = items[:MAX_ITEMS]
    return {
        "episodes": episodes,
        "more_episodes": listed.next_cursor is not None,
        "items": [i for i in shown if not i["stale"]],
        "older_items": [i for i in shown if i["stale"]],
        "more_items": len(items) > MAX_ITEMS,
        "grace_days": round(settings.stale_grace_seconds / 86400),
        "age_days": round(settings.stale_age_seconds / 86400),
    }


def erased_since(conn: Conn, link: MemoryLink) -> bool:
    """Whether the link's user was erased since the link was made (then the page shows nothing)."""
    digest = user_hash(conn, link.tenant_id, link.user_id)
    row = conn.execute(
        query("page_user_erased_since"), {"tenant_id": link.tenant_id, "user_hash": digest, "since": link.issued_at}
    ).fetchone()
    return bool(row and row["erased"])


@cache
def environment() -> jinja2.Environment:
    def load(name: str) -> str:
        path = reports_dir() / name
        if not path.is_file():
            raise jinja2.TemplateNotFound(name)
        return path.read_text(encoding="utf-8")

    return jinja2.Environment(
        loader=jinja2.FunctionLoader(load),
        undefined=jinja2.StrictUndefined,
        autoescape=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )


def render(
    *,
    nonce: str,
    refused: str | None = None,
    link: MemoryLink | None = None,
    token: str = "",
    urls: Urls | None = None,
    content: dict[str, Any] | None = None,
    notice: Notice | None = None,
) -> str:
    """The page (``link``, ``content``) or, with ``refused``, the plain page that says why the link
    does not work and to ask for a new one."""
    return (
        environment()
        .get_template(TEMPLATE)
        .render(
            nonce=nonce,
            refused=refused,
            link=link,
            token=token,
            urls=urls,
            notice=notice,
            expires=f"{link.expires_at:%H:%M} UTC" if link else "",
            **(
                content
                or {
                    "episodes": [],
                    "more_episodes": False,
                    "items": [],
                    "older_items": [],
                    "more_items": False,
                    "grace_days": 0,
                    "age_days": 0,
                }
            ),
        )
    )


def new_nonce() -> str:
    return secrets.token_urlsafe(18)


def security_headers(nonce: str) -> dict[str, str]:
    """Nothing but this response's own inline style may load; forms go only to this origin; the page
    is never framed, cached or named in a Referer (its address holds the link's token)."""
    return {
        "Content-Security-Policy": (
            f"default-src 'none'; style-src 'nonce-{nonce}'; form-action 'self'; "
            "base-uri 'none'; frame-ancestors 'none'"
        ),
        "Cache-Control": "no-store",
        "Referrer-Policy": "no-referrer",
        "X-Content-Type-Options": "nosniff",
        "X-Frame-Options": "DENY",
    }
