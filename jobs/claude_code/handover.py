"""A Claude Code session file as the transcript records we store (the reader is jobs.formats.claude_code).

The SessionEnd / PreCompact hooks and ``episodes claude-code sync`` read a session through here,
so they hand over the same record as `episodes ingest --format claude-code`: the project's
purpose, and a closed session ending at its last message (the reader's rules). A later hand-over
of a session is then ``unchanged``, never a second summary. What this adds is closing a session
whose SessionEnd hook fired, which the file itself does not always record.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from jobs.claude_code import session_state
from jobs.claude_code.places import AGENT_ID, project_purpose
from jobs.formats.claude_code import read_session_file

Item = tuple[str, "dict[str, Any] | str"]  # a location and a record, or a location and why a line was refused


def session_records(
    path: Path,
    *,
    tenant_id: str,
    user_id: str,
    close: bool,
    idle_close_seconds: float | None,
    cwd: str | None = None,
    place: dict[str, str] | None = None,
) -> Iterator[Item]:
    """The records of one session file (and its bad lines). With ``close`` every session in it is
    closed now (SessionEnd fired); without, a session is closed only when it has been idle for the
    idle-close interval (the reader's rule), and left open otherwise. ``place``: where the session ended
    in git (None: as its state file says)."""
    for where, item in read_session_file(
        path, tenant_id=tenant_id, user_id=user_id, idle_close_seconds=idle_close_seconds, closed=close
    ):
        yield where, item if isinstance(item, str) else settled(item, cwd, place)


def settled(record: dict[str, Any], cwd: str | None = None, place: dict[str, str] | None = None) -> dict[str, Any]:
    """``record`` as stored by the hooks: the project's purpose from the hook's ``cwd`` when the file
    named none (the reader's from the lines otherwise), and where the session ended in git.

    The place in git (branch, HEAD commit, worktree, repository: :func:`session_state.git_place`) is the
    one its SessionEnd hook recorded in the session's state, so the hook's hand-over and a later
    `episodes claude-code sync` store the same record (its content hash covers the metadata: a place
    read again later, after a commit, would summarise the session again). A session whose hook never
    ran keeps the file's own ``git_branch`` and no HEAD."""
    metadata = record.get("metadata") or {}
    if cwd and not (isinstance(metadata, dict) and metadata.get("project")):
        record = {**record, "agent_id": AGENT_ID, "purpose": project_purpose(cwd)}
    if place is None:
        place = session_state.load(str(record.get("session_id") or "")).git
    if place and isinstance(metadata, dict):
        record = {**record, "metadata": {**metadata, **place}}
    return record
