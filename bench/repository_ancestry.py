"""What sorting recall by git history costs (issue 49): the SessionStart goal is <= 50 ms for 200 candidates.

    python bench/repository_ancestry.py [--commits 5000] [--branches 40] [--candidates 200] [--runs 20]

Builds a scratch repository with ``git fast-import`` (``--commits`` on main, ``--branches`` branches of
10 commits each, half of them merged, a quarter deleted unmerged), then times, over ``--runs`` runs:

- ``place_of``: where a folder is in git, read from git's files (what every hook pays, in and out of git);
- ``classify``: the verdict of ``--candidates`` sessions spread over main and the branches (three ``git``
  processes whatever their number).
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from jobs.repository.ancestry import Origin, classify
from jobs.repository.identity import place_of

GIT_ENV = {
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_AUTHOR_NAME": "Ann",
    "GIT_AUTHOR_EMAIL": "ann@example.com",
}
GIT_ENV |= {"GIT_COMMITTER_NAME": "Ann", "GIT_COMMITTER_EMAIL": "ann@example.com"}


def git(cwd: Path, *args: str, stdin: str | None = None) -> str:
    done = subprocess.run(
        ["git", *args], cwd=cwd, input=stdin, capture_output=True, text=True, check=True, env={**os.environ, **GIT_ENV}
    )
    return done.stdout.strip()


def build(root: Path, commits: int, branches: int) -> tuple[Path, list[tuple[str, str]]]:
    """A repository with history; the (branch, commit) a session could have ended at, many of each."""
    repo = root / "app"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    stream, mark = [], 0
    for i in range(commits):
        mark += 1
        stream += [
            "commit refs/heads/main",
            f"mark :{mark}",
            f"committer Ann <ann@example.com> {1_700_000_000 + i} +0000",
            "data 2",
            "c",
            *([f"from :{mark - 1}"] if mark > 1 else []),
            "",
        ]
    main_tip = mark
    for b in range(branches):
        base = random.randint(max(1, main_tip - 500), main_tip)
        for j in range(10):
            mark += 1
            stream += [
                f"commit refs/heads/feat/b{b}",
                f"mark :{mark}",
                f"committer Ann <ann@example.com> {1_800_000_000 + mark} +0000",
                "data 2",
                "b",
                f"from :{base if j == 0 else mark - 1}",
                "",
            ]
    git(repo, "fast-import", "--quiet", stdin="\n".join(stream) + "\n")
    git(repo, "reset", "-q", "--hard", "main")
    places: list[tuple[str, str]] = []
    for b in range(branches):
        name = f"feat/b{b}"
        places += [(name, sha) for sha in git(repo, "rev-list", "-5", name).split()]
        if b % 2 == 0:
            git(repo, "merge", "-q", "--no-edit", "-m", f"merge {name}", name)
        elif b % 4 == 1:
            git(repo, "branch", "-q", "-D", name)
    places += [("main", sha) for sha in git(repo, "rev-list", "-200", "main").split()]
    return repo, places


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--commits", type=int, default=5000)
    parser.add_argument("--branches", type=int, default=40)
    parser.add_argument("--candidates", type=int, default=200)
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args(argv)
    random.seed(49)
    with tempfile.TemporaryDirectory() as tmp:
        repo, places = build(Path(tmp), args.commits, args.branches)
        outside = Path(tmp) / "plain"
        outside.mkdir()
        chosen = [random.choice(places) for _ in range(args.candidates)]
        origins = {i: Origin(branch, sha) for i, (branch, sha) in enumerate(chosen)}
        place = place_of(str(repo))
        assert place is not None
        reads, plain, sorts = [], [], []
        verdicts: dict[int, object] = {}
        for _ in range(args.runs):
            started = time.perf_counter()
            place_of(str(repo / "."))
            reads.append(time.perf_counter() - started)
            started = time.perf_counter()
            place_of(str(outside))
            plain.append(time.perf_counter() - started)
            started = time.perf_counter()
            verdicts = dict(classify(place, origins))
            sorts.append(time.perf_counter() - started)
    states: dict[str, int] = {}
    for verdict in verdicts.values():
        state = getattr(verdict, "state", "?")
        states[state] = states.get(state, 0) + 1
    print(f"{args.commits} commits on main, {args.branches} branches; {args.runs} runs; {os.cpu_count()} CPUs")
    print(f"{'what':52} {'p50 ms':>8} {'max ms':>8}")
    for what, values in (
        ("place_of, in a repository (file reads)", reads),
        ("place_of, outside git", plain),
        (f"classify {args.candidates} candidates (3 git processes)", sorts),
    ):
        print(f"{what:52} {statistics.median(values) * 1000:8.2f} {max(values) * 1000:8.2f}")
    print("verdicts: " + ", ".join(f"{k} {v}" for k, v in sorted(states.items())))


if __name__ == "__main__":
    main()
