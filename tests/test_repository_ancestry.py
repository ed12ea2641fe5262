"""Which sessions' decisions are in force on the branch a session starts on (issue 49, jobs.repository.ancestry).

Real repositories (tests/support/git_repos.py): a decision on ``feat/a`` is pending on ``main`` until
``feat/a`` is merged, then in force; a commitment on ``feat/b`` goes stale when ``feat/b`` is deleted
unmerged; a session of another clone whose commit is not here is pending; a session that recorded
nothing is in force, as before.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.git_repos import commit, git, scene

from jobs.repository.ancestry import IN_FORCE, PENDING, STALE, GitError, Origin, Verdict, classify
from jobs.repository.identity import Place, place_of


def _at(folder: Path) -> Place:
    place = place_of(str(folder))
    assert place is not None
    return place


def test_pending_until_merged_then_in_force_and_stale_once_deleted_unmerged(tmp_path: Path) -> None:
    repos = scene(tmp_path)
    on_main = commit(repos.main, "main.txt")
    on_a = commit(repos.wt_a, "a.txt")
    on_b = commit(repos.wt_b, "b.txt")
    origins = {
        1: Origin("main", on_main),  # a session on the current branch
        2: Origin("feat/a", on_a),  # the decision on feat/a
        3: Origin("feat/b", on_b),  # the commitment on feat/b
        4: Origin("feat/c", "c" * 40),  # another clone's session, its commit not here
        5: Origin(None, None),  # recorded nothing (before issue 49, or outside git)
        6: Origin("feat/a", None),  # synced without its hook: its branch only
    }
    seen = classify(_at(repos.main), origins)
    assert seen == {
        1: Verdict(IN_FORCE, None),
        2: Verdict(PENDING, "feat/a"),
        3: Verdict(PENDING, "feat/b"),
        4: Verdict(PENDING, "feat/c"),
        5: Verdict(IN_FORCE, None, known=False),
        6: Verdict(PENDING, "feat/a"),
    }
    # seen from feat/a's own worktree, its session is in force and main's later commit is pending
    from_a = classify(_at(repos.wt_a), origins)
    assert (from_a[2], from_a[1]) == (Verdict(IN_FORCE, None), Verdict(PENDING, "main"))

    git(repos.main, "merge", "-q", "--no-edit", "feat/a")
    merged = classify(_at(repos.main), origins)
    assert (merged[2], merged[6]) == (Verdict(IN_FORCE, None), Verdict(IN_FORCE, None))
    assert merged[3] == Verdict(PENDING, "feat/b")

    git(repos.main, "worktree", "remove", "--force", str(repos.wt_b))
    git(repos.main, "branch", "-D", "feat/b")
    deleted = classify(_at(repos.main), origins)
    assert deleted[3] == Verdict(STALE, "feat/b")
    assert deleted[2] == Verdict(IN_FORCE, None) and deleted[4] == Verdict(PENDING, "feat/c")


def test_a_branch_merged_then_deleted_stays_in_force_and_a_clone_sees_pushed_branches(tmp_path: Path) -> None:
    repos = scene(tmp_path)
    on_a = commit(repos.wt_a, "a.txt")
    git(repos.main, "merge", "-q", "--no-edit", "feat/a")
    git(repos.main, "worktree", "remove", "--force", str(repos.wt_a))
    git(repos.main, "branch", "-d", "feat/a")
    assert classify(_at(repos.main), {1: Origin("feat/a", on_a)}) == {1: Verdict(IN_FORCE, None)}
    # the clone has fetched feat/b (origin/feat/b): a session there is pending, not stale
    on_b = commit(repos.wt_b, "b.txt")
    git(repos.clone, "fetch", "-q", "origin")
    assert classify(_at(repos.clone), {1: Origin("feat/b", on_b)}) == {1: Verdict(PENDING, "feat/b")}


def test_an_unreadable_repository_is_an_error_the_caller_can_fail_open_on(tmp_path: Path) -> None:
    repos = scene(tmp_path)
    place = _at(repos.main)
    broken = Place(**{**place.__dict__, "git_dir": str(tmp_path / "no-such-git-dir")})
    with pytest.raises(GitError, match=r"not a git repository|no-such-git-dir"):
        classify(broken, {1: Origin("feat/a", "a" * 40)})
