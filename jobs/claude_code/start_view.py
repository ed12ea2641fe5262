"""What a Claude Code session starts with, computed in one place for every mode.

The SessionStart hook's block is recall with no opening message (there is none yet) and a zero
query vector, so neither the embedder nor relevance takes part: the user's recent episodes of this
project (and what is about them across projects, :func:`jobs.claude_code.places.project_purpose`),
the open items, and the sessions not yet summarised. The local hook computes it on the database;
``POST /v1/claude-code/session-start`` computes it in `episodes api` for the remote hook. The first
prompt's hook recomputes the same view to leave out what the session already saw.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from jobs.claude_code.injection import START_BUDGET_TOKENS, has_lines
from jobs.claude_code.places import project_purpose

if TYPE_CHECKING:
    from jobs.claude_code.branch_view import BranchView
    from jobs.db import Database
    from jobs.recall.recaller import Recaller
    from jobs.recall.result import Recall


def start_recall(
    recaller: Recaller, tenant_id: str, user_id: str, cwd: str | None, *, purpose: str | None = None
) -> Recall:
    """The SessionStart recall of ``user_id`` in the project at ``cwd`` (``purpose``: the project's, when
    the caller knows it better than this machine: :func:`remote_purpose`)."""
    from jobs.claude_code.groups import shared_purposes  # the repository's group (issue 49) sees one memory

    purpose = purpose or project_purpose(cwd or "")
    result = recaller.recall_vector(
        tenant_id,
        user_id,
        "",
        [0.0] * recaller.embedder.dim,
        purpose=purpose,
        budget_tokens=START_BUDGET_TOKENS,
        shared_with=shared_purposes(recaller.db, tenant_id, user_id, purpose),
    )
    result.nothing_relevant = False  # no opening message to relate to: the first prompt's hook does that
    return result


def start_block(result: Recall, view: BranchView | None = None) -> str:
    """The block to inject ("" when the user has nothing yet in this project); with ``view``, the branches
    whose sessions are pending, one line each."""
    block = result.render() if has_lines(result.episodes, result.open_items, result.sessions) else ""
    if view is None:
        return block
    from jobs.claude_code.branch_view import block_with_pending

    return block_with_pending(result, view, block)


def remote_purpose(db: Database, tenant_id: str, user_id: str, cwd: str | None, *, repo: str | None = None) -> str:
    """The purpose of a folder a remote hook names: computed here when the folder is on this machine (a
    service beside its user); otherwise its repository's when the hook sent the remote's URL (``repo``);
    otherwise the purpose the user's latest session in that folder was stored under (its own hook computed it
    where the folder is: its git repository's, issue 49), else the folder's."""
    import os

    from jobs.sql import query

    folder = cwd or ""
    if folder and not os.path.isdir(folder) and repo:
        from jobs.claude_code.branch_view import repository_scope
        from jobs.repository.identity import normalise_url

        if normalise_url(repo):  # a remote on the network: the identity the user's hook computes
            return repository_scope(repo)
    if folder and not os.path.isdir(folder):
        with db.tenant(tenant_id) as conn:
            row = conn.execute(
                query("purpose_of_folder"), {"tenant_id": tenant_id, "user_id": user_id, "folder": folder}
            ).fetchone()
        if row is not None:
            return str(row["purpose"])
    return project_purpose(folder)


def local_start(recaller: Recaller, tenant_id: str, user_id: str, cwd: str | None) -> tuple[Recall, str]:
    """The SessionStart recall and block of the local hook, sorted by the git history of the branch the
    session starts on (jobs.claude_code.branch_view: decisions of unmerged branches are "pending", those of
    branches deleted unmerged stale). Only on the user's machine: a service never runs git in a folder a
    request names."""
    from jobs.claude_code.branch_view import sort_by_ancestry

    result = start_recall(recaller, tenant_id, user_id, cwd)
    view = sort_by_ancestry(result, recaller.db, tenant_id, cwd)
    return result, start_block(result, view)
