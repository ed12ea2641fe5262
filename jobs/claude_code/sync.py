"""`episodes claude-code sync`: store every finished Claude Code session of this machine not yet stored.

The hooks hand each session over as it ends, but a hook fails open (database down, laptop
asleep, hooks installed after the fact), so sync walks ~/.claude/projects/**/*.jsonl and hands over
what is finished: a session whose SessionEnd hook fired (its state file says so, even if the
hand-over then failed) or whose file has been idle for the idle-close interval. Open sessions are
left for later. It is idempotent twice over: a file unchanged since it was stored is not read
again (a small ledger, $EPISODES_HOME/claude-code/synced.json), and a session stored again with the
same content is ``unchanged`` in the database (ingest's content hash), so never summarised twice.
Subagent files (``subagents/``) are the reader's business: it leaves their work out of the session.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jobs.claude_code import session_state
from jobs.claude_code.handover import session_records
from jobs.claude_code.places import home, write_private

# Stores finished records of one file: returns (stored, unchanged, rejections as "where: reason").
Store = Callable[[Sequence[tuple[str, dict[str, Any]]]], tuple[int, int, list[str]]]
# How the database refuses a session that `episodes forget` erased (migration 0029), or a fork holding only
# erased turns (0036), and how ingest refuses a session stored for another user (a sync under another
# --user): reported once, and the file is not read again until it changes (then refused again, once).
ERASED = "an erased session is not stored again"
CONFLICT = "is stored for another user of this tenant"
FINAL = (ERASED, CONFLICT)


@dataclass
class SyncReport:
    files: int = 0  # session files found
    known: int = 0  # unchanged since they were stored: not read
    stored: int = 0  # sessions new or changed in the database
    unchanged: int = 0  # sessions the database already held as they are
    open: int = 0  # sessions not finished yet: left for a later sync
    bad_lines: list[str] = field(default_factory=list)  # malformed lines, skipped (the rest loaded)
    rejected: list[str] = field(default_factory=list)


def session_files(root: Path) -> list[Path]:
    """The main session files under ``root`` (sorted), without subagents' files."""
    if not root.is_dir():
        return []
    return sorted(p for p in root.rglob("*.jsonl") if p.is_file() and "subagents" not in p.relative_to(root).parts)


def _ledger_path(base: Path | None) -> Path:
    return (base or home()) / "claude-code" / "synced.json"


def load_ledger(base: Path | None) -> dict[str, list[int]]:
    try:
        data = json.loads(_ledger_path(base).read_text("utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def save_ledger(ledger: dict[str, list[int]], base: Path | None) -> None:
    write_private(_ledger_path(base), json.dumps(ledger, sort_keys=True))  # owner-only, its folder too


def sync(
    store: Store,
    files: Iterable[Path],
    *,
    tenant_id: str,
    user_id: str,
    idle_close_seconds: float | None,
    force: bool = False,
    base: Path | None = None,
) -> SyncReport:
    """Hand every finished session in ``files`` to ``store``; ``force`` reads files the ledger knows too."""
    report = SyncReport()
    ledger = load_ledger(base)
    ended = session_state.ended_sessions(base)
    for path in files:
        report.files += 1
        try:
            stat = path.stat()
        except OSError:
            continue
        key, signature = str(path.resolve()), [stat.st_size, stat.st_mtime_ns]
        if not force and ledger.get(key) == signature:
            report.known += 1
            continue
        finished: list[tuple[str, dict[str, Any]]] = []
        still_open = 0
        state = ended.get(path.stem)
        for where, item in session_records(
            path,
            tenant_id=tenant_id,
            user_id=user_id,
            close=state is not None,
            idle_close_seconds=idle_close_seconds,
            cwd=state.cwd if state else None,
            place=state.git if state else {},
        ):
            if isinstance(item, str):
                report.bad_lines.append(f"{where}: {item}")
            elif item.get("ended_at"):
                finished.append((where, item))
            else:
                still_open += 1
        report.open += still_open
        if finished:
            stored, unchanged, rejected = store(finished)
            report.stored += stored
            report.unchanged += unchanged
            report.rejected += rejected
            if any(not any(final in reason for final in FINAL) for reason in rejected):
                continue  # read again next time
        if not still_open:
            ledger[key] = signature
    save_ledger(ledger, base)
    return report
