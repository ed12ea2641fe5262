"""Lines as the unit of retrieval (issue 47): recall searches every line of the user's history, by embedding and
by full text fused by rank, quotes the best with their session's date, lets the later value win at every budget,
and never says "nothing relates" above a quote that is among the best matches. Real PostgreSQL, real MiniLM."""

from __future__ import annotations

import re

import numpy as np
import pytest
from support.recall_block import check_block
from support.recall_rows import NOW, add, unit

from jobs.db import Database
from jobs.embeddings import Embedder
from jobs.recall import Recall, Recaller

pytestmark = pytest.mark.usefixtures("db")


def _quoted(result: Recall) -> dict[str, str]:
    """Each quoted line's text, by the session id of its episode."""
    return {line.text: ep.session_id or "" for ep in result.episodes for line in ep.lines}


def test_a_line_of_an_episode_that_scoring_did_not_choose_is_quoted_when_it_matches_best(
    db: Database, embedder: Embedder
) -> None:
    """Forty gym sessions outrank by summary the one session that said the locker code; its line is quoted all
    the same (before issue 47 only the lines of the episodes chosen by summary were searched)."""
    for k in range(40):
        add(
            db,
            f"The user and the assistant planned gym workout number {k}: squats, deadlifts and the rowing machine.",
            embedder=embedder,
            days_ago=30 + k,
            lines=[f"For workout {k} let's do five sets of squats and a rowing machine finisher."],
        )
    add(
        db,
        "The user and the assistant talked about a weekend trip to Lisbon and which museums to visit.",
        embedder=embedder,
        days_ago=200,
        lines=[
            "We should see the tile museum in Lisbon on Saturday.",
            "Oh, and note that my gym locker code is 4417, I keep forgetting it.",
        ],
    )
    result = Recaller(db, embedder).recall("acme", "u1", "What is my gym locker code?", now=NOW)
    block = result.render()
    check_block(block)
    assert "Oh, and note that my gym locker code is 4417, I keep forgetting it." in _quoted(result), block
    assert "Nothing in this user's history clearly relates" not in block


def test_an_identifier_only_the_words_find_is_quoted(db: Database, embedder: Embedder) -> None:
    """The dense side misses the line (its vector points elsewhere) and sixty decoy lines are closer; the
    identifier and the number in the opening message find it by full text, and fusion puts it first."""
    rng = np.random.default_rng(7)
    query = unit(rng)
    for k in range(20):
        decoys = [f"Decoy note {k}.{j}: the staging cluster was slow again this afternoon." for j in range(3)]
        near = np.stack([(0.55 * query + 0.83 * unit(rng)) for _ in decoys])
        add(db, f"Staging cluster notes {k}.", vector=unit(rng), days_ago=5 + k, lines=decoys, line_vectors=near)
    needle = "The ingest job fails with ERR_QUOTA_7731 when the bucket holds more than 5000 objects."
    far = (0.3 * query + 0.95 * unit(rng))[None, :]  # the embedding ranks it below all sixty decoys
    add(db, "Ingest job notes.", vector=unit(rng), days_ago=90, lines=[needle], line_vectors=far)
    result = Recaller(db, embedder).recall_vector(
        "acme", "u1", "What does ERR_QUOTA_7731 mean?", query, budget_tokens=300, now=NOW
    )
    check_block(result.render())
    assert needle in _quoted(result), result.render()


OLD = "The deploy window for releases is Fridays from 16:00 to 18:00 UTC."
NEW = "Change of plan: the deploy window is now Tuesdays from 10:00 to 12:00 UTC, releases still need two approvals."
AROUND_OLD = [
    "Releases in the deploy window need two approvals from the platform team.",
    "The deploy window for hotfixes is any weekday before 15:00 UTC.",
    "Nobody deploys outside the deploy window without paging the release manager.",
]


@pytest.mark.parametrize("budget", [250, 400, 600, 1000, 1500])
def test_the_later_value_is_quoted_first_and_never_cut_while_the_older_is_in_full(
    db: Database, embedder: Embedder, budget: int
) -> None:
    """Two sessions give the deploy window; the older session says it, and more about releases, in lines closer to
    the opening message. At every budget the later value is in the block whenever the older one is, whole."""
    add(db, "The user set the release process.", embedder=embedder, days_ago=60, lines=[OLD, *AROUND_OLD])
    add(db, "The user changed the release process.", embedder=embedder, days_ago=20, lines=[NEW])
    for k in range(12):
        add(
            db,
            f"The user and the assistant discussed the on-call rota, week {k}.",
            embedder=embedder,
            days_ago=1 + k,
            lines=[f"Week {k}: the on-call engineer hands over on Monday morning, and releases are announced in chat."],
        )
    result = Recaller(db, embedder).recall(
        "acme", "u1", "When is the deploy window for releases?", budget_tokens=budget, now=NOW
    )
    block = result.render()
    check_block(block)
    quoted = _quoted(result)
    assert NEW in quoted or OLD not in quoted, block
    assert not re.search(r"Change of plan: the deploy window is now Tuesdays[^\n]*\.\.\.$", block, re.M), block


def test_nothing_relates_is_never_printed_above_a_quote_among_the_best_matches(
    db: Database, embedder: Embedder
) -> None:
    """The session's summary says nothing of the matter (below the relevance floor); one of its lines answers the
    opening message outright. The episode is relevant by that line, and the block does not say nothing relates."""
    add(
        db,
        "The user and the assistant talked about holiday plans and a lemon cake recipe.",
        embedder=embedder,
        days_ago=3,
        lines=[
            "The lemon cake needs 200 grams of sugar.",
            "The staging database password rotates every 45 days, set by the security team.",
        ],
    )
    result = Recaller(db, embedder).recall(
        "acme", "u1", "How often does the staging database password rotate?", now=NOW
    )
    block = result.render()
    check_block(block)
    assert "The staging database password rotates every 45 days, set by the security team." in _quoted(result)
    assert "Nothing in this user's history clearly relates" not in block, block
    assert not result.nothing_relevant
    (ep,) = result.episodes
    assert "relevant" in ep.reasons


def test_an_unrelated_message_labels_nothing_relevant(db: Database, embedder: Embedder) -> None:
    """Silence holds: lines that only loosely resemble the message make no episode relevant."""
    add(
        db,
        "The user and the assistant planned a vegetable garden.",
        embedder=embedder,
        days_ago=3,
        lines=["Tomatoes go in the sunny bed by the fence.", "Water the beans every second morning."],
    )
    result = Recaller(db, embedder).recall("acme", "u1", "How do I rotate a Kubernetes TLS certificate?", now=NOW)
    assert result.nothing_relevant
    assert "Nothing in this user's history clearly relates" in result.render()
    assert not any("relevant" in ep.reasons for ep in result.episodes)


def test_every_session_header_carries_its_date_in_words(db: Database, embedder: Embedder) -> None:
    add(
        db, "The user adopted a dog named Biscuit.", embedder=embedder, days_ago=25, lines=["We named the dog Biscuit."]
    )
    result = Recaller(db, embedder).recall("acme", "u1", "What is the name of my dog?", now=NOW)
    block = result.render()
    assert "- 7 May 2025 (relevant" in block, block
    assert "  > user: We named the dog Biscuit." in block


def test_an_open_item_of_another_purpose_shows_only_when_related(db: Database, embedder: Embedder) -> None:
    """Issue 46 #21: a general session's open item headed "Still open" in every coding block. In a coding recall
    it shows only when its session relates to the opening message; being recent is not enough."""
    add(
        db,
        "The user asked for ideas for a birthday present for their sister.",
        embedder=embedder,
        days_ago=1,
        purpose="general",
        events=[("open_question", "Which birthday present should I buy for my sister?")],
    )
    add(db, "The user set up the CI pipeline for the parser.", embedder=embedder, days_ago=2, purpose="coding")
    unrelated = Recaller(db, embedder).recall(
        "acme", "u1", "The parser crashes on empty input files.", purpose="coding", now=NOW
    )
    assert unrelated.open_items == [] and "Still open:" not in unrelated.render(), unrelated.render()
    related = Recaller(db, embedder).recall(
        "acme", "u1", "Which birthday present should I buy for my sister?", purpose="coding", now=NOW
    )
    assert [item.what for item in related.open_items] == ["Which birthday present should I buy for my sister?"]
