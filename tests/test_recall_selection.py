"""Recall's selection and block: recent and relevant reasons, the budget, open items, super-summaries,
purposes, isolation, the CLI and the template."""

from __future__ import annotations

import datetime as dt
import json

import click
import numpy as np
import pytest
from click.testing import CliRunner
from support.recall_rows import HISTORY, NOW, add, unit, words

from jobs import config
from jobs.cli.base import Context, _Group
from jobs.cli.recall import recall_command
from jobs.db import Database
from jobs.embeddings import Embedder
from jobs.errors import ConfigError
from jobs.prompts import render
from jobs.recall import (
    RecallConfig,
    RecalledEpisode,
    RecalledOpenItem,
    RecalledSession,
    Recaller,
    purpose_filter,
)
from jobs.recall.fitting import minimum_budget
from jobs.recall.open_items import page_size
from jobs.recall.scoring import read_scores, send_scores
from jobs.sql import query
from jobs.tokens import estimate_tokens

pytestmark = pytest.mark.citus  # runs on one PostgreSQL and on the Citus cluster (conftest)


NO_FLOOR = RecallConfig(relevant_similarity=-1.0)  # for random vectors, which clear no floor


# ------------------------------------------------------------------------------------------------
# Selection and the block
# ------------------------------------------------------------------------------------------------


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
