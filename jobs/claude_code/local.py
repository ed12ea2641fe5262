"""The hooks' local mode: recall and hand-over on the database directly (DATABASE_URL or the embedded server).

SessionStart recalls with no opening message and a zero query vector: what it shows is the
recent episodes, the open items and the sessions not yet summarised, none of which needs the
embedder, so a cold hook process does not load the model. The first prompt's recall embeds the
prompt (the model files are prepared by `episodes claude-code install`).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from jobs import config
from jobs.claude_code import injection, session_state
from jobs.claude_code.places import project_purpose
from jobs.claude_code.start_view import local_start
from jobs.db import Database
from jobs.errors import EpisodesError
from jobs.recall.recaller import Recaller

if TYPE_CHECKING:
    from jobs.ingest import IngestReport

POOL_TIMEOUT_SECONDS = 2.0  # a database that does not answer fails the hook fast (it fails open)


def database() -> Database:
    settings = config.load()
    return Database(
        settings.with_(
            application_name="episodes claude-code hook",
            pool_size=1,
            pool_timeout_seconds=min(settings.pool_timeout_seconds, POOL_TIMEOUT_SECONDS),
        )
    )


def session_start(args: argparse.Namespace, user: str, payload: dict[str, Any]) -> str:
    sid = str(payload.get("session_id") or "")
    state = session_state.load(sid)
    result, block = local_start(Recaller(database()), args.tenant, user, payload.get("cwd"))
    state.cwd, state.transcript_path = payload.get("cwd"), payload.get("transcript_path")
    if block:
        session_state.remember_start(state, [ep.id for ep in result.episodes], [item.id for item in result.open_items])
    session_state.save(sid, state)
    return block


def first_prompt(args: argparse.Namespace, user: str, payload: dict[str, Any]) -> str:
    claimed = session_state.claim_first_prompt(payload)
    if claimed is None:
        return ""
    sid, state, prompt = claimed
    from jobs.claude_code.groups import shared_purposes  # the repository's group (issue 49) sees one memory

    recaller = Recaller(database())
    purpose = project_purpose(str(payload.get("cwd") or ""))
    result = recaller.recall(
        args.tenant,
        user,
        prompt,
        purpose=purpose,
        budget_tokens=injection.PROMPT_BUDGET_TOKENS,
        shared_with=shared_purposes(recaller.db, args.tenant, user, purpose),
    )
    from jobs.claude_code.branch_view import sort_by_ancestry  # pending and stale sessions' episodes left out

    sort_by_ancestry(result, recaller.db, args.tenant, payload.get("cwd"))
    block = injection.prompt_block(state, result.now, result.episodes, result.open_items)
    session_state.save(sid, state)
    return block


def hand_over(args: argparse.Namespace, user: str, payload: dict[str, Any], *, close: bool) -> None:
    if close:
        session_state.mark_ended(payload)
    path = Path(str(payload.get("transcript_path") or ""))
    db = database()
    report = store(db, path, tenant_id=args.tenant, user_id=user, close=close, cwd=payload.get("cwd"))
    if report.rejected:
        raise EpisodesError("; ".join(str(r) for r in report.rejected[:3]))


def store(
    db: Database,
    path: Path,
    *,
    tenant_id: str,
    user_id: str,
    close: bool,
    cwd: str | None = None,
    report: IngestReport | None = None,
) -> IngestReport:
    """Hand one session file over to the database (closed or not), through the one write path of ingest.

    A malformed line is not a rejection of the session (the reader reports it and goes on)."""
    # Imported by the hand-over alone: ingest's pydantic models would add a third to a cold SessionStart.
    from jobs.claude_code.handover import session_records
    from jobs.ingest import ingest_records

    records = [
        (where, item)
        for where, item in session_records(
            path,
            tenant_id=tenant_id,
            user_id=user_id,
            close=close,
            idle_close_seconds=db.settings.idle_close_seconds,
            cwd=cwd,
        )
        if isinstance(item, dict)
    ]
    return ingest_records(db, records, tenant_id=tenant_id, report=report)


def sync_store(
    db: Database, tenant_id: str
) -> Callable[[Sequence[tuple[str, dict[str, Any]]]], tuple[int, int, list[str]]]:
    """The store of `episodes claude-code sync` in local mode (jobs.claude_code.sync.Store)."""
    from jobs.ingest import ingest_records  # not at the top: see store()

    def store_records(records: Sequence[tuple[str, dict[str, Any]]]) -> tuple[int, int, list[str]]:
        report = ingest_records(db, list(records), tenant_id=tenant_id)
        return report.inserted + report.updated, report.unchanged, [str(r) for r in report.rejected]

    return store_records
