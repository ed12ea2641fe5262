"""Recall: exact top K, reasons, budget, open items, super-summaries, purposes, isolation, rendering,
and the copies recall() shares across a process."""

from __future__ import annotations

import datetime as dt
import json
import os
import threading
from collections.abc import Iterator
from typing import Any

import click
import numpy as np
import psycopg
import pytest
from click.testing import CliRunner
from support.recall_rows import NOW, UNBOUNDED, add, episode_row, unit, words

from jobs import config
from jobs.cli.base import Context, _Group
from jobs.cli.recall import recall_command
from jobs.db import Database, one
from jobs.embeddings import Embedder, get_embedder
from jobs.errors import ConfigError
from jobs.prompts import render
from jobs.recall import (
    Recall,
    RecallConfig,
    RecalledEpisode,
    RecalledOpenItem,
    RecalledSession,
    Recaller,
    close_recallers,
    purpose_filter,
    recall,
    shared_recaller,
)
from jobs.recall.fitting import minimum_budget
from jobs.recall.open_items import page_size
from jobs.recall.scoring import read_scores, send_scores
from jobs.sql import query
from jobs.store import insert_episode
from jobs.tokens import estimate_tokens

pytestmark = pytest.mark.citus  # runs on one PostgreSQL and on the Citus cluster (conftest)


NO_FLOOR = RecallConfig(relevant_similarity=-1.0)  # for random vectors, which clear no floor


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    emb = get_embedder("minilm")
    emb.embed(["load the weights once for this module"])
    return emb


# ------------------------------------------------------------------------------------------------
# Exactness
# ------------------------------------------------------------------------------------------------


@pytest.fixture
def crowd(db: Database) -> Iterator[np.random.Generator]:
    """300 episodes of acme/u1 plus neighbours (another user, another tenant with the same user id)."""
    rng = np.random.default_rng(11)
    with db.tenant("acme") as conn:
        for _ in range(300):
            insert_episode(
                conn,
                episode_row(
                    words(rng),
                    days_ago=float(rng.uniform(0, 900)),
                    vector=unit(rng),
                    importance=float(rng.uniform(0, 1)),
                ),
            )
        for i in range(40):
            insert_episode(conn, episode_row(words(rng), user="u2", days_ago=float(i), vector=unit(rng)))
    with db.tenant("other") as conn:
        for i in range(40):
            insert_episode(conn, episode_row(words(rng), tenant="other", days_ago=float(i), vector=unit(rng)))
    yield rng


def _all_rows(db: Database, text: str) -> list[dict[str, Any]]:
    """Brute force input: every candidate row of acme/u1, with PostgreSQL's own text score.

    The text score is PostgreSQL's ts_rank (normalisation 1) of the message's lexemes OR-ed, built
    the same way as in sql/recall.sql, so equal scores tie exactly as they do there.
    """
    with db.tenant("acme") as conn:
        return conn.execute(
            """SELECT id, embedding, ended_at, importance,
                      CASE WHEN search_tsv @@ q THEN ts_rank(search_tsv, q, 1)::float8 END AS text_score
               FROM episodes,
                    (SELECT string_agg('''' || lex || '''', ' | ')::tsquery AS q
                     FROM unnest(tsvector_to_array(to_tsvector('english', %s))) AS lex) tq
               WHERE user_id = 'u1' AND status = 'current' AND compressed_into IS NULL""",
            (text,),
        ).fetchall()


def _brute_force(rows: list[dict[str, Any]], query: np.ndarray, cfg: RecallConfig, k: int) -> list[int]:
    """The fused score of sql/recall.sql, recomputed in Python over all rows."""
    dist = {r["id"]: 1.0 - float(np.dot(r["embedding"].to_numpy(), query)) for r in rows}
    by_vec = sorted(dist, key=lambda i: (dist[i], i))[: cfg.rank_depth]
    matched = [r for r in rows if r["text_score"] is not None]
    by_text = [r["id"] for r in sorted(matched, key=lambda r: (-r["text_score"], r["id"]))][: cfg.rank_depth]
    vrank = {i: n + 1 for n, i in enumerate(by_vec)}
    trank = {i: n + 1 for n, i in enumerate(by_text)}
    score = {}
    for r in rows:
        if r["id"] not in vrank and r["id"] not in trank:
            continue  # beyond both lists' depth: no score
        age = max((NOW - r["ended_at"]).total_seconds(), 0) / 86400
        fused = cfg.w_vector / (cfg.rrf_k + vrank[r["id"]]) if r["id"] in vrank else 0.0
        fused += cfg.w_text / (cfg.rrf_k + trank[r["id"]]) if r["id"] in trank else 0.0
        decay = cfg.decay_floor + (1 - cfg.decay_floor) * 0.5 ** (age / cfg.half_life_days)
        score[r["id"]] = fused * decay * (1 + cfg.w_importance * (r["importance"] - 0.5))
    return sorted(score, key=lambda i: (-score[i], i))[:k]


def test_vector_top_k_is_exact(db: Database, crowd: np.random.Generator) -> None:
    cfg = RecallConfig(
        recent_n=0,
        top_k=15,
        w_text=0.0,
        decay_floor=1.0,
        w_importance=0.0,
        max_open_items=0,
        dedup_similarity=2.0,
        relevant_similarity=-1.0,
    )
    recaller = Recaller(db, config=cfg)
    rows = _all_rows(db, "x")
    matrix = np.stack([r["embedding"].to_numpy() for r in rows])
    ids = np.array([r["id"] for r in rows])
    for _ in range(5):
        query = unit(crowd)
        result = recaller.recall_vector("acme", "u1", "", query, budget_tokens=UNBOUNDED, now=NOW)
        expected = ids[np.argsort(1.0 - matrix @ query, kind="stable")[:15]]
        got = sorted(result.episodes, key=lambda ep: ep.relevance_rank or 0)
        assert [ep.id for ep in got] == list(expected)
        assert [ep.vector_rank for ep in got] == list(range(1, 16))
        assert result.candidates == 300


def _clears_floor(cfg: RecallConfig, distance: float | None, text: float | None) -> bool:
    if distance is None:
        return False
    return 1 - distance >= cfg.relevant_similarity or (
        1 - distance >= cfg.relevant_similarity_with_text and text is not None and text >= cfg.relevant_text
    )


@pytest.mark.parametrize(("relevant", "related"), [(0.3, -1.0), (0.3, 0.1), (0.5, 0.25), (0.7, 0.1), (0.5, 0.4)])
def test_only_episodes_above_the_floor_are_relevant_and_possibly_related_ones_are_below_it(
    db: Database, crowd: np.random.Generator, relevant: float, related: float
) -> None:
    """Whatever the floor, the labels SQL gives are honest: relevant ones clear it, possibly related ones do
    not and are at least related_similarity alike, neither list is longer than asked, and with room to spare
    every ranked episode between the two thresholds is possibly related (checked against the brute force)."""
    cfg = RecallConfig(
        relevant_similarity=relevant,
        related_similarity=related,
        top_k=6,
        related_k=10,
        recent_n=2,
        max_open_items=0,
        dedup_similarity=2.0,
        rank_depth=50,
    )
    recaller = Recaller(db, config=cfg)
    rows = _all_rows(db, "x")
    vectors = np.stack([r["embedding"].to_numpy() for r in rows])
    for _ in range(4):
        # A query near a few episodes (similarities spread from ~0.2 to ~0.8), the rest near 0.
        near = crowd.choice(len(rows), 4, replace=False)
        query = (vectors[near] * crowd.uniform(0.3, 1.0, (4, 1))).sum(axis=0) + 0.3 * unit(crowd)
        query = (query / np.linalg.norm(query)).astype(np.float32)
        text = words(crowd, 3)
        result = recaller.recall_vector("acme", "u1", text, query, budget_tokens=UNBOUNDED, now=NOW)
        top = [ep for ep in result.episodes if ep.relevance_rank]
        loose = [ep for ep in result.episodes if ep.related_rank]
        assert len(top) <= cfg.top_k and len(loose) <= cfg.related_k and not {e.id for e in top} & {e.id for e in loose}
        assert all(_clears_floor(cfg, ep.distance, ep.text_score) for ep in top)
        assert all(not _clears_floor(cfg, ep.distance, ep.text_score) for ep in loose)
        assert all(ep.distance is not None and 1 - ep.distance >= related for ep in loose)
        if len(loose) < cfg.related_k:
            scored = {r["id"]: r for r in _all_rows(db, text)}
            by_vec = sorted(scored, key=lambda i: (1 - float(np.dot(scored[i]["embedding"].to_numpy(), query)), i))
            ranked = set(by_vec[: cfg.rank_depth]) | set(
                sorted(
                    (i for i in scored if scored[i]["text_score"] is not None),
                    key=lambda i: (-scored[i]["text_score"], i),
                )[: cfg.rank_depth]
            )
            between = {
                i
                for i in ranked
                if not _clears_floor(
                    cfg, 1 - float(np.dot(scored[i]["embedding"].to_numpy(), query)), scored[i]["text_score"]
                )
                and float(np.dot(scored[i]["embedding"].to_numpy(), query)) >= related
            }
            assert {ep.id for ep in loose} == between
        assert any(top) or relevant >= 0.7 or any(loose), "the query should make some label"


def test_hybrid_top_k_matches_brute_force(db: Database, crowd: np.random.Generator) -> None:
    cfg = RecallConfig(
        recent_n=0, top_k=12, rank_depth=30, max_open_items=0, dedup_similarity=2.0, relevant_similarity=-1.0
    )
    recaller = Recaller(db, config=cfg)
    for _ in range(8):
        query, text = unit(crowd), words(crowd, 4)
        result = recaller.recall_vector("acme", "u1", text, query, budget_tokens=UNBOUNDED, now=NOW)
        rows = _all_rows(db, text)
        got = [ep.id for ep in sorted(result.episodes, key=lambda ep: ep.relevance_rank or 0)]
        assert got == _brute_force(rows, query, cfg, 12)
        assert any(ep.text_rank for ep in result.episodes), "the text query should match something"
        by_id = {r["id"]: r for r in rows}
        for ep in result.episodes:  # the in-process scores are PostgreSQL's: ts_rank bit for bit
            assert ep.text_score == by_id[ep.id]["text_score"]
            assert ep.distance == pytest.approx(
                1.0 - float(np.dot(by_id[ep.id]["embedding"].to_numpy(), query)), abs=1e-6
            )


def _fresh(db: Database, cfg: RecallConfig, text: str, query: np.ndarray) -> list[int]:
    """The relevant episodes by rank as the brute force computes them from the rows as they are now."""
    return _brute_force(_all_rows(db, text), query, cfg, cfg.top_k)


def _relevant(result: Recall) -> list[int]:
    return [
        ep.id
        for ep in sorted((ep for ep in result.episodes if ep.relevance_rank), key=lambda ep: ep.relevance_rank or 0)
    ]


def test_recall_follows_every_kind_of_change(db: Database, crowd: np.random.Generator) -> None:
    """Insert, supersede, compress, redact-like update and delete: each recall ranks the rows as they are."""
    cfg = RecallConfig(recent_n=3, top_k=12, max_open_items=0, dedup_similarity=2.0, relevant_similarity=-1.0)
    warm = Recaller(db, config=cfg)
    query, text = unit(crowd), "budget invoice hotel"

    def check() -> list[tuple[int, int | None]]:
        result = warm.recall_vector("acme", "u1", text, query, budget_tokens=UNBOUNDED, now=NOW)
        assert _relevant(result) == _fresh(db, cfg, text, query)
        return [(ep.id, ep.relevance_rank) for ep in result.episodes]

    first = check()
    best = next(i for i, r in first if r == 1)
    new = add(db, "Budget invoice hotel budget invoice hotel.", days_ago=1.0, vector=query, importance=1.0)
    assert (new, 1) in check()  # a new episode, closest in both lists
    with db.tenant("acme") as conn:
        conn.execute("UPDATE episodes SET status = 'superseded' WHERE id = %s", (new,))
    assert new not in {i for i, _ in check()}
    with db.tenant("acme") as conn:  # compressed into a super-summary (here: any other episode)
        conn.execute("UPDATE episodes SET compressed_into = %s WHERE id = %s", (new, best))
    assert best not in {i for i, _ in check()}
    with db.tenant("acme") as conn:  # rewritten in place (as redaction does): new text, new vector
        target = one(
            conn.execute(
                "SELECT id FROM episodes WHERE user_id = 'u1' AND status = 'current' "
                "AND compressed_into IS NULL ORDER BY id DESC LIMIT 1"
            )
        )["id"]
        conn.execute(
            "UPDATE episodes SET search_tsv = to_tsvector('english', 'budget invoice hotel'), "
            "embedding = %s WHERE id = %s",
            (query, target),
        )
    assert (target, 1) in check()
    with db.tenant("acme") as conn:
        conn.execute("DELETE FROM episodes WHERE id = %s", (target,))
    assert target not in {i for i, _ in check()}


def test_a_change_committed_after_a_recall_started_is_not_missed(db: Database, crowd: np.random.Generator) -> None:
    """A transaction still open while a recall reads is not seen by it, and is by the next recall once it
    commits, as is a writer of the same user that committed meanwhile."""
    cfg = RecallConfig(recent_n=0, top_k=5, max_open_items=0, dedup_similarity=2.0, relevant_similarity=-1.0)
    warm = Recaller(db, config=cfg)
    query = unit(crowd)
    warm.recall_vector("acme", "u1", "", query, budget_tokens=UNBOUNDED, now=NOW)
    quick: list[int] = []
    with db.tenant("acme") as slow:  # still open while the next recall runs
        late = insert_episode(slow, episode_row("A late writer.", days_ago=2.0, vector=query))
        # A second writer of the user starts meanwhile.
        waiting = threading.Thread(target=lambda: quick.append(add(db, "A quick writer.", days_ago=3.0, vector=query)))
        waiting.start()
        during = warm.recall_vector("acme", "u1", "", query, budget_tokens=UNBOUNDED, now=NOW)
        assert late not in {ep.id for ep in during.episodes}
    waiting.join()
    after = warm.recall_vector("acme", "u1", "", query, budget_tokens=UNBOUNDED, now=NOW)
    ranks = {ep.id: ep.relevance_rank for ep in after.episodes}
    assert (ranks[late], ranks[quick[0]]) == (1, 2)  # the same vector: the more recent first
    assert _relevant(after) == _fresh(db, cfg, "", query)


def test_recall_follows_deletions_and_an_erased_user_who_comes_back(db: Database) -> None:
    """Deleted episodes leave the next recall; so does an erased user's whole history, and a user who comes
    back is recalled with the new history only."""
    cfg = RecallConfig(recent_n=0, top_k=50, max_open_items=0, dedup_similarity=2.0, relevant_similarity=-1.0)
    warm = Recaller(db, config=cfg)
    rng = np.random.default_rng(5)
    query = unit(rng)

    def recalled() -> set[int]:
        got = {ep.id for ep in warm.recall_vector("acme", "u1", "", query, budget_tokens=UNBOUNDED, now=NOW).episodes}
        assert got == set(_fresh(db, cfg, "", query))  # what the brute force finds in the rows
        return got

    before = [add(db, f"Episode {i} before the erasure.", days_ago=i + 1.0, vector=unit(rng)) for i in range(4)]
    assert recalled() == set(before)
    with db.tenant("acme") as conn:
        conn.execute("DELETE FROM episodes WHERE tenant_id = 'acme' AND id = %s", (before[0],))
    assert recalled() == set(before[1:])
    with db.tenant("acme") as conn:  # what `episodes forget` does to what recall reads (sql/privacy.sql)
        assert conn.execute("DELETE FROM episodes WHERE tenant_id = 'acme' AND user_id = 'u1'").rowcount == 3
    back = [add(db, f"Episode {i} after coming back.", days_ago=i + 1.0, vector=unit(rng)) for i in range(8)]
    assert recalled() == set(back)


# ------------------------------------------------------------------------------------------------
# Selection and the block
# ------------------------------------------------------------------------------------------------

HISTORY = [
    (400, "The user planned a hiking trip to the Dolomites in September and asked about mountain huts."),
    (300, "The user compared three accounting tools for her bakery and chose Xero for invoicing."),
    (200, "The user asked how to repot a fiddle-leaf fig whose leaves were turning brown."),
    (30, "The user debugged a failing Python unit test caused by timezone-naive datetimes."),
    (20, "The user drafted a cover letter for a data analyst job at a logistics company."),
    (10, "The user asked for a vegetarian lasagna recipe for eight guests."),
    (5, "The user set up a weekly running plan to prepare for a half marathon in October."),
]


def test_recent_and_relevant_reasons(db: Database, embedder: Embedder) -> None:
    ids = {days: add(db, text, days_ago=days, embedder=embedder) for days, text in HISTORY}
    result = Recaller(db, embedder, RecallConfig(top_k=2, recent_n=2)).recall(
        "acme", "u1", "Which huts should I book for my mountain hike in the Dolomites?", now=NOW
    )
    reasons = {ep.id: ep.reasons for ep in result.episodes}
    assert "relevant" in reasons[ids[400]]
    assert "recent" in reasons[ids[5]] and "recent" in reasons[ids[10]]
    assert ids[200] not in reasons  # neither recent nor among the 2 most relevant
    best = min(result.episodes, key=lambda ep: ep.relevance_rank or 99)
    assert best.id == ids[400] and best.vector_rank == 1 and best.text_rank == 1
    assert [ep.ended_at for ep in result.episodes] == sorted(ep.ended_at for ep in result.episodes)
    by_id = {ep.id: ep for ep in result.episodes}
    assert not by_id[ids[400]].compact
    assert by_id[ids[5]].compact or "relevant" in by_id[ids[5]].reasons


def test_an_unrelated_message_finds_nothing_relevant_and_does_not_pad(db: Database, embedder: Embedder) -> None:
    for days, text in HISTORY:
        if "lasagna" not in text:
            add(db, text, days_ago=days, embedder=embedder)
    recaller = Recaller(db, embedder)
    silent = recaller.recall("acme", "u1", "Can you recommend a good dentist in Lisbon?", now=NOW)
    assert silent.nothing_relevant and silent.episodes
    assert all(ep.reasons == ["recent"] and ep.compact for ep in silent.episodes)  # only the recent lines
    # not padded to 1,500 (the block's header, which explains its reasons and quotes, is ~100 of these)
    assert len(silent.episodes) == recaller.config.recent_n and silent.tokens < 240
    block = silent.render()
    assert "Nothing in this user's history clearly relates to the opening message." in block
    related = recaller.recall("acme", "u1", "Which mountain huts should I book for my Dolomites hike?", now=NOW)
    assert not related.nothing_relevant and "Nothing in this user" not in related.render()
    assert [ep.summary for ep in related.episodes if "relevant" in ep.reasons] == [HISTORY[0][1]]
    for budget in (60, 90, 120):  # the line is counted when fitting
        assert (
            estimate_tokens(recaller.recall("acme", "u1", "dentist in Lisbon?", budget_tokens=budget, now=NOW).render())
            <= budget
        )


def test_budget_is_respected(db: Database) -> None:
    rng = np.random.default_rng(3)
    for i in range(40):
        add(db, " ".join([words(rng, 30)] * 3), days_ago=i, vector=unit(rng))
    recaller = Recaller(db, config=NO_FLOOR)  # random vectors: nothing would clear the floor
    for budget in (60, 120, 300, 800, 1500, 4000):
        result = recaller.recall_vector("acme", "u1", "budget travel", unit(rng), budget_tokens=budget, now=NOW)
        block = result.render()
        assert block and estimate_tokens(block) <= budget
        assert result.tokens == estimate_tokens(block)
    tiny = recaller.recall_vector("acme", "u1", "budget", unit(rng), budget_tokens=5, now=NOW)
    assert tiny.episodes == [] and tiny.render() == ""
    roomy = recaller.recall_vector("acme", "u1", "budget", unit(rng), budget_tokens=1500, now=NOW)
    assert any(ep.compact for ep in roomy.episodes), "recent episodes are shown compactly"
    assert any(not ep.compact for ep in roomy.episodes), "the most relevant ones in full"


def test_a_budget_too_small_for_any_line_never_says_there_is_no_history(db: Database, embedder: Embedder) -> None:
    """Issue 29: at --budget 60 the block said "No earlier sessions with this user." while 3 existed."""
    for days, text in HISTORY[:3]:
        add(db, text, days_ago=days, embedder=embedder)
    recaller = Recaller(db, embedder)
    smallest = minimum_budget(recaller.config)
    assert smallest <= 210  # the figure `episodes recall --help` gives
    for budget in (50, 60, 90, 120, smallest - 1):  # 50: the API's and MCP's least
        result = recaller.recall("acme", "u1", "Which huts for the Dolomites hike?", budget_tokens=budget, now=NOW)
        block = result.render()
        assert estimate_tokens(block) <= budget and "No earlier sessions" not in block, (budget, block)
        if not result.episodes:
            assert block.splitlines()[1] == (
                "3 earlier sessions with this user, but this budget is too small to "
                f"show any: ask with at least {smallest} tokens."
            ), block
    at_least = recaller.recall("acme", "u1", "Which huts for the Dolomites hike?", budget_tokens=smallest, now=NOW)
    assert at_least.episodes and "earlier sessions with this user, but" not in at_least.render()
    nobody = recaller.recall("acme", "nobody", "hi", budget_tokens=60, now=NOW).render()
    assert "No earlier sessions with this user." in nobody  # only when there are none
    for bad in (0, -5):
        with pytest.raises(ValueError, match="at least 1"):
            recaller.recall("acme", "u1", "hi", budget_tokens=bad, now=NOW)


def test_recall_cli_refuses_a_budget_below_one_and_says_when_the_budget_holds_nothing(
    db: Database, embedder: Embedder
) -> None:
    for days, text in HISTORY[:3]:
        add(db, text, days_ago=days, embedder=embedder)

    @click.group(cls=_Group)
    @click.pass_context
    def cli(ctx: click.Context) -> None:
        ctx.obj = Context(False)

    cli.add_command(recall_command)
    runner = CliRunner()
    args = ["recall", "--tenant", "acme", "--user", "u1", "--now", "2025-06-01T12:00:00", "Dolomites?", "--budget"]
    for bad in ("0", "-5"):
        refused = runner.invoke(cli, [*args, bad])
        assert refused.exit_code == 2 and "Invalid value for '--budget'" in refused.output, refused.output
        assert "at least 1" in refused.output
    tiny = runner.invoke(cli, [*args, "10"])
    assert tiny.exit_code == 1 and "--budget 10 is too small" in tiny.output
    assert f"use --budget {minimum_budget(RecallConfig())} or more" in tiny.output
    small = runner.invoke(cli, [*args, "60"])
    assert small.exit_code == 0 and "3 earlier sessions with this user" in small.output, small.output
    assert "No earlier sessions" not in small.output


def test_open_items_are_surfaced(db: Database, embedder: Embedder) -> None:
    holder = add(
        db,
        "The user asked whether the Pro plan includes SSO; the agent promised to check.",
        days_ago=90,
        embedder=embedder,
        events=[
            ("open_question", "Does the Pro plan include SSO?"),
            ("commitment", "The agent will send the SSO pricing sheet."),
            ("decision", "The user chose annual billing."),
        ],
    )
    done = add(
        db,
        "The user asked about export formats; CSV was promised.",
        days_ago=80,
        embedder=embedder,
        events=[("commitment", "The agent will enable CSV export.")],
    )
    with db.tenant("acme") as conn:
        conn.execute("UPDATE episode_events SET status = 'done' WHERE episode_id = %s", (done,))
    for days, text in HISTORY:
        add(db, text, days_ago=days, embedder=embedder)
    # Shown when related to the opening message (or of a recent session); an unrelated message does not
    # open with them (issue 36: every block opened with unrelated open items).
    unrelated = Recaller(db, embedder).recall("acme", "u1", "Any good lasagna recipes?", now=NOW)
    assert unrelated.open_items == [] and "Still open:" not in unrelated.render()
    result = Recaller(db, embedder).recall("acme", "u1", "Can we turn on SSO for the whole team now?", now=NOW)
    assert sorted(i.what for i in result.open_items) == [
        "Does the Pro plan include SSO?",
        "The agent will send the SSO pricing sheet.",
    ]
    block = result.render()
    assert "Still open:" in block and "- open question (user), since 2025-03-03: Does the Pro plan" in block
    assert "CSV export" not in block
    assert "open item" in {ep.id: ep for ep in result.episodes}[holder].reasons


def test_open_items_of_episodes_that_are_not_candidates_are_left_out_however_many(db: Database) -> None:
    """Items are read from episode_events alone, a page at a time, and kept by the user's copy: the open
    items of 20 compressed episodes (more than a page, and newer) and of an episode that ends after the
    recall's moment are left out, and the one of a candidate behind them is still found."""
    rng = np.random.default_rng(5)
    add(
        db,
        "The user asked when the roadmap ships.",
        days_ago=300,
        vector=unit(rng),
        events=[("open_question", "When does the roadmap ship?")],
    )
    crowd = [
        add(
            db,
            f"Webinar session {i}.",
            days_ago=10 + i,
            vector=unit(rng),
            events=[("commitment", f"The agent will send the webinar notes, part {i}.")],
        )
        for i in range(20)
    ]
    assert 20 > page_size(RecallConfig().max_open_items)
    super_id = add(
        db,
        "The webinar sessions of the spring.",
        kind="super",
        days_ago=5,
        vector=unit(rng),
        period=(dt.date(2025, 1, 1), dt.date(2025, 5, 1)),
    )
    with db.tenant("acme") as conn:
        conn.execute("UPDATE episodes SET compressed_into = %s WHERE id = ANY(%s)", (super_id, crowd))
    add(
        db,
        "A session that ends after the recall's moment.",
        days_ago=-1,
        vector=unit(rng),
        events=[("open_question", "Is the webinar recorded?")],
    )
    recaller = Recaller(db)
    for _ in range(2):  # a first recall (a whole read), then one from the warm copy
        result = recaller.recall_vector("acme", "u1", "Remind me about the roadmap.", unit(rng), now=NOW)
        assert [i.what for i in result.open_items] == ["When does the roadmap ship?"]


def test_compressed_episodes_are_replaced_by_their_super_summary(db: Database, embedder: Embedder) -> None:
    old = [
        add(
            db,
            f"In 2023 the user renovated the kitchen, step {i}: cabinets, tiles and lights.",
            days_ago=600 + i,
            embedder=embedder,
        )
        for i in range(3)
    ]
    super_id = add(
        db,
        "During 2023 the user renovated the whole kitchen (cabinets, tiles, lighting).",
        kind="super",
        days_ago=590,
        embedder=embedder,
        period=(dt.date(2023, 1, 1), dt.date(2023, 12, 31)),
    )
    with db.tenant("acme") as conn:
        conn.execute("UPDATE episodes SET compressed_into = %s WHERE id = ANY(%s)", (super_id, old))
    result = Recaller(db, embedder).recall("acme", "u1", "What did we decide about the kitchen tiles?", now=NOW)
    ids = [ep.id for ep in result.episodes]
    assert super_id in ids and not set(old) & set(ids)
    assert "2023-01-01 to 2023-12-31 (relevant, recent), summary of a compressed period:" in result.render()


def test_purpose_filter(db: Database, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(5)
    ids = {
        p: add(db, f"A {p} session about {words(rng, 3)}", purpose=p, vector=unit(rng))
        for p in ("marketing", "support", "billing", "general")
    }
    recaller = Recaller(db, config=NO_FLOOR)

    def seen(purpose: str | None) -> set[str]:
        result = recaller.recall_vector("acme", "u1", "hello", unit(rng), purpose=purpose, now=NOW)
        return {p for p, i in ids.items() if i in {ep.id for ep in result.episodes}}

    assert seen(None) == {"marketing", "support", "billing", "general"}
    assert seen("support") == {"support", "general"}
    mapping = config.parse_purpose_map("support=support,billing; marketing=marketing,general")
    recaller = Recaller(Database(db.settings.with_(purpose_map=mapping), url=db.url), config=NO_FLOOR)
    assert seen("support") == {"support", "billing"}
    assert seen("marketing") == {"marketing", "general"}
    assert seen("sales") == {"general"}


def test_purpose_map_is_validated(monkeypatch: pytest.MonkeyPatch) -> None:
    assert purpose_filter(None) is None
    assert purpose_filter("support") == ["general", "support"]
    assert purpose_filter("support", {"support": ("support", "billing")}) == ["billing", "support"]
    monkeypatch.setenv("EPISODES_PURPOSE_MAP", "support=Support Desk")
    with pytest.raises(ConfigError, match="EPISODES_PURPOSE_MAP"):
        config.load()


def test_isolation_is_enforced_by_the_policy(db: Database) -> None:
    rng = np.random.default_rng(9)
    mine = {add(db, words(rng), tenant="alpha", user="u1", vector=unit(rng)) for _ in range(3)}
    add(db, words(rng), tenant="alpha", user="u2", vector=unit(rng))
    theirs = add(db, words(rng), tenant="beta", user="u1", vector=unit(rng), events=[("commitment", "Beta secret.")])
    result = Recaller(db).recall_vector("alpha", "u1", "budget", unit(rng), now=NOW)
    assert {ep.id for ep in result.episodes} == mine and result.open_items == []
    # Not the WHERE clause: a connection scoped to alpha that asks for beta's rows gets nothing.
    asked = {"tenant_id": "beta", "user_id": "u1", "now": NOW, "purposes": None, "query_text": "beta secret"}
    items = {**asked, "limit": 10, "offset": 0, "grace_seconds": 0, "age_seconds": 0}
    cfg = RecallConfig(relevant_similarity=-1.0)
    with db.tenant("alpha") as conn:
        scored = read_scores(send_scores(conn, query, asked, unit(rng), cfg, [theirs]))
        assert (scored.candidates, scored.scores.ids.tolist()) == (0, [])
        assert conn.execute(query("recall_open_items"), items).fetchall() == []
    with db.tenant("beta") as conn:
        scored = read_scores(send_scores(conn, query, asked, unit(rng), cfg, [theirs]))
        assert (scored.candidates, scored.scores.ids.tolist()) == (1, [theirs])
        assert [r["what"] for r in conn.execute(query("recall_open_items"), items)] == ["Beta secret."]


def test_render_through_the_template(db: Database, embedder: Embedder, shared: None) -> None:
    empty = recall("acme", "nobody", "hi", db=db, now=NOW)
    assert empty.render() == (
        '<previous_episodes as_of="2025-06-01">\nNo earlier sessions with this user.\n</previous_episodes>'
    )
    add(
        db,
        "The user asked for a vegetarian lasagna recipe for eight guests.",
        days_ago=3,
        embedder=embedder,
        purpose="support",
    )
    block = recall("acme", "u1", "lasagna", db=db, now=NOW).render()
    lines = block.splitlines()
    assert lines[0] == '<previous_episodes as_of="2025-06-01">' and lines[-1] == "</previous_episodes>"
    assert "Episodes (oldest first):" in lines
    assert (
        "- 29 May 2025 [support] (relevant, recent): The user asked for a vegetarian lasagna recipe for eight guests."
    ) in lines


def test_recall_cli(db: Database, embedder: Embedder) -> None:
    add(db, "The user asked for a vegetarian lasagna recipe for eight guests.", days_ago=3, embedder=embedder)

    @click.group(cls=_Group)
    @click.pass_context
    def cli(ctx: click.Context) -> None:
        ctx.obj = Context(False)

    cli.add_command(recall_command)
    runner = CliRunner()
    text = runner.invoke(cli, ["recall", "--tenant", "acme", "--user", "u1", "lasagna?", "--budget", "300"])
    assert text.exit_code == 0, text.output
    assert text.output.startswith("<previous_episodes") and "lasagna" in text.output
    out = runner.invoke(cli, ["recall", "--tenant", "acme", "--user", "u1", "lasagna?", "--json"])
    data = json.loads(out.output)
    assert data["episodes"][0]["reasons"] == ["relevant", "recent"] and data["tokens"] <= 1500


def test_template_renders_a_sample_context() -> None:
    """prompts/previous_episodes.j2 on its own: every field it shows, super-summaries and open items."""
    when = dt.datetime(2025, 3, 4, 9, 0, tzinfo=dt.UTC)
    full = RecalledEpisode(
        1,
        "session",
        "s1",
        "support",
        "The user chose annual billing.",
        ["billing", "plans"],
        0.8,
        when,
        when,
        None,
        None,
        0.2,
        0.1,
        0.5,
        1,
        1,
        None,
        1,
        ["relevant"],
    )
    period = RecalledEpisode(
        2,
        "super",
        None,
        "general",
        "All of 2024 in short.",
        [],
        0.5,
        when,
        when,
        dt.date(2024, 1, 1),
        dt.date(2024, 12, 31),
        0.1,
        0.3,
        None,
        2,
        None,
        1,
        None,
        ["recent"],
        compact=True,
        compact_text="All of 2024...",
    )
    item = RecalledOpenItem(9, 1, "commitment", "Send the SSO pricing sheet.", "agent", dt.date(2025, 3, 10), when)
    stale = RecalledOpenItem(8, 1, "open_question", "Is SSO extra?", "user", None, when, stale=True)
    session = RecalledSession("s9", "general", "pending", when, None, "Is the invoice ready?")
    block = render(
        "previous_episodes.j2",
        as_of="2025-06-01",
        episodes=[full, period],
        open_items=[item, stale],
        nothing_relevant=False,
        sessions=[session],
    )
    assert block.splitlines()[0] == '<previous_episodes as_of="2025-06-01">'
    assert "- commitment (agent), due 2025-03-10, since 2025-03-04: Send the SSO pricing sheet." in block
    assert "- 4 March 2025 [support] (relevant): The user chose annual billing. Topics: billing, plans." in block
    assert "- 2024-01-01 to 2024-12-31 (recent), summary of a compressed period: All of 2024..." in block
    assert "- open question (user), since 2025-03-04 (stale, related to the opening message): Is SSO extra?" in block
    assert (
        "Not yet summarised (newest first):\n- 2025-03-04 (still open), the user's last words: Is the invoice" in block
    )


# ------------------------------------------------------------------------------------------------
# recall(): one warm copy per database for the whole process
# ------------------------------------------------------------------------------------------------


@pytest.fixture
def shared(settings: config.Settings) -> Iterator[None]:
    """No shared recaller left by another test; the pools recall() opened close before the drop."""
    close_recallers()
    yield
    close_recallers()


@pytest.fixture
def other_db(admin_url: str, template_db: str, settings: config.Settings) -> Iterator[Database]:
    """A second migrated database on the same server: another URL."""
    name = f"recall_other_{os.getpid()}"
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template_db}"')
    info = psycopg.conninfo.conninfo_to_dict(admin_url)
    info["dbname"] = name
    database = Database(settings.with_(database_url=psycopg.conninfo.make_conninfo("", **info)))
    yield database
    database.close()
    close_recallers()  # recall() may have opened a pool on it
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_recall_keeps_one_recaller_and_pool_per_database(
    db: Database, embedder: Embedder, shared: None, other_db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    for days, text in HISTORY:
        add(db, text, days_ago=days, embedder=embedder)
    message = "Which huts should I book for my mountain hike in the Dolomites?"
    first = recall("acme", "u1", message, now=NOW)  # no db: the environment's DATABASE_URL
    recaller = shared_recaller()
    assert shared_recaller() is recaller and recaller.db is not db
    again = recall("acme", "u1", message, now=NOW)
    through_db = recall("acme", "u1", message, now=NOW, db=db)  # the caller's Database
    assert shared_recaller(db).db is db
    assert first == again == through_db == Recaller(db).recall("acme", "u1", message, now=NOW)

    new = add(db, "The user booked the Lagazuoi hut for the Dolomites hike.", days_ago=1, embedder=embedder)
    later = recall("acme", "u1", message, now=NOW)
    assert new in {ep.id for ep in later.episodes} and later.candidates == len(HISTORY) + 1

    # Another database is another recaller, whether reached through a Database or the environment.
    assert recall("acme", "u1", message, now=NOW, db=other_db).episodes == []
    monkeypatch.setenv("DATABASE_URL", other_db.url)
    elsewhere = shared_recaller()
    assert elsewhere is not recaller and elsewhere.db.url == other_db.url

    pool = recaller.db.pool
    close_recallers()  # closes the pools recall() opened
    assert pool.closed
    monkeypatch.setenv("DATABASE_URL", db.url)
    assert shared_recaller() is not recaller


def test_concurrent_recalls_answer_as_one_at_a_time(db: Database, embedder: Embedder, shared: None) -> None:
    users = ("u1", "u2", "u3")
    for user in users:
        for days, text in HISTORY:
            add(db, text, user=user, days_ago=days, embedder=embedder)
    messages = ("Which huts should I book in the Dolomites?", "Any lasagna tips?", "How is my marathon plan?")
    expected = {(u, m): Recaller(db).recall("acme", u, m, now=NOW) for u in users for m in messages}
    results: list[tuple[tuple[str, str], Recall]] = []
    errors: list[BaseException] = []
    start = threading.Barrier(6)

    def worker(k: int) -> None:
        start.wait()
        try:
            for i in range(9):  # every user and message, half through the environment, half through db
                user, message = users[(k + i) % 3], messages[(k + 2 * i) % 3]
                via = db if (k + i) % 2 else None
                results.append(((user, message), recall("acme", user, message, now=NOW, db=via)))
        except BaseException as exc:  # reported below, in the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == [] and len(results) == 54
    for key, result in results:
        assert result == expected[key], key
