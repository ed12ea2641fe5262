"""Memory follows the git repository (issue 49): one identity for a repository's worktrees and clones.

Real repositories built with ``git`` in a temporary folder (tests/support/git_repos.py): a main
branch, two worktrees, a clone, an unrelated repository whose folder has the same name, a folder
outside git and a repository without a remote.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from support.claude_code_cli import _session_file
from support.git_repos import Scene, commit, git, new_repo, scene

from jobs.cli import cli
from jobs.db import Database
from jobs.formats.claude_code import path_purpose, project_purpose, read_session_file
from jobs.ingest import ingest_records
from jobs.repository.identity import normalise_url, place_of


@pytest.fixture
def repos(tmp_path: Path) -> Scene:
    return scene(tmp_path)


def test_worktrees_and_a_clone_share_one_identity_and_purpose(repos: Scene, tmp_path: Path) -> None:
    (repos.wt_a / "src").mkdir()
    folders = [repos.main, repos.wt_a, repos.wt_a / "src", repos.wt_b, repos.clone]
    places = [place_of(str(f)) for f in folders]
    assert all(p is not None for p in places)
    identities = {p.identity for p in places if p}
    assert identities == {os.path.realpath(repos.main / ".git")}  # no remote: the common folder
    assert {project_purpose(str(f)) for f in folders} == {project_purpose(str(repos.main))}
    assert project_purpose(str(repos.main)).startswith("cc-app-")
    # the common folder is the one git names
    common = git(repos.wt_a, "rev-parse", "--path-format=absolute", "--git-common-dir")
    assert os.path.realpath(common) == next(iter(identities))


def test_branch_head_and_worktree_are_read_as_git_tells_them(repos: Scene) -> None:
    tip = commit(repos.wt_a, "a.txt")
    place = place_of(str(repos.wt_a))
    assert place is not None
    assert (place.branch, place.head, place.worktree) == ("feat/a", tip, os.path.realpath(repos.wt_a))
    git(repos.main, "pack-refs", "--all")  # refs packed: read from packed-refs
    assert place_of(str(repos.wt_a)) == place
    git(repos.wt_b, "checkout", "-q", "--detach", tip)
    detached = place_of(str(repos.wt_b))
    assert detached is not None and (detached.branch, detached.head) == (None, tip)


def test_two_unrelated_repositories_with_the_same_folder_name_never_share(repos: Scene, tmp_path: Path) -> None:
    other = new_repo(tmp_path / "elsewhere" / "app")
    assert project_purpose(str(other)) != project_purpose(str(repos.main))
    assert project_purpose(str(other)).startswith("cc-app-")
    # the same remote URL written two ways is one repository; another remote is another
    git(repos.main, "remote", "add", "origin", "git@GitHub.com:acme/app.git")
    git(other, "remote", "add", "origin", "https://github.com/acme/app")
    assert project_purpose(str(other)) == project_purpose(str(repos.main))
    git(other, "remote", "set-url", "origin", "https://github.com/someone-else/app")
    assert project_purpose(str(other)) != project_purpose(str(repos.main))


def test_a_clone_of_a_repository_with_a_remote_shares_it(repos: Scene) -> None:
    git(repos.main, "remote", "add", "origin", "ssh://git@github.com:22/acme/app.git")
    git(repos.clone, "remote", "add", "upstream", "https://example.org/x/y")  # origin still decides
    place = place_of(str(repos.clone))
    assert place is not None and place.identity == "github.com/acme/app"
    assert project_purpose(str(repos.clone)) == project_purpose(str(repos.wt_b))


def test_a_folder_outside_git_keeps_its_path_scope(tmp_path: Path) -> None:
    plain = tmp_path / "plain" / "app"
    plain.mkdir(parents=True)
    assert place_of(str(plain)) is None
    assert project_purpose(str(plain)) == path_purpose(str(plain))
    assert project_purpose("/no/such/folder/app") == path_purpose("/no/such/folder/app")


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("git@GitHub.com:acme/app.git", "github.com/acme/app"),
        ("https://user:secret@github.com/acme/app.git/", "github.com/acme/app"),
        ("ssh://git@gitlab.example.com:2222/group/sub/app", "gitlab.example.com/group/sub/app"),
        ("/srv/git/app.git", None),
        ("file:///srv/git/app.git", None),
        ("../app", None),
    ],
)
def test_remote_urls_are_normalised(url: str, expected: str | None) -> None:
    assert normalise_url(url) == expected


# --- upgrade: folder scopes move to the repository's -------------------------------------------------


def _records(folder: Path, sid: str, cwd: Path, said: str) -> list[tuple[str, dict[str, Any]]]:
    path = _session_file(folder, sid, str(cwd), said)
    items = read_session_file(path, tenant_id="acme", user_id="ann", idle_close_seconds=None, closed=True)
    return [(where, item) for where, item in items if isinstance(item, dict)]


def _purposes(db: Database) -> dict[str, str]:
    with db.tenant("acme") as conn:
        rows = conn.execute("SELECT session_id, purpose FROM transcripts ORDER BY session_id").fetchall()
    return {r["session_id"]: r["purpose"] for r in rows}


@pytest.mark.citus
def test_rescope_moves_folder_scopes_to_the_repository_after_a_dry_run(
    repos: Scene, tmp_path: Path, db: Database
) -> None:
    plain = tmp_path / "plain" / "app"
    plain.mkdir(parents=True)
    files = tmp_path / "sessions"
    sessions = {"s-main": repos.main, "s-wt": repos.wt_a, "s-plain": plain}
    records = {sid: _records(files, sid, cwd, f"We chose pgvector in {sid}.") for sid, cwd in sessions.items()}
    # stored as versions before issue 49 stored them: the folder's purpose
    old = [(w, {**r, "purpose": path_purpose(str(sessions[sid]))}) for sid, rs in records.items() for w, r in rs]
    assert ingest_records(db, old, tenant_id="acme").inserted == 3
    with db.tenant("acme") as conn:
        conn.execute(
            "INSERT INTO episodes (tenant_id, user_id, kind, session_id, purpose, summary, importance, started_at, "
            "ended_at, model, prompt_version) VALUES ('acme', 'ann', 'session', 's-wt', %s, 'we chose pgvector', 0.5, "
            "now(), now(), 'm', 'p')",
            (path_purpose(str(repos.wt_a)),),
        )
    before = _purposes(db)

    dry = CliRunner().invoke(cli, ["claude-code", "rescope", "--tenant", "acme", "--dry-run"])
    assert dry.exit_code == 0, dry.output
    assert "2 projects would move" in dry.output and "Nothing written" in dry.output, dry.output
    assert "1 session and 1 episode" in dry.output, dry.output
    assert _purposes(db) == before

    done = CliRunner().invoke(cli, ["claude-code", "rescope", "--tenant", "acme"])
    assert done.exit_code == 0, done.output
    repo = project_purpose(str(repos.main))
    assert _purposes(db) == {"s-main": repo, "s-wt": repo, "s-plain": path_purpose(str(plain))}
    with db.tenant("acme") as conn:
        episode = conn.execute("SELECT purpose FROM episodes WHERE session_id = 's-wt'").fetchone()
    assert episode is not None and episode["purpose"] == repo
    # the session files stored again as this version stores them: unchanged, never summarised again
    again = [item for rs in records.values() for item in rs]
    assert {r["purpose"] for _, r in again} == {repo, path_purpose(str(plain))}
    report = ingest_records(db, again, tenant_id="acme")
    assert (report.unchanged, report.updated, report.inserted) == (3, 0, 0)
    twice = CliRunner().invoke(cli, ["claude-code", "rescope", "--tenant", "acme"])
    assert "0 projects moved" in twice.output, twice.output
    assert json.dumps(_purposes(db)) == json.dumps({"s-main": repo, "s-plain": path_purpose(str(plain)), "s-wt": repo})
