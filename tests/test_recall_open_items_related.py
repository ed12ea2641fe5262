"""Open items only when recent or related (issue 47): an open item of a session that matches the opening message
is not shown for that alone. It shows when its session is one of the recent ones, or when the item itself holds one
of the opening message's rarer words (not one every session says, such as the user's own name). Real PostgreSQL,
real MiniLM."""

from __future__ import annotations

import pytest
from support.recall_rows import NOW, add

from jobs.db import Database
from jobs.embeddings import Embedder
from jobs.recall import RecallConfig, Recaller

pytestmark = pytest.mark.usefixtures("db")

# Only the latest session is "recent"; the items are of an older one.
_CFG = RecallConfig(recent_n=1)


def _history(db: Database, embedder: Embedder) -> None:
    add(db, "Jon and Gina talked about the dance studio's opening night.", embedder=embedder, days_ago=1)
    add(
        db,
        "Jon and Gina talked about the dance studio and its wooden floor.",
        embedder=embedder,
        days_ago=40,
        events=[
            ("commitment", "Gina will watch Jon's routine video."),
            ("commitment", "Jon will buy marley flooring."),
        ],
    )
    add(db, "Jon and Gina talked about Gina's clothing store in the mall.", embedder=embedder, days_ago=60)


def test_an_item_of_a_relevant_session_is_not_shown_for_that_alone(db: Database, embedder: Embedder) -> None:
    """Before issue 47's change every item of a relevant session was listed: "Gina will watch Jon's routine video"
    above the quotes of a question about the studio's floor, though it says nothing of floors; "Jon" and "Gina" are
    in every summary, so they do not make an item related."""
    _history(db, embedder)
    result = Recaller(db, embedder, _CFG).recall(
        "acme", "u1", "What floor does Jon want for the dance studio?", now=NOW
    )
    shown = [item.what for item in result.open_items]
    assert "Gina will watch Jon's routine video." not in shown, result.render()
    assert shown == ["Jon will buy marley flooring."], result.render()


def test_an_item_of_a_recent_session_is_shown_though_unrelated(db: Database, embedder: Embedder) -> None:
    add(
        db,
        "Jon and Gina talked about the dance studio and its wooden floor.",
        embedder=embedder,
        days_ago=1,
        events=[("commitment", "Gina will watch Jon's routine video.")],
    )
    result = Recaller(db, embedder, _CFG).recall("acme", "u1", "Which bank offers the best mortgage?", now=NOW)
    assert [item.what for item in result.open_items] == ["Gina will watch Jon's routine video."], result.render()
