"""Which sessions' decisions are in force on the branch a session starts on (issue 49).

A session's place in git (its branch and its HEAD commit at the end, jobs.claude_code.session_state)
sorts what it settled, seen from the HEAD of the session starting now:

- **in force**: its commit is an ancestor of the current HEAD, or it ran on the current branch;
- **pending** on its branch: the branch still exists (here or on a remote) and is not merged into this
  one, or its commit is not in this clone (made in another clone and not fetched);
- **stale**: its branch was deleted without being merged (its commit is here, reachable from no branch
  of the current HEAD's history and its branch is gone).

A session that recorded no place (before issue 49, outside git, or stored without a hook) is in force:
what recall did before. A session with a branch but no commit (synced without its hook) is judged by its
branch: in force when the branch is merged, pending when it is not, in force when it is gone (whether it
was merged cannot be told).

Cost: at most three ``git`` processes whatever the number of candidates, never one per candidate:
``for-each-ref`` (every branch tip), ``cat-file --batch-check`` (which commits this clone has) and
``rev-list <candidates and branch tips> ^HEAD`` (those not reachable from HEAD; git stops where
their history meets HEAD's). bench/repository_ancestry.py measures 200 candidates.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final, Literal

from jobs.repository.identity import Place

State = Literal["in_force", "pending", "stale"]
IN_FORCE: Final = "in_force"
PENDING: Final = "pending"
STALE: Final = "stale"
_HEX = re.compile(r"^[0-9a-f]{40}(?:[0-9a-f]{24})?$")
TIMEOUT_SECONDS = 1.0  # each of the three reads; the SessionStart hook has 6 s in all (jobs.claude_code.hook)
# git reads only: no pager, no fsmonitor or hooks run, no optional locks; the repository named outright, so a
# GIT_DIR or GIT_WORK_TREE of the environment the hook runs in does not redirect it.
_SAFE = ["-c", "core.fsmonitor=false", "-c", "core.hooksPath=/dev/null", "--no-pager", "--no-optional-locks"]


@dataclass(frozen=True)
class Origin:
    """Where a session happened: its branch (None: detached, or not recorded) and HEAD at its end."""

    branch: str | None
    head: str | None


@dataclass(frozen=True)
class Verdict:
    state: State
    branch: str | None  # the branch a pending or stale session was on
    known: bool = True  # False: in force only because nothing recorded says otherwise


class GitError(Exception):
    """git could not be read in the repository (the caller keeps every candidate in force)."""


def _git(place: Place, args: Sequence[str], stdin: str = "") -> str:
    try:
        done = subprocess.run(
            ["git", *_SAFE, "--git-dir", place.git_dir, "--work-tree", place.worktree, *args],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=TIMEOUT_SECONDS,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise GitError(f"git {args[0]} in {place.worktree}: {exc}") from None
    if done.returncode != 0:
        raise GitError(f"git {args[0]} in {place.worktree}: {done.stderr.strip()[:300]}")
    return done.stdout


def branch_tips(place: Place) -> dict[str, str]:
    """Every branch, local (``feat/x``) and of a remote (``origin/feat/x``), with its tip commit."""
    out = _git(place, ["for-each-ref", "--format=%(objectname) %(refname)", "refs/heads", "refs/remotes"])
    tips: dict[str, str] = {}
    for line in out.splitlines():
        sha, _, ref = line.partition(" ")
        if ref.startswith("refs/heads/"):
            tips[ref[len("refs/heads/") :]] = sha
        elif ref.startswith("refs/remotes/") and not ref.endswith("/HEAD"):
            tips.setdefault(ref[len("refs/remotes/") :], sha)
    return tips


def present(place: Place, commits: Iterable[str]) -> set[str]:
    """Those of ``commits`` this repository holds."""
    wanted = sorted({c for c in commits if _HEX.match(c)})
    if not wanted:
        return set()
    out = _git(place, ["cat-file", "--batch-check=%(objectname) %(objecttype)"], "\n".join(wanted) + "\n")
    return {line.split(" ", 1)[0] for line in out.splitlines() if line.endswith(" commit")}


def not_in_history(place: Place, head: str, commits: Iterable[str]) -> set[str]:
    """Those of ``commits`` (all present) that are not ancestors of ``head`` (nor ``head`` itself)."""
    wanted = sorted(set(commits) - {head})
    if not wanted:
        return set()
    out = _git(place, ["rev-list", "--stdin"], "\n".join([*wanted, f"^{head}"]) + "\n")
    return set(wanted) & set(out.split())


def _remote_tip(tips: Mapping[str, str], branch: str) -> str | None:
    """The tip of ``branch`` here, else on a remote (``origin/<branch>``)."""
    if branch in tips:
        return tips[branch]
    return next((sha for name, sha in tips.items() if name.split("/", 1)[-1] == branch and "/" in name), None)


def judge(
    origin: Origin, current_branch: str | None, tips: Mapping[str, str], have: set[str], outside: set[str]
) -> Verdict:
    """One session's verdict, from the repository read once (:func:`classify`)."""
    branch = origin.branch if origin.branch and origin.branch != "HEAD" else None
    if branch is not None and branch == current_branch:
        return Verdict(IN_FORCE, None)
    if origin.head is not None and origin.head in have and origin.head not in outside:
        return Verdict(IN_FORCE, None)
    label = branch or (origin.head[:12] if origin.head else None)
    tip = _remote_tip(tips, branch) if branch else None
    if tip is not None:  # the branch is still there
        if origin.head is None and tip in have and tip not in outside:
            return Verdict(IN_FORCE, None)  # merged, and the session's own commit is not known
        return Verdict(PENDING, label)
    if origin.head is None:
        return Verdict(IN_FORCE, None, known=False)  # nothing recorded to judge by, or a gone branch, commit unknown
    if origin.head not in have:
        return Verdict(PENDING, label)  # made in another clone and not here
    return Verdict(STALE, label)  # here, unmerged, and its branch is gone


def classify(place: Place, origins: Mapping[int, Origin]) -> dict[int, Verdict]:
    """The verdict of each candidate (by key) seen from the HEAD of ``place``; raises GitError."""
    if place.head is None or not any(o.branch or o.head for o in origins.values()):
        return {key: Verdict(IN_FORCE, None, known=False) for key in origins}
    tips = branch_tips(place)
    branches = {o.branch for o in origins.values() if o.branch}
    candidate_tips = {tip for b in branches if (tip := _remote_tip(tips, b))}
    have = present(place, [*(o.head for o in origins.values() if o.head), *candidate_tips])
    outside = not_in_history(place, place.head, have)
    return {key: judge(o, place.branch, tips, have, outside) for key, o in origins.items()}
