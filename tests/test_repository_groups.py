"""Groups of repositories that share memory (issue 49): `episodes claude-code share | unshare | shared`.

Real git repositories, the real hook processes and `episodes api` over the real database: a service and its
client library grouped by their user recall each other's sessions, at session start, at the first prompt's
recall over HTTP and in the MCP tool; a repository not grouped, another user and another tenant do not; the
group is undone by `unshare`, written by neither command's --dry-run, and erased with its user.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner
from support.api_server import serve
from support.claude_code_cli import DECISION
from support.git_repos import git, new_repo
from support.repository_hooks import end_session, start_session

from jobs.cli import cli
from jobs.db import Database
from jobs.formats.claude_code import project_purpose
from jobs.rights.forget import forget_user
from jobs.service.keys import create_key

QUESTION = "Which database do we use for the memory store?"


def _repos(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A service, its client library (with remotes) and an unrelated repository with no remote."""
    svc, lib, other = (new_repo(tmp_path / "src" / n) for n in ("svc", "lib", "other"))
    git(svc, "remote", "add", "origin", "git@github.com:acme/svc.git")
    git(lib, "remote", "add", "origin", "https://github.com/acme/lib")
    return svc, lib, other


def _cc(*args: str) -> str:
    done = CliRunner().invoke(cli, ["claude-code", *args, "--tenant", "acme", "--user", "ann"])
    assert done.exit_code == 0, done.output
    return done.output


def _group_rows(db: Database, tenant: str = "acme") -> list[tuple[str, str]]:
    with db.tenant(tenant) as conn:
        rows = conn.execute("SELECT user_id, name FROM repository_groups ORDER BY user_id, purpose").fetchall()
    return [(r["user_id"], r["name"]) for r in rows]


@pytest.mark.citus
def test_grouped_repositories_share_memory_until_unshared(tmp_path: Path, db: Database) -> None:
    svc, lib, other = _repos(tmp_path)
    end_session(db, "sess-svc", svc, DECISION, tmp_path)
    assert "pgvector" not in start_session(db, "start-0", lib).lower()  # two repositories: apart

    dry = _cc("share", str(lib), str(svc), "--dry-run")
    assert "would add 2 repositories" in dry and "Nothing written" in dry, dry
    assert _group_rows(db) == []
    assert "pgvector" not in start_session(db, "start-1", lib).lower()

    shared = _cc("share", str(lib), "https://github.com/acme/svc.git", "--name", "shop")
    assert "group shop of ann: added 2 repositories" in shared, shared
    assert "pgvector" in start_session(db, "start-2", lib).lower()  # the service's decision, in the library
    assert "pgvector" not in start_session(db, "start-3", other).lower()  # not grouped: apart
    listed = _cc("shared")
    assert "shop:" in listed and "github.com/acme/svc" in listed and "github.com/acme/lib" in listed, listed

    # the same over HTTP (the remote first prompt's recall names the purpose; a caller may name the repo)
    _, key = create_key(db, "acme", ["recall"], name="issue 49")
    with serve(db) as api:
        for extra in ({"purpose": project_purpose(str(lib))}, {"repo": "git@github.com:acme/lib.git"}):
            answer = httpx.post(
                f"{api}/v1/recall",
                json={"user_id": "ann", "message": QUESTION, **extra},
                headers={"Authorization": f"Bearer {key}"},
                timeout=60,
            )
            assert answer.status_code == 200, answer.text
            assert [e["session_id"] for e in answer.json()["episodes"]] == ["sess-svc"], extra
            assert sorted(answer.json()["purposes"]) == sorted(
                [project_purpose(str(lib)), project_purpose(str(svc)), "general"]
            )

    # a group is the user's: bob's session in the service stays out of his library (he grouped nothing)
    end_session(db, "bob-svc", svc, DECISION, tmp_path, user="bob")
    assert "pgvector" in start_session(db, "bob-1", svc, user="bob").lower()
    assert "pgvector" not in start_session(db, "bob-2", lib, user="bob").lower()

    out = _cc("unshare", str(svc))
    assert "took 2 repositories out" in out, out  # the group left with one repository goes too
    assert _group_rows(db) == []
    assert "pgvector" not in start_session(db, "start-4", lib).lower()


def test_share_refuses_what_it_cannot_do_and_unshare_dry_run_writes_nothing(tmp_path: Path, db: Database) -> None:
    svc, lib, other = _repos(tmp_path)
    _cc("share", str(svc), str(lib))
    runner = CliRunner()
    one = runner.invoke(cli, ["claude-code", "share", str(other), "--tenant", "acme", "--user", "ann"])
    assert one.exit_code == 1 and "two repositories or more" in one.output, one.output
    moved = runner.invoke(
        cli, ["claude-code", "share", str(other), str(svc), "--name", "else", "--tenant", "acme", "--user", "ann"]
    )
    assert moved.exit_code == 1 and "already in group svc" in moved.output and "unshare" in moved.output, moved.output
    bad = runner.invoke(cli, ["claude-code", "share", "no-such-thing", str(svc), "--tenant", "acme", "--user", "ann"])
    assert bad.exit_code == 1 and "neither a folder on this machine nor a remote URL" in bad.output, bad.output
    joined = _cc("share", str(other), str(svc))  # naming a member of a group adds the others to it
    assert "group svc of ann: added 1 repository" in joined and "already in it" in joined, joined
    dry = _cc("unshare", "--group", "svc", "--dry-run")
    assert "would take 3 repositories" in dry, dry
    assert len(_group_rows(db)) == 3
    assert _group_rows(db, "other-tenant") == []  # row-level security: another tenant sees none of them


@pytest.mark.citus
def test_forget_removes_the_users_groups_and_the_branch_states_of_repositories_only_they_had(
    tmp_path: Path, db: Database
) -> None:
    svc, lib, _ = _repos(tmp_path)
    end_session(db, "sess-svc", svc, DECISION, tmp_path)
    _cc("share", str(svc), str(lib))
    with db.tenant("acme") as conn:
        conn.execute(
            "INSERT INTO repository_branches (tenant_id, purpose, branch, state) VALUES "
            "('acme', %(svc)s, 'feat/ann', 'open'), ('acme', %(lib)s, 'feat/shared', 'open')",
            {"svc": project_purpose(str(svc)), "lib": project_purpose(str(lib))},
        )
    end_session(db, "bob-lib", lib, DECISION, tmp_path, user="bob")  # bob works in the library too
    dry = forget_user(db, "acme", "ann", dry_run=True)
    assert dry.counts["repository_groups"] == 2 and dry.counts["repository_branches"] == 1
    assert len(_group_rows(db)) == 2
    report = forget_user(db, "acme", "ann")
    assert report.counts["repository_groups"] == 2 and report.counts["repository_branches"] == 1
    assert _group_rows(db) == []
    with db.tenant("acme") as conn:
        left = conn.execute("SELECT branch FROM repository_branches ORDER BY branch").fetchall()
    assert [r["branch"] for r in left] == ["feat/shared"]
