"""Pinned episodes: no decay in recall, never compressed away, never pruned, shown to analysts."""

from __future__ import annotations

import datetime as dt
from functools import partial
from pathlib import Path

import pytest
from click.testing import CliRunner
from support.lifecycle_helpers import RenamedExtractor, load, rows, session

from jobs.cli import cli
from jobs.compress import OfflineCompressor, run_compress
from jobs.db import Database
from jobs.embeddings import Embedder
from jobs.errors import EpisodeNotFound, EpisodesError
from jobs.lifecycle import Selection, pin, unpin
from jobs.lifecycle.resummarize import resummarize
from jobs.recall import Recaller
from jobs.recall.config import RecallConfig
from jobs.report.data import OPERATOR_ROLE, analyst_role
from jobs.summarize import run_summarize

pytestmark = pytest.mark.citus  # runs on one PostgreSQL and on the Citus cluster (conftest)

NOW = dt.datetime(2026, 6, 1, tzinfo=dt.UTC)


def _episode(db: Database, session_id: str) -> int:
    return int(rows(db, "SELECT id FROM episodes WHERE session_id = %s AND status = 'current'", session_id)[0]["id"])


def test_a_pinned_episode_does_not_decay_and_recall_sees_the_pin(
    db: Database, tmp_path: Path, embedder: Embedder
) -> None:
    load(db, tmp_path, [session(i) for i in range(3)], embedder)
    recaller = Recaller(db, embedder)
    target = _episode(db, "acme-u1-0")

    def score() -> float:
        chosen = recaller.recall("acme", "u1", "Does the Snowflake renewal include SSO?", now=NOW).episodes
        return next(e.score for e in chosen if e.id == target)

    before = score()
    assert pin(db, "acme", target).changed
    pinned = score()
    age_s = (NOW - dt.datetime(2024, 3, 1, 10, tzinfo=dt.UTC)).total_seconds()
    cfg = RecallConfig()
    decay = cfg.decay_floor + (1 - cfg.decay_floor) * 0.5 ** (age_s / 86400 / cfg.half_life_days)
    assert pinned == pytest.approx(before / decay, rel=1e-9)
    assert unpin(db, "acme", target).changed
    assert score() == pytest.approx(before, rel=1e-12)


def test_pinned_sources_stay_out_of_super_summaries(db: Database, tmp_path: Path, embedder: Embedder) -> None:
    load(db, tmp_path, [session(i) for i in range(4)], embedder)
    compress = partial(run_compress, db, now=NOW, compressor=OfflineCompressor(embedder), embedder=embedder)
    kept = _episode(db, "acme-u1-0")
    pin(db, "acme", kept)
    assert compress().counts["created"] == 1
    assert rows(db, "SELECT compressed_into FROM episodes WHERE id = %s", kept)[0]["compressed_into"] is None
    assert _lineage(db) == 3
    # Pinning a compressed episode brings it back and rebuilds the super from the others.
    late = _episode(db, "acme-u1-1")
    change = pin(db, "acme", late)
    assert change.rebuilt == "rebuilt"
    assert rows(db, "SELECT compressed_into FROM episodes WHERE id = %s", late)[0]["compressed_into"] is None
    assert _lineage(db) == 2
    # Unpinned, the next compress run takes them in again.
    unpin(db, "acme", kept), unpin(db, "acme", late)
    assert compress().counts["rebuilt"] == 1
    assert _lineage(db) == 4


def _lineage(db: Database) -> int:
    """Sources of the current super-summary."""
    return int(
        rows(
            db,
            "SELECT count(*) AS n FROM episode_lineage l JOIN episodes s "
            "ON s.tenant_id = l.tenant_id AND s.id = l.super_episode_id "
            "WHERE s.status = 'current'",
        )[0]["n"]
    )


def test_pin_survives_resummarising_and_pruning_policies(db: Database, tmp_path: Path, embedder: Embedder) -> None:
    load(db, tmp_path, [session(i) for i in range(2)], embedder)
    old = _episode(db, "acme-u1-0")
    pin(db, "acme", old)
    assert resummarize(db, Selection(), "offline-next").requeued == 2
    run_summarize(db, extractor=RenamedExtractor(embedder), embedder=embedder)
    new = _episode(db, "acme-u1-0")
    assert new != old
    may = rows(
        db,
        "SELECT e.session_id, episodes_may_prune(e) AS may FROM episodes e WHERE status = 'current' "
        "ORDER BY session_id",
    )
    assert [(r["session_id"], r["may"]) for r in may] == [("acme-u1-0", False), ("acme-u1-1", True)]
    with db.admin() as conn, analyst_role(conn, OPERATOR_ROLE):  # what the analyst sees
        view = conn.execute("SELECT session_id, pinned FROM analyst.episode_timeline ORDER BY session_id").fetchall()
    assert [(r["session_id"], r["pinned"]) for r in view] == [("acme-u1-0", True), ("acme-u1-1", False)]
    with pytest.raises(EpisodesError, match=f"superseded by a re-run of its session; pin episode {new} instead"):
        pin(db, "acme", old)


def test_tenant_scoped_errors(db: Database, tmp_path: Path, embedder: Embedder) -> None:
    load(db, tmp_path, [session(0), session(1), session(0, tenant="other")], embedder)
    theirs = _episode(db, "other-u1-0")
    for unknown in (theirs, 10**9):
        with pytest.raises(EpisodeNotFound, match=f"No episode {unknown} in tenant 'acme'"):
            pin(db, "acme", unknown)
        with pytest.raises(EpisodeNotFound):
            unpin(db, "acme", unknown)
    assert rows(db, "SELECT pinned_at FROM episodes WHERE id = %s", theirs)[0]["pinned_at"] is None
    run_compress(db, now=NOW, compressor=OfflineCompressor(embedder), embedder=embedder, tenant="acme")
    super_id = rows(db, "SELECT id FROM episodes WHERE kind = 'super'")[0]["id"]
    with pytest.raises(EpisodesError, match="is a super-summary"):
        pin(db, "acme", super_id)


def test_cli(db: Database, tmp_path: Path, embedder: Embedder) -> None:
    load(db, tmp_path, [session(0)], embedder)
    target = _episode(db, "acme-u1-0")
    runner = CliRunner()
    assert "--episode" in runner.invoke(cli, ["pin", "--help"]).output
    out = runner.invoke(cli, ["pin", "--tenant", "acme", "--episode", str(target)])
    assert out.exit_code == 0 and out.output == f"episode {target} (user u1) pinned\n"
    again = runner.invoke(cli, ["pin", "--tenant", "acme", "--episode", str(target)])
    assert again.output == f"episode {target} was already pinned\n"
    assert runner.invoke(cli, ["unpin", "--tenant", "acme", "--episode", str(target)]).exit_code == 0
    missing = runner.invoke(cli, ["unpin", "--tenant", "zeta", "--episode", str(target)])
    assert missing.exit_code == 1 and missing.output.startswith(f"episodes: No episode {target} in tenant 'zeta'")
