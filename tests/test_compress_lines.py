"""A compressed session's lines are still quoted, under its super-summary (issue 47, "Compression keeps the facts").

The line search reads the lines of the sessions a super holds, chosen by their own scores as a candidate's are, and
quotes them under the super, each dated by its own session: a compressed period costs recall what its sessions did
(a super is one episode, and its period's every line at once took a heavy user's recall from 110 ms to 1.12 s,
bench/compressed_recall.py). The compress job still copies the lines under the super (sql/compress.sql
compress_copy_lines); a re-run changes nothing, a rebuild replaces the copies, and an erasure takes them with it.
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
    copied = lines_of(db, sup["id"])
    assert [text for _, text, _ in copied] == [
        "We moved staging to three nodes.",
        "Three nodes it is.",
        SECRET,
        "Noted, every 45 days.",
        "The staging bill was 310 dollars.",
    ]
    assert [o for o, _, _ in copied] == list(range(5))
    # An undated line takes its own session's start, never the period's.
    assert copied[2][2] == dt.datetime(2024, 6, 10, 9, 40, tzinfo=dt.UTC)

    result = Recaller(db, embedder).recall("acme", "u1", QUESTION, budget_tokens=1500, now=NOW)
    assert not set(ids[:3]) & {ep.id for ep in result.episodes}  # the sources stay out of recall
    shown = next(ep for ep in result.episodes if ep.id == sup["id"])
    assert any(SECRET in line.text for line in shown.lines)
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


def test_rerunning_compress_leaves_the_lines_as_they_are_and_a_rebuild_replaces_them(
    db: Database, embedder: Embedder
) -> None:
    history(db, embedder)
    compress(db, embedder)
    (first,) = supers(db)
    before = lines_of(db, first["id"])
    assert len(before) == 5
    assert compress(db, embedder)["unchanged"] == 1
    assert lines_of(db, first["id"]) == before and secret_lines(db) == 2  # the source's line and one copy

    forced = rebuild_period(
        db, "acme", "u1", *YEAR_2024, compressor=OfflineCompressor(embedder), embedder=embedder, force=True
    )
    assert forced == "rebuilt"
    (second,) = supers(db)
    assert second["id"] != first["id"] and [s["id"] for s in supers(db, "superseded")] == [first["id"]]
    assert lines_of(db, second["id"]) == before and lines_of(db, first["id"]) == []
    assert secret_lines(db) == 2


def test_forgetting_the_session_removes_the_line_copied_into_the_super(db: Database, embedder: Embedder) -> None:
    ids = history(db, embedder)
    compress(db, embedder)
    (sup,) = supers(db)
    assert SECRET in [text for _, text, _ in lines_of(db, sup["id"])]
    forget_episode(db, "acme", ids[1], compressor=OfflineCompressor(embedder), embedder=embedder)
    assert secret_lines(db) == 0
    (rebuilt,) = supers(db)
    assert [text for _, text, _ in lines_of(db, rebuilt["id"])] == [
        "We moved staging to three nodes.",
        "Three nodes it is.",
        "The staging bill was 310 dollars.",
    ]
    result = Recaller(db, embedder).recall("acme", "u1", QUESTION, budget_tokens=1500, now=NOW)
    assert "Zephyrine" not in result.render()


def test_forgetting_the_user_removes_every_copied_line(db: Database, embedder: Embedder) -> None:
    history(db, embedder)
    history(db, embedder, user="u2")
    compress(db, embedder)
    mine = [s["id"] for s in supers(db) if s["user_id"] == "u1"]
    assert len(mine) == 1 and len(lines_of(db, mine[0])) == 5
    forget_user(db, "acme", "u1")
    with db.admin() as conn:
        left = conn.execute("SELECT user_id, count(*) AS n FROM episode_lines GROUP BY user_id ORDER BY 1").fetchall()
    assert [(r["user_id"], r["n"]) for r in left] == [("u2", 11)]  # u2's 6 lines and their 5 copies
    assert lines_of(db, mine[0]) == []
