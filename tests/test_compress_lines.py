"""A compressed session's lines are still quoted, under its super-summary (issue 47, "Compression keeps the facts").

The line search reads the lines of the sessions a super holds, chosen by their own scores as a candidate's are, and
quotes them under the super, each dated by its own session: a compressed period costs recall what its sessions did.
Until migration 0041 the compress job copied them under the super, one episode holding its period's every line, and
the line search read them all whenever it picked it (a heavy user's recall 110 ms -> 1.12 s,
bench/compressed_recall.py). A re-run or a rebuild leaves the sessions' lines as they are; an erasure takes them.
"""

from __future__ import annotations

import datetime as dt

import pytest
from support.compress_data import supers

from jobs.compress import OfflineCompressor, rebuild_period, run_compress
from jobs.db import Database, one
from jobs.embeddings import Embedder
from jobs.embeddings.protocol import embed_queries
from jobs.models import EpisodeExtraction, search_text
from jobs.recall import Recaller
from jobs.recall.config import RecallConfig
from jobs.recall.scoring import line_episodes, read_scores, send_scores
from jobs.rights.erase_episode import forget_episode
from jobs.rights.forget import forget_user
from jobs.store import EpisodeLine, EpisodeRow, insert_episode

pytestmark = pytest.mark.citus  # runs on one PostgreSQL and on the Citus cluster (conftest)

NOW = dt.datetime(2026, 11, 21, 12, 0, tzinfo=dt.UTC)
YEAR_2024 = (dt.date(2024, 1, 1), dt.date(2024, 12, 31))
SECRET = "The Zephyrine cluster rotates its staging credentials every 45 days."
QUESTION = "How often does the Zephyrine cluster rotate its staging credentials?"


def session(
    db: Database, embedder: Embedder, ended: str, summary: str, said: list[tuple[str, str]], *, user: str = "u1"
) -> int:
    """One session episode of ``user`` keeping ``said`` as its lines (the Zephyrine line undated)."""
    end = dt.datetime.fromisoformat(ended).replace(tzinfo=dt.UTC)
    episode = EpisodeExtraction(summary=summary, topic_tags=["infra"], importance=0.5, key_events=[], entities=[])
    lines = [
        EpisodeLine(i, speaker, None if "Zephyrine" in text else end - dt.timedelta(minutes=5), text)
        for i, (speaker, text) in enumerate(said)
    ]
    row = EpisodeRow(
        tenant_id="acme",
        user_id=user,
        kind="session",
        episode=episode,
        started_at=end - dt.timedelta(minutes=20),
        ended_at=end,
        model="test",
        prompt_version="test",
        purpose="support",
        session_id=f"{user}-{ended}",
        embedding=embedder.embed([search_text(episode)])[0],
        lines=lines,
        line_vectors=embedder.embed([t for _, t in said]),
    )
    with db.tenant("acme") as conn:
        return insert_episode(conn, row)


def history(db: Database, embedder: Embedder, user: str = "u1") -> list[int]:
    """Three 2024 sessions (the middle one alone holds the Zephyrine line) and a recent one."""
    return [
        session(
            db,
            embedder,
            "2024-02-03T10:00",
            "Maria set up the staging cluster.",
            [
                ("user", "We moved staging to three nodes."),
                ("assistant", "Three nodes it is."),
            ],
            user=user,
        ),
        session(
            db,
            embedder,
            "2024-06-10T10:00",
            "Maria talked about staging security.",
            [
                ("user", SECRET),
                ("assistant", "Noted, every 45 days."),
            ],
            user=user,
        ),
        session(
            db,
            embedder,
            "2024-11-20T10:00",
            "Maria reviewed the staging bill.",
            [
                ("user", "The staging bill was 310 dollars."),
            ],
            user=user,
        ),
        session(
            db,
            embedder,
            "2026-11-01T10:00",
            "Maria set up webhooks.",
            [
                ("user", "Please add a webhook for invoices."),
            ],
            user=user,
        ),
    ]


def compress(db: Database, embedder: Embedder) -> dict[str, int]:
    report = run_compress(db, compressor=OfflineCompressor(embedder), embedder=embedder, now=NOW)
    return dict(report.counts)


def lines_of(db: Database, episode_id: int) -> list[tuple[int, str, dt.datetime | None]]:
    with db.admin() as conn:
        return [
            (r["ordinal"], r["text"], r["said_at"])
            for r in conn.execute(
                "SELECT ordinal, text, said_at FROM episode_lines WHERE episode_id = %s ORDER BY ordinal", (episode_id,)
            )
        ]


def secret_lines(db: Database) -> int:
    with db.admin() as conn:
        return int(one(conn.execute("SELECT count(*) AS n FROM episode_lines WHERE text LIKE '%%Zephyrine%%'"))["n"])


def test_recall_quotes_a_compressed_sessions_line_under_the_super_with_its_own_date(
    db: Database, embedder: Embedder
) -> None:
    ids = history(db, embedder)
    assert compress(db, embedder)["created"] == 1
    (sup,) = supers(db)
    assert lines_of(db, sup["id"]) == []  # no copy: the sessions keep their own lines (migration 0041)
    assert [len(lines_of(db, i)) for i in ids[:3]] == [2, 2, 1]

    result = Recaller(db, embedder).recall("acme", "u1", QUESTION, budget_tokens=1500, now=NOW)
    assert not set(ids[:3]) & {ep.id for ep in result.episodes}  # the sources stay out of recall
    shown = next(ep for ep in result.episodes if ep.id == sup["id"])
    (secret,) = [line for line in shown.lines if SECRET in line.text]
    # An undated line is dated by its own session (it ended on 10 June 2024), never by the period.
    assert secret.said_at is not None and secret.said_at.date() == dt.date(2024, 6, 10)
    block = result.render()
    assert f"[10 June 2024] {SECRET}" in block and "2024-01-01 to 2024-12-31" in block


def test_the_line_search_reads_the_sessions_a_super_holds_not_the_supers_copies(
    db: Database, embedder: Embedder
) -> None:
    """The line search's bound holds after compression: with one episode closest and one best by words, it reads at
    most two sessions' own lines, never the super's copy of every line of the period; with the default bound the
    answer is found in its session and quoted under the super."""
    ids = history(db, embedder)
    compress(db, embedder)
    (sup,) = supers(db)
    cfg = RecallConfig(line_episodes=1)
    params = {"tenant_id": "acme", "user_id": "u1", "now": NOW, "purposes": None, "query_text": QUESTION}
    with db.tenant_read("acme") as (conn, sql, _):
        scored = read_scores(send_scores(conn, sql, params, embed_queries(embedder, [QUESTION])[0], cfg, set()))
    searched = line_episodes(scored.lines, cfg)
    assert sup["id"] not in searched and set(searched) <= set(ids) and 1 <= len(searched) <= 2
    assert scored.super_of and set(scored.super_of) <= set(ids[:3]) and set(scored.super_of.values()) == {sup["id"]}
    assert sup["id"] in scored.scores.ids and not set(ids[:3]) & set(scored.scores.ids.tolist())  # fusion: the super

    result = Recaller(db, embedder).recall("acme", "u1", QUESTION, budget_tokens=1500, now=NOW)
    shown = next(ep for ep in result.episodes if ep.id == sup["id"])
    assert sum(SECRET in line.text for line in shown.lines) == 1  # quoted once, from its session's own lines
    assert f"[10 June 2024] {SECRET}" in result.render()


def test_a_rerun_and_a_rebuild_leave_the_sessions_lines_as_they_are(db: Database, embedder: Embedder) -> None:
    ids = history(db, embedder)
    compress(db, embedder)
    (first,) = supers(db)
    before = [lines_of(db, i) for i in ids]
    assert compress(db, embedder)["unchanged"] == 1
    assert [lines_of(db, i) for i in ids] == before and secret_lines(db) == 1  # the session's own line, no copy

    forced = rebuild_period(
        db, "acme", "u1", *YEAR_2024, compressor=OfflineCompressor(embedder), embedder=embedder, force=True
    )
    assert forced == "rebuilt"
    (second,) = supers(db)
    assert second["id"] != first["id"] and [s["id"] for s in supers(db, "superseded")] == [first["id"]]
    assert [lines_of(db, i) for i in ids] == before and lines_of(db, second["id"]) == [] and secret_lines(db) == 1
    result = Recaller(db, embedder).recall("acme", "u1", QUESTION, budget_tokens=1500, now=NOW)
    shown = next(ep for ep in result.episodes if ep.id == second["id"])
    assert any(SECRET in line.text for line in shown.lines)


def test_forgetting_the_session_removes_its_lines_from_the_rebuilt_super(db: Database, embedder: Embedder) -> None:
    ids = history(db, embedder)
    compress(db, embedder)
    assert secret_lines(db) == 1
    forget_episode(db, "acme", ids[1], compressor=OfflineCompressor(embedder), embedder=embedder)
    assert secret_lines(db) == 0
    (rebuilt,) = supers(db)
    result = Recaller(db, embedder).recall("acme", "u1", QUESTION, budget_tokens=1500, now=NOW)
    shown = next(ep for ep in result.episodes if ep.id == rebuilt["id"])
    assert "Zephyrine" not in result.render()
    assert {line.text.split("] ")[-1] for line in shown.lines} <= {
        "We moved staging to three nodes.",
        "Three nodes it is.",
        "The staging bill was 310 dollars.",
    }


def test_forgetting_the_user_removes_every_line(db: Database, embedder: Embedder) -> None:
    history(db, embedder)
    history(db, embedder, user="u2")
    compress(db, embedder)
    forget_user(db, "acme", "u1")
    with db.admin() as conn:
        left = conn.execute("SELECT user_id, count(*) AS n FROM episode_lines GROUP BY user_id ORDER BY 1").fetchall()
    assert [(r["user_id"], r["n"]) for r in left] == [("u2", 6)]  # u2's 6 lines (a super keeps no copy)
