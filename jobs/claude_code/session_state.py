"""What the hooks remember about one Claude Code session, in a small JSON file keyed by its id.

The SessionStart hook records the episodes and open items it injected, so the first
UserPromptSubmit adds only what is new; the SessionEnd hook records that the session ended, so
``episodes claude-code sync`` hands it over even when the hook itself could not (database down).
Standard library only. A file that cannot be read counts as empty: state is a help, never a gate.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from jobs.claude_code.places import state_dir, write_private

_SESSION_ID = re.compile(r"^[A-Za-z0-9_.-]{1,128}$")
KEEP_SECONDS = 30 * 86400.0  # state of sessions older than this is removed by later SessionEnd hooks


@dataclass
class SessionState:
    episodes: list[int] = field(default_factory=list)  # injected episode ids
    open_items: list[int] = field(default_factory=list)  # injected open item (event) ids
    prompted: bool = False  # the first prompt's hook has run
    ended: bool = False  # SessionEnd fired
    transcript_path: str | None = None
    cwd: str | None = None
    git: dict[str, str] = field(default_factory=dict)  # where it ended in git (git_place): repo, branch, head, worktree


def _path(session_id: str, base: Path | None) -> Path | None:
    if not _SESSION_ID.match(session_id or ""):
        return None  # never a path from an odd id
    return state_dir(base) / f"{session_id}.json"


def load(session_id: str, base: Path | None = None) -> SessionState:
    path = _path(session_id, base)
    try:
        raw = json.loads(path.read_text("utf-8")) if path else {}
    except (OSError, ValueError):
        raw = {}
    known = SessionState.__dataclass_fields__
    return SessionState(**{k: v for k, v in raw.items() if k in known}) if isinstance(raw, dict) else SessionState()


def save(session_id: str, state: SessionState, base: Path | None = None) -> None:
    path = _path(session_id, base)
    if path is None:
        return
    write_private(path, json.dumps(asdict(state)))  # owner-only, its folder too


def ended_sessions(base: Path | None = None) -> dict[str, SessionState]:
    """Sessions whose SessionEnd fired, by id (what sync hands over before the idle-close interval)."""
    found: dict[str, SessionState] = {}
    folder = state_dir(base)
    for path in folder.glob("*.json") if folder.is_dir() else ():
        state = load(path.stem, base)
        if state.ended:
            found[path.stem] = state
    return found


def prune(base: Path | None = None, keep_seconds: float = KEEP_SECONDS) -> int:
    """Remove state files untouched for ``keep_seconds``; returns how many."""
    folder = state_dir(base)
    cutoff = time.time() - keep_seconds
    removed = 0
    for path in folder.glob("*.json") if folder.is_dir() else ():
        try:
            if path.stat().st_mtime < cutoff:
                path.unlink()
                removed += 1
        except OSError:
            continue
    return removed


def claim_first_prompt(payload: dict[str, Any]) -> tuple[str, SessionState, str] | None:
    """For the UserPromptSubmit hook: the session id, its state and the prompt when this is the
    session's first prompt (recorded as taken at once, so a failing recall is not retried), else None."""
    sid = str(payload.get("session_id") or "")
    state = load(sid)
    prompt = str(payload.get("prompt") or "").strip()
    if state.prompted or not prompt:
        return None
    state.prompted = True
    save(sid, state)
    return sid, state, prompt


def mark_ended(payload: dict[str, Any]) -> None:
    """For the SessionEnd hook, before its hand-over: the session ended, so that `episodes claude-code
    sync` closes it if the hand-over fails; old state files are pruned on the way."""
    sid = str(payload.get("session_id") or "")
    state = load(sid)
    state.ended = True
    state.cwd, state.transcript_path = payload.get("cwd") or state.cwd, payload.get("transcript_path")
    state.git = git_place(state.cwd) or state.git
    save(sid, state)
    prune()


def git_place(cwd: str | None) -> dict[str, str]:
    """Where a session in ``cwd`` is in git now, as the transcript's metadata keeps it (issue 49): the
    repository's identity (``git_repo``), the branch (``git_branch``, absent when detached), the HEAD commit
    (``git_head``) and the worktree's folder (``git_worktree``); {} outside git. Read from git's files
    (jobs.repository.identity): no process, a few small reads."""
    from jobs.repository.identity import place_of

    place = place_of(cwd) if cwd else None
    if place is None:
        return {}
    found = {
        "git_repo": place.identity,
        "git_branch": place.branch,
        "git_head": place.head,
        "git_worktree": place.worktree,
    }
    return {k: v[:1000] for k, v in found.items() if v}


def remember_start(state: SessionState, episode_ids: Sequence[int], item_ids: Sequence[int]) -> None:
    """Add to what the session was shown: the first prompt's hook leaves these out."""
    state.episodes = sorted(set(state.episodes) | {int(i) for i in episode_ids})
    state.open_items = sorted(set(state.open_items) | {int(i) for i in item_ids})
