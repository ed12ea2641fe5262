"""The text score (BM25 over the user's own episodes, jobs/recall/bm25.py): its properties, its
isolation from other users, and that a copy kept change by change scores exactly as a fresh read."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pytest

from jobs.db import Database
from jobs.models import EpisodeExtraction
from jobs.recall import bm25
from jobs.recall.index import RecallIndex
from jobs.recall.scoring import epoch_us
from jobs.store import EpisodeRow, insert_episode

NOW = dt.datetime(2025, 6, 1, tzinfo=dt.UTC)
WORDS = "budget invoice travel hotel python garden piano marathon refund contract kitchen adoption pottery".split()


def posting(slots: list[int], tf: list[int]) -> bm25.Posting:
    return np.array(slots, np.int64), np.array(tf, np.uint8)


def test_a_rare_term_outweighs_a_common_one() -> None:
    alive, lengths = np.ones(10, bool), np.full(10, 8, np.int64)
    common = posting(list(range(9)), [1] * 9)  # in 9 of 10 episodes
    rare = posting([9], [1])  # in one
    scores = bm25.scores([common, rare], alive, lengths)
    assert scores[9] > 2 * scores[0]
    assert bm25.scores([rare], alive, lengths)[9] == pytest.approx(1.0)  # the unit: the rarest possible match


def test_repeated_terms_saturate() -> None:
    alive, lengths = np.ones(4, bool), np.full(4, 40, np.int64)
    scores = bm25.scores([posting([0, 1, 2, 3], [1, 2, 4, 40])], alive, lengths)
    gains = np.diff(scores)
    assert (gains > 0).all() and gains[0] > gains[1] / 2 > 0  # each doubling adds less
    assert scores[3] < (bm25.K1 + 1) * scores[0]  # bounded, however often it repeats


def test_longer_documents_are_normalised() -> None:
    alive, lengths = np.ones(3, bool), np.array([5, 20, 80], np.int64)
    scores = bm25.scores([posting([0, 1, 2], [2, 2, 2])], alive, lengths)
    assert scores[0] > scores[1] > scores[2]


def test_replaced_versions_do_not_count() -> None:
    """A dead slot neither scores nor counts in N, df or the mean length."""
    lengths = np.array([6, 6, 6, 60], np.int64)
    p = posting([0, 3], [1, 1])
    with_dead = bm25.scores([p], np.array([True, True, True, False]), lengths)
    without = bm25.scores([posting([0], [1])], np.ones(3, bool), lengths[:3])
    assert np.isnan(with_dead[3]) and with_dead[0] == without[0]
    assert np.isnan(with_dead[1])  # no match: no score at all, not 0


def _insert(db: Database, user: str, summary: str, days_ago: float, rng: np.random.Generator) -> int:
    ended = NOW - dt.timedelta(days=days_ago)
    vector = rng.standard_normal(384).astype(np.float32)
    row = EpisodeRow(tenant_id="acme", user_id=user, kind="session", session_id=f"{user}-{rng.integers(1 << 40)}",
                     episode=EpisodeExtraction(summary=summary, topic_tags=[], importance=0.5, key_events=[]),
                     started_at=ended, ended_at=ended, model="test", prompt_version="t1", embedding=vector)
    with db.tenant("acme") as conn:
        return insert_episode(conn, row)


def _text(index: RecallIndex, db: Database, user: str, message: str) -> dict[int, float]:
    """The user's copy brought up to date; BM25 by episode id, as raw bits (NaN == NaN)."""
    with db.tenant("acme") as conn, index.user(conn, "acme", user, message) as (copy, lexemes):
        s = copy.scores(np.ones(384, np.float32), lexemes, epoch_us(NOW), None)
    return dict(zip(s.ids.tolist(), s.text.view(np.int64).tolist()))


def test_a_users_score_does_not_depend_on_other_users_rows(db: Database) -> None:
    rng = np.random.default_rng(3)
    for i in range(30):
        _insert(db, "u1", " ".join(rng.choice(WORDS, 6)), i, rng)
    message = "budget for the adoption and the piano"
    before = _text(RecallIndex(384), db, "u1", message)
    for i in range(200):  # another user who talks of nothing but adoption
        _insert(db, "u2", "adoption adoption agency adoption", i, rng)
    assert _text(RecallIndex(384), db, "u1", message) == before
    assert any(not np.isnan(np.int64(v).view(np.float64)) for v in before.values())


def test_a_copy_built_change_by_change_scores_exactly_as_a_fresh_read(db: Database) -> None:
    rng = np.random.default_rng(5)
    for i in range(200):
        _insert(db, "u1", " ".join(rng.choice(WORDS, int(rng.integers(3, 12)))), float(rng.uniform(1, 900)), rng)
    kept = RecallIndex(384)
    message = "hotel budget refund for the marathon and pottery"
    _text(kept, db, "u1", message)
    for batch in range(6):  # new episodes, rewritten text, superseded and compressed ones, read as they come
        for _ in range(15):
            _insert(db, "u1", " ".join(rng.choice(WORDS, int(rng.integers(3, 12)))), float(rng.uniform(0, 900)), rng)
        with db.tenant("acme") as conn:
            ids = [r["id"] for r in conn.execute(
                "SELECT id FROM episodes WHERE user_id = 'u1' AND status = 'current' AND compressed_into IS NULL "
                "ORDER BY random() LIMIT 3")]
            conn.execute("UPDATE episodes SET search_tsv = to_tsvector('english', %s) WHERE id = %s",
                         (" ".join(rng.choice(WORDS, 20)), ids[0]))
            conn.execute("UPDATE episodes SET status = 'superseded' WHERE id = %s", (ids[1],))
            conn.execute("UPDATE episodes SET compressed_into = %s WHERE id = %s", (ids[0], ids[2]))
        assert _text(kept, db, "u1", message) == _text(RecallIndex(384), db, "u1", message)
    assert kept.full_reads == 1, "everything after the first read was read as changes"


def test_search_tf_is_kept_and_read_for_rows_written_before_it(db: Database) -> None:
    """The trigger keeps search_tf in step with search_tsv; a row without it (migration 0012 on an existing
    table) is read with the frequencies computed on the server, so it scores the same."""
    rng = np.random.default_rng(9)
    for i in range(20):
        _insert(db, "u1", " ".join(rng.choice(WORDS, 8)), i, rng)
    odd = _insert(db, "u1", "A budget of sorts.", 0.5, rng)
    with db.tenant("acme") as conn:
        conn.execute("UPDATE episodes SET search_tsv = $$'budget':1,4,9 'hotel' 'café':2A$$::tsvector "
                     "WHERE id = %s", (odd,))
        rows = conn.execute("SELECT search_tf, (SELECT array_agg(coalesce(cardinality(positions), 1)) "
                            "FROM unnest(search_tsv)) AS expected FROM episodes").fetchall()
    assert all(list(r["search_tf"]) == r["expected"] for r in rows)
    message = "budget hotel café piano"
    before = _text(RecallIndex(384), db, "u1", message)
    with db.admin() as conn:  # as before the migration: no stored frequencies (bypassing the trigger)
        conn.execute("ALTER TABLE episodes DISABLE TRIGGER episodes_keep_search_tf")
        conn.execute("UPDATE episodes SET search_tf = NULL")
        conn.execute("ALTER TABLE episodes ENABLE TRIGGER episodes_keep_search_tf")
    assert _text(RecallIndex(384), db, "u1", message) == before
