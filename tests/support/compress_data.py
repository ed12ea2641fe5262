"""Episodes to compress: session episodes written straight into the tables (add), a year of them with
decisions and open items (year_2024), the super-summaries a compression left (supers), and the fake model for the
compress tool (compress_responder; bench/compress_scale.py runs it in the fake server's own process:
``--responder support.compress_data:compress_responder``)."""

from __future__ import annotations

import datetime as dt
import re
from collections import Counter
from typing import Any

from jobs.concepts import EntityKind, EventType
from jobs.db import Database
from jobs.models import (
    Entity,
    EpisodeExtraction,
    KeyEvent,
    Message,
    search_text,
)
from jobs.store import EpisodeRow, insert_episode

_counter = iter(range(10**6))


def add(
    db: Database,
    ended: str,
    summary: str,
    *,
    embedder: Any = None,
    tenant: str = "acme",
    user: str = "u1",
    events: tuple[tuple[EventType, str], ...] = (),
    tags: tuple[str, ...] = ("pricing",),
    entities: tuple[tuple[str, EntityKind], ...] = (),
    importance: float = 0.5,
    purpose: str = "support",
) -> int:
    """One session episode; event i cites message i (whose text is the event's own sentence)."""
    end = dt.datetime.fromisoformat(ended).replace(tzinfo=dt.UTC)
    episode = EpisodeExtraction(
        summary=summary,
        topic_tags=list(tags),
        importance=importance,
        key_events=[KeyEvent(type=t, what=w, evidence=[i], who="Maria") for i, (t, w) in enumerate(events)],
        entities=[Entity(name=n, kind=k) for n, k in entities],
    )
    messages = [
        Message(role="user", content=f"Message {i}: {w}", ts=end - dt.timedelta(minutes=10 - i))
        for i, (_, w) in enumerate(events)
    ]
    row = EpisodeRow(
        tenant_id=tenant,
        user_id=user,
        kind="session",
        episode=episode,
        started_at=end - dt.timedelta(minutes=20),
        ended_at=end,
        model="test",
        prompt_version="test",
        purpose=purpose,
        session_id=f"s{next(_counter)}",
        embedding=embedder.embed([search_text(episode)])[0] if embedder is not None else None,
    )
    with db.tenant(tenant) as conn:
        return insert_episode(conn, row, messages=messages)


def year_2024(
    db: Database, embedder: Any = None, *, tenant: str = "acme", user: str = "u1", word: str = "Acme"
) -> list[int]:
    """Three 2024 sessions with decisions, open items, a surprise and (made below) a finished commitment."""
    ids = [
        add(
            db,
            "2024-02-03T10:00",
            f"Maria compared {word} pricing plans.",
            embedder=embedder,
            tenant=tenant,
            user=user,
            tags=("pricing", "plans"),
            entities=(("Maria", "person"), (word, "org")),
            events=(
                ("decision", f"Maria chose the {word} Team plan at $49 per seat."),
                ("open_question", "Maria asked whether annual billing has a discount."),
            ),
        ),
        add(
            db,
            "2024-06-10T10:00",
            f"Maria planned the {word} rollout to her team.",
            embedder=embedder,
            tenant=tenant,
            user=user,
            tags=("rollout", "pricing"),
            importance=0.8,
            entities=(("Maria", "person"),),
            events=(
                ("commitment", "The agent promised to send the rollout checklist by Friday."),
                ("surprise", "Maria did not expect the seat minimum."),
                ("commitment", "Maria promised to invite her team by June 30."),
            ),
        ),
        add(
            db,
            "2024-11-20T10:00",
            f"Maria reviewed the {word} invoice.",
            embedder=embedder,
            tenant=tenant,
            user=user,
            tags=("billing", "pricing"),
            entities=((word, "org"),),
            events=(("decision", "Maria decided to keep monthly billing."),),
        ),
    ]
    with db.tenant(tenant) as conn:  # the invitation was done later: not open any more
        conn.execute("UPDATE episode_events SET status = 'done' WHERE what LIKE 'Maria promised to invite%%'")
    return ids


def supers(db: Database, status: str = "current") -> list[dict[str, Any]]:
    with db.admin() as conn:
        return conn.execute(
            "SELECT * FROM episodes WHERE kind = 'super' AND status = %s ORDER BY id", (status,)
        ).fetchall()


# ------------------------------------------------------------------------------------------------
# The fake model for the compress tool: reads the [E<n>] event lines, summaries, topics and entities
# out of the request and answers with a valid record_period_summary input citing real ids.
# ------------------------------------------------------------------------------------------------

_EVENT = re.compile(
    r"^\[E(\d+)\] (decision|open question|open commitment)(?: \([^)]*\))?(?:, due [0-9-]+)?: (.*)$", re.MULTILINE
)
_SUMMARY = re.compile(r"^Summary: (.*)$", re.MULTILINE)
_TOPICS = re.compile(r"^Topics: (.*)$", re.MULTILINE)
_ENTITIES = re.compile(r"^Entities: (.*)$", re.MULTILINE)
_ENTITY = re.compile(r"^(.+) \((person|org|product|project|place|other)\)$")


def compress_responder(body: dict[str, Any]) -> dict[str, Any]:
    text = body["messages"][0]["content"]
    events = _EVENT.findall(text)
    tags = Counter(t.strip() for line in _TOPICS.findall(text) for t in line.split(","))
    entities: dict[str, str] = {}
    for line in _ENTITIES.findall(text):
        for item in line.split(", "):
            match = _ENTITY.match(item.strip())
            if match:
                entities.setdefault(match.group(1), match.group(2))
    summaries = _SUMMARY.findall(text)
    return {
        "summary": ("Over the period the user " + "; then ".join(s[:60] for s in summaries[:3]))[:1500],
        "topic_tags": [t for t, _ in tags.most_common(3)],
        "key_events": [{"source": f"E{i}", "what": f"Restated {label}: {what}"[:400]} for i, label, what in events[:3]],
        "entities": [{"name": n, "kind": k} for n, k in list(entities.items())[:10]],
        "importance": 0.7,
    }
