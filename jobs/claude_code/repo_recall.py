"""Recall for a caller that names its repository, branch and HEAD: ``POST /v1/recall`` and the MCP tool
``recall_memory`` (issue 49). One function, so the two give one answer and one block.

The service runs no git: ``repo`` (its remote URL, either way written) scopes recall to the repository's
purpose, the user's group of repositories (jobs.claude_code.groups) widens it, and ``branch``/``head`` leave out
the sessions of branches that local session starts recorded as open (their decisions are pending: one line
each, "pending on `feat/x`") or deleted unmerged (stale): jobs.claude_code.branch_view.sort_by_record.
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING

from jobs.claude_code.branch_view import block_with_pending, repository_scope, sort_by_record
from jobs.claude_code.groups import shared_purposes

if TYPE_CHECKING:
    from jobs.recall.recaller import Recaller
    from jobs.recall.result import Recall


def recall_in_repository(
    recaller: Recaller,
    tenant_id: str,
    user_id: str,
    message: str,
    *,
    purpose: str | None,
    repo: str | None,
    branch: str | None,
    head: str | None,
    budget_tokens: int,
    now: dt.datetime | None = None,
) -> tuple[Recall, str]:
    """The recall and its block (the pending branches' lines in it, and kept as the result's ``block``)."""
    purpose = purpose or (repository_scope(repo) if repo else None)
    result = recaller.recall(
        tenant_id,
        user_id,
        message,
        purpose=purpose,
        budget_tokens=budget_tokens,
        now=now,
        shared_with=shared_purposes(recaller.db, tenant_id, user_id, purpose),
    )
    view = (
        sort_by_record(result, recaller.db, tenant_id, repo=repo, branch=branch, head=head) if branch or head else None
    )
    return result, block_with_pending(result, view)
