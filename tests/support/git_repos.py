"""Real git repositories in a temporary folder for the repository-memory tests (issue 49).

``git`` runs with no global or system configuration (a developer's aliases, hooks or default branch
never leak in), a fixed author, and ``main`` as the first branch.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

GIT_ENV = {
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_AUTHOR_NAME": "Ann",
    "GIT_AUTHOR_EMAIL": "ann@example.com",
    "GIT_COMMITTER_NAME": "Ann",
    "GIT_COMMITTER_EMAIL": "ann@example.com",
    "GIT_TERMINAL_PROMPT": "0",
}


def git(cwd: Path, *args: str) -> str:
    """Run git in ``cwd``; its stdout, stripped (a failure raises with git's own message)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")} | GIT_ENV
    done = subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} in {cwd} failed: {done.stderr.strip()}")
    return done.stdout.strip()


def commit(cwd: Path, name: str, text: str | None = None) -> str:
    """Write ``name`` and commit it; the new commit's id."""
    (cwd / name).write_text(text or f"{name}\n")
    git(cwd, "add", name)
    git(cwd, "commit", "-q", "-m", f"add {name}")
    return git(cwd, "rev-parse", "HEAD")


def new_repo(path: Path) -> Path:
    """A repository at ``path`` with one commit on ``main``."""
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    commit(path, "README.md")
    return path


@dataclass
class Scene:
    """A repository ``main`` (folder ``app``), two worktrees (``feat/a`` and ``feat/b``) and a clone."""

    main: Path
    wt_a: Path
    wt_b: Path
    clone: Path


def scene(root: Path) -> Scene:
    main = new_repo(root / "repos" / "app")
    wt_a, wt_b = root / "trees" / "app-a", root / "trees" / "app-b"
    git(main, "worktree", "add", "-q", "-b", "feat/a", str(wt_a))
    git(main, "worktree", "add", "-q", "-b", "feat/b", str(wt_b))
    clone = root / "clones" / "app"
    clone.parent.mkdir(parents=True)
    git(root / "clones", "clone", "-q", str(main), str(clone))
    return Scene(main, wt_a, wt_b, clone)
