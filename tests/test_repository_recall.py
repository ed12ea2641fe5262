"""Recall at session start knows the git history (issue 49): real hook processes, real git, offline summaries.

A decision made on ``feat/a`` reaches a session on ``main`` only as "pending on `feat/a`" until the
branch is merged, then in force; a commitment made on ``feat/b`` is pending, and once ``feat/b`` is
deleted unmerged it closes as stale (status n/a) and is no longer listed; an unrelated repository with
the same folder name sees none of it.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.claude_code_cli import DECISION
from support.git_repos import commit, git, new_repo, scene
from support.repository_hooks import end_session as _end
from support.repository_hooks import start_session as _start

from jobs.db import Database
from jobs.report import analyst_connection
from jobs.resources import sql_dir

PROMISE = "I will write the migration guide for the release by Friday."


def _by_branch(db: Database) -> dict[str, str]:
    """What analysts see: each decision's branch and its state (analyst.decisions_by_branch)."""
    with analyst_connection(db, "acme") as conn:
        rows = conn.execute("SELECT branch, branch_state FROM analyst.decisions_by_branch").fetchall()
    return {r["branch"]: r["branch_state"] for r in rows}


def _promise_status(db: Database) -> list[str]:
    with db.tenant("acme") as conn:
        rows = conn.execute("SELECT status FROM episode_events WHERE type = 'commitment' ORDER BY id").fetchall()
    return [r["status"] for r in rows]


@pytest.mark.citus
def test_a_branchs_decision_is_pending_until_merged_and_a_deleted_branchs_commitment_goes_stale(
    tmp_path: Path, db: Database
) -> None:
    repos = scene(tmp_path)
    commit(repos.wt_a, "a.txt")
    _end(db, "sess-a", repos.wt_a, DECISION, tmp_path)

    before = _start(db, "start-1", repos.main)
    assert "pending on `feat/a`" in before, before
    assert "pgvector" not in before.lower(), before  # not in force on main yet
    assert _by_branch(db) == {"feat/a": "pending"}
    in_a = _start(db, "start-2", repos.wt_a)
    assert "pgvector" in in_a.lower() and "pending on" not in in_a, in_a  # in force on its own branch

    git(repos.main, "merge", "-q", "--no-edit", "feat/a")
    after = _start(db, "start-3", repos.main)
    assert "pgvector" in after.lower() and "pending on" not in after, after
    assert _by_branch(db) == {"feat/a": "in force"}
    clone = _start(db, "start-4", repos.clone)  # the clone shares the memory (its origin is main's folder)
    assert "pending on `feat/a`" in clone or "pgvector" in clone.lower(), clone

    commit(repos.wt_b, "b.txt")
    _end(db, "sess-b", repos.wt_b, PROMISE, tmp_path)
    assert _promise_status(db) == ["open"], "the offline extractor records the promise as a commitment"
    pending = _start(db, "start-5", repos.main)
    assert "pending on `feat/b`" in pending and "migration guide" not in pending, pending

    git(repos.main, "worktree", "remove", "--force", str(repos.wt_b))
    git(repos.main, "branch", "-q", "-D", "feat/b")
    stale = _start(db, "start-6", repos.main)
    assert "migration guide" not in stale and "pending on" not in stale, stale
    assert "pgvector" in stale.lower()
    assert _promise_status(db) == ["n/a"]  # closed through the open-items lifecycle
    with analyst_connection(db, "acme") as conn:
        query = (sql_dir() / "queries" / "decisions_by_branch_state.sql").read_text(encoding="utf-8")
        rows = conn.execute(query).fetchall()
    with db.tenant("acme") as conn:
        branches = conn.execute("SELECT branch, state FROM repository_branches ORDER BY branch").fetchall()
    assert [(r["branch_state"], r["decisions"]) for r in rows] == [("in force", 1)]
    assert [(b["branch"], b["state"]) for b in branches] == [("feat/a", "merged"), ("feat/b", "deleted")]

    unrelated = new_repo(tmp_path / "elsewhere" / "app")
    assert _start(db, "start-7", unrelated) == ""  # same folder name, another repository: nothing of it


@pytest.mark.citus
def test_a_pending_branchs_decision_never_marks_an_in_force_one_as_replaced(tmp_path: Path, db: Database) -> None:
    repos = scene(tmp_path)
    _end(db, "sess-main", repos.main, DECISION, tmp_path)
    commit(repos.wt_a, "a.txt")
    _end(db, "sess-a", repos.wt_a, "We decided to switch the memory store to SQLite after all.", tmp_path)
    with db.tenant("acme") as conn:  # later wins (migration 0008), as a model extractor links the two
        conn.execute(
            "UPDATE episode_events o SET superseded_by = n.id FROM episode_events n "
            "WHERE o.what LIKE '%%pgvector%%' AND n.what LIKE '%%SQLite after all%%'"
        )
    on_main = _start(db, "start-main", repos.main)
    assert "PostgreSQL with pgvector" in on_main and "was replaced" not in on_main, on_main
    assert "SQLite after all" not in on_main and "pending on `feat/a`" in on_main, on_main
    on_a = _start(db, "start-a", repos.wt_a)  # on feat/a the later decision is in force and replaces it
    assert "a decision in it was replaced on" in on_a and "SQLite after all" in on_a, on_a
