"""The in-process text score is PostgreSQL's ts_rank(search_tsv, q, 1) bit for bit, read through the
per-user copy (search_tf, migration 0013); a copy kept change by change scores exactly as a fresh read."""

from __future__ import annotations

import datetime as dt
import json
import random
from collections.abc import Sequence

import numpy as np
import pytest
from conftest import LOCOMO, NO_LOCOMO

from jobs.db import Database
from jobs.models import EpisodeExtraction
from jobs.recall.index import RecallIndex
from jobs.recall.scoring import epoch_us
from jobs.recall.text_rank import MAX_POSITIONS, query_order
from jobs.store import EpisodeRow, insert_episode

NOW = dt.datetime(2025, 6, 1, tzinfo=dt.UTC)
WORDS = "budget invoice travel hotel python garden piano marathon refund contract kitchen adoption pottery".split()
ODD = [
    "it's",
    "'",
    "''",
    "\\",
    "a\\b",
    "o'neil\\",
    "é",
    "e\u0301",
    "ß",
    "日本",
    "naïve",
    "🙂",
    "a b",
    "x:1",
    "a",
    "ab",
    "abc",
    "abd",
    "b",
    "B",
    "z",
    "zz",
    "über",
    "ü",
    "café",
]


def _insert(db: Database, user: str, summary: str, days_ago: float, rng: np.random.Generator) -> int:
    ended = NOW - dt.timedelta(days=days_ago)
    vector = rng.standard_normal(384).astype(np.float32)
    row = EpisodeRow(
        tenant_id="acme",
        user_id=user,
        kind="session",
        session_id=f"{user}-{rng.integers(1 << 40)}",
        episode=EpisodeExtraction(summary=summary, topic_tags=[], importance=0.5, key_events=[]),
        started_at=ended,
        ended_at=ended,
        model="test",
        prompt_version="t1",
        embedding=vector,
    )
    with db.tenant("acme") as conn:
        return insert_episode(conn, row)


def _quote(lexeme: str) -> str:
    return "'" + lexeme.replace("\\", "\\\\").replace("'", "''") + "'"


def _copy_scores(index: RecallIndex, db: Database, lexemes: Sequence[str]) -> dict[int, int]:
    """The copy's ts_rank of u1's episodes for an OR query of ``lexemes``, as float32 bits (absent: no match)."""
    with db.tenant("acme") as conn, index.user(conn, "acme", "u1", "") as (copy, _):
        s = copy.scores(np.ones(384, np.float32), [lex.encode() for lex in lexemes], epoch_us(NOW), None)
    return {
        int(i): int(t) for i, t, ok in zip(s.ids, s.text.astype(np.float32).view(np.uint32), ~np.isnan(s.text)) if ok
    }


def _server_scores(db: Database, lexemes: Sequence[str]) -> dict[int, int]:
    """PostgreSQL's ts_rank(search_tsv, 'l1' | 'l2' ..., 1) of u1's matching episodes, as float32 bits."""
    with db.tenant("acme") as conn:
        rows = conn.execute(
            "SELECT id, ts_rank(search_tsv, %(q)s::tsquery, 1) AS r FROM episodes WHERE user_id = 'u1' "
            "AND status = 'current' AND compressed_into IS NULL AND search_tsv @@ %(q)s::tsquery",
            {"q": " | ".join(_quote(lex) for lex in lexemes)},
        ).fetchall()
    return {r["id"]: int(np.array([r["r"]], np.float32).view(np.uint32)[0]) for r in rows}


def _assert_equal(db: Database, queries: Sequence[Sequence[str]]) -> int:
    index = RecallIndex(384)
    compared = 0
    for lexemes in queries:
        got, want = _copy_scores(index, db, lexemes), _server_scores(db, lexemes)
        assert got == want, lexemes
        compared += len(want)
    return compared


@pytest.mark.skipif(not (LOCOMO / "26.json").is_file(), reason=NO_LOCOMO)
def test_locomo_summaries_rank_as_on_the_server(db: Database) -> None:
    rng = np.random.default_rng(1)
    data = json.loads((LOCOMO / "26.json").read_text())
    summaries = [v for k, v in data.items() if k.endswith("_summary") and v]
    for i, text in enumerate(summaries):
        _insert(db, "u1", text[:1200], i, rng)
    with db.tenant("acme") as conn:
        queries = [
            conn.execute("SELECT tsvector_to_array(to_tsvector('english', %s)) AS l", (qa["question"],)).fetchone()["l"]
            for qa in data["qa"][:150]
        ]
    assert _assert_equal(db, [q for q in queries if q]) > 500


def test_random_vectors_rank_as_on_the_server(db: Database) -> None:
    """Up to 256 positions a lexeme (a tsvector's most), lexemes without positions, odd lexemes, duplicates."""
    rng, pick = np.random.default_rng(2), random.Random(2)
    pool = WORDS + ODD
    ids = [_insert(db, "u1", "placeholder", i, rng) for i in range(60)]
    with db.tenant("acme") as conn:
        for n, episode in enumerate(ids):
            lexemes = pick.sample(pool, pick.randint(1, 8))
            parts = []
            for k, lex in enumerate(lexemes):
                count = MAX_POSITIONS if n % 7 == 0 and k == 0 else pick.choice([0, 1, 1, 2, 3, 5, 40])
                positions = ",".join(str(p) for p in sorted(pick.sample(range(1, 2000), count)))
                parts.append(_quote(lex) + (":" + positions if positions else ""))
            conn.execute("UPDATE episodes SET search_tsv = %s::tsvector WHERE id = %s", (" ".join(parts), episode))
    queries = [pick.choices(pool, k=pick.randint(1, 6)) for _ in range(80)]
    assert _assert_equal(db, queries) > 200


def test_query_order_is_the_servers(db: Database) -> None:
    """The server sorts a tsvector's lexemes as SortAndUniqItems sorts a query's: the same comparison."""
    with db.tenant("acme") as conn:
        stored = conn.execute(
            "SELECT tsvector_to_array(%s::tsvector) AS l", (" ".join(_quote(x) for x in ODD),)
        ).fetchone()["l"]
    assert [x.encode() for x in stored] == query_order([x.encode() for x in ODD + ODD[:5]])
    assert query_order([b"b", b"ab", b"a", b"abc", b"a"]) == [b"a", b"ab", b"abc", b"b"]


def test_a_copy_built_change_by_change_scores_exactly_as_a_fresh_read(db: Database) -> None:
    rng = np.random.default_rng(5)
    for _ in range(200):
        _insert(db, "u1", " ".join(rng.choice(WORDS, int(rng.integers(3, 12)))), float(rng.uniform(1, 900)), rng)
    kept = RecallIndex(384)
    message = ["hotel", "budget", "refund", "marathon", "potteri"]
    _copy_scores(kept, db, message)
    for _ in range(6):  # new episodes, rewritten text, superseded and compressed ones, read as they come
        for _ in range(15):
            _insert(db, "u1", " ".join(rng.choice(WORDS, int(rng.integers(3, 12)))), float(rng.uniform(0, 900)), rng)
        with db.tenant("acme") as conn:
            ids = [
                r["id"]
                for r in conn.execute(
                    "SELECT id FROM episodes WHERE user_id = 'u1' AND status = 'current' AND compressed_into IS NULL "
                    "ORDER BY random() LIMIT 3"
                )
            ]
            conn.execute(
                "UPDATE episodes SET search_tsv = to_tsvector('english', %s) WHERE id = %s",
                (" ".join(rng.choice(WORDS, 20)), ids[0]),
            )
            conn.execute("UPDATE episodes SET status = 'superseded' WHERE id = %s", (ids[1],))
            conn.execute("UPDATE episodes SET compressed_into = %s WHERE id = %s", (ids[0], ids[2]))
        assert (
            _copy_scores(kept, db, message)
            == _copy_scores(RecallIndex(384), db, message)
            == _server_scores(db, message)
        )
    assert kept.full_reads == 1, "everything after the first read was read as changes"


def test_search_tf_is_kept_and_read_for_rows_written_before_it(db: Database) -> None:
    """The trigger keeps search_tf in step with search_tsv; a row without it (migration 0013 on an existing
    table) is read with the counts computed on the server, so it scores the same."""
    rng = np.random.default_rng(9)
    for i in range(20):
        _insert(db, "u1", " ".join(rng.choice(WORDS, 8)), i, rng)
    odd = _insert(db, "u1", "A budget of sorts.", 0.5, rng)
    with db.tenant("acme") as conn:
        conn.execute(
            "UPDATE episodes SET search_tsv = $$'budget':1,4,9 'hotel' 'café':2A$$::tsvector WHERE id = %s", (odd,)
        )
        rows = conn.execute(
            "SELECT search_tf, (SELECT array_agg(coalesce(cardinality(positions), 1) - 1) "
            "FROM unnest(search_tsv)) AS expected FROM episodes"
        ).fetchall()
    assert all(list(r["search_tf"]) == r["expected"] for r in rows)
    message = ["budget", "hotel", "café", "piano"]
    before = _copy_scores(RecallIndex(384), db, message)
    with db.admin() as conn:  # as before the migration: no stored counts (bypassing the trigger)
        conn.execute("ALTER TABLE episodes DISABLE TRIGGER episodes_keep_search_tf")
        conn.execute("UPDATE episodes SET search_tf = NULL")
        conn.execute("ALTER TABLE episodes ENABLE TRIGGER episodes_keep_search_tf")
    assert _copy_scores(RecallIndex(384), db, message) == before
    assert odd in before
