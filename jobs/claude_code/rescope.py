"""`episodes claude-code rescope`: move the projects stored under a folder's purpose to their repository's.

Before issue 49 a Claude Code project's purpose was its folder's (``cc-<folder>-<16 hex of the path>``);
now it is its git repository's (jobs.repository.identity), shared by worktrees and clones. The
transcripts kept the folder each session ran in (``metadata.project``), so the move is exact: a
folder's purpose moves when the folder is still in a git repository on this machine and that
purpose is the one computed from exactly that folder (so nothing is guessed from a look-alike). Its
transcripts and every episode under it (super-summaries too) take the repository's purpose.

A transcript's content hash covers its purpose, so a moved transcript gets the hash of the record
as it would now be stored: storing its session file again stays ``unchanged`` and is not summarised
again. Where the stored record cannot reproduce its own hash (stored redacted, or its messages
pruned), the hash is left, and such transcripts are counted: storing their files again would
summarise them again.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from jobs.db import Conn, Database
from jobs.formats.claude_code import path_purpose, project_purpose
from jobs.sql import query

log = logging.getLogger(__name__)


@dataclass
class Move:
    old: str
    new: str
    folders: list[str] = field(default_factory=list)
    transcripts: int = 0
    episodes: int = 0
    hash_kept: int = 0  # transcripts whose hash could not be recomputed


@dataclass
class RescopePlan:
    moves: list[Move] = field(default_factory=list)
    not_in_git: list[str] = field(default_factory=list)  # folders outside git or not on this machine
    ambiguous: list[str] = field(default_factory=list)  # a purpose whose folders now lie in two repositories


def plan_moves(rows: list[dict[str, Any]]) -> RescopePlan:
    """Which folder purposes move where, from (purpose, project) rows (``rescope_projects``)."""
    plan = RescopePlan()
    targets: dict[str, set[str]] = defaultdict(set)
    folders: dict[str, list[str]] = defaultdict(list)
    for row in rows:
        old, folder = str(row["purpose"]), str(row["project"])
        if old != path_purpose(folder):
            continue  # already a repository's purpose, or not computed from this folder
        new = project_purpose(folder)
        if new == old:
            plan.not_in_git.append(folder)
            continue
        targets[old].add(new)
        folders[old].append(folder)
    for old, news in sorted(targets.items()):
        if len(news) > 1:
            plan.ambiguous.append(old)
            continue
        plan.moves.append(Move(old, next(iter(news)), sorted(folders[old])))
    return plan


def _new_hash(row: dict[str, Any], tenant_id: str, new: str) -> str | None:
    """The content hash of the row as stored under ``new``; None when the row does not reproduce its own."""
    from pydantic import ValidationError

    from jobs.models import TranscriptIn

    fields = {k: row[k] for k in ("user_id", "session_id", "agent_id", "started_at", "ended_at", "metadata")}
    try:
        old_record = TranscriptIn(tenant_id=tenant_id, purpose=row["purpose"], messages=row["messages"], **fields)
        if old_record.content_hash() != row["content_hash"]:
            return None
        return old_record.model_copy(update={"purpose": new}).content_hash()
    except ValidationError:
        return None


def _apply_move(conn: Conn, tenant_id: str, move: Move, *, dry_run: bool) -> None:
    key = {"tenant_id": tenant_id, "old": move.old}
    count = conn.execute(query("rescope_count_episodes"), key).fetchone()
    move.episodes = int(count["n"]) if count else 0
    for row in conn.execute(query("rescope_rows"), key).fetchall():
        move.transcripts += 1
        digest = _new_hash(row, tenant_id, move.new)
        if digest is None:
            move.hash_kept += 1
        if not dry_run:
            params = {**key, "new": move.new, "id": row["id"], "content_hash": digest or row["content_hash"]}
            conn.execute(query("rescope_transcript"), params)
    if not dry_run:
        conn.execute(query("rescope_episodes"), {**key, "new": move.new})


def rescope(db: Database, tenant_id: str, *, dry_run: bool) -> RescopePlan:
    """Move ``tenant_id``'s folder purposes to their repositories' (nothing written with ``dry_run``),
    in one transaction: a failure leaves every purpose as it was."""
    with db.tenant(tenant_id) as conn:
        plan = plan_moves(conn.execute(query("rescope_projects"), {"tenant_id": tenant_id}).fetchall())
        for move in plan.moves:
            _apply_move(conn, tenant_id, move, dry_run=dry_run)
            log.info(
                "%s %s -> %s",
                "would move" if dry_run else "moved",
                move.old,
                move.new,
                extra={"action": "rescope", "transcripts": move.transcripts, "episodes": move.episodes},
            )
    return plan
