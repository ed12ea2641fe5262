"""What this machine keeps of erased Claude Code sessions, cleared when `episodes forget` erases their user.

The database forgets a user's sessions (and refuses them from then on, migration 0029), but the
hooks and `episodes claude-code sync` keep two records of their own under $EPISODES_HOME:

- the sync ledger (``claude-code/synced.json``): each session file's path (the project's folder and
  the session id) with its size and time;
- the hooks' per-session state (``claude-code/sessions/<session id>.json``): the episode and item ids
  a session was shown, its folder and the path of its session file.

:func:`clear` removes those of the given session ids, and lists the session files Claude Code itself
still keeps of them (``~/.claude/projects/<project>/<session id>.jsonl``): those are Claude Code's,
not ours, and stay; `episodes forget` says where they are. The next sync reads them again and the
database refuses them, naming the day of the erasure (said once: a file is read again when it changes).

Only this machine: an erasure through the HTTP API or MCP reaches the database, not the files of the
machines whose hooks handed the sessions over.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path

from jobs.claude_code.places import claude_home, state_dir
from jobs.claude_code.sync import load_ledger, save_ledger
from jobs.wording import counted


@dataclass
class Cleared:
    """What :func:`clear` removed (or, with ``dry_run``, would remove) and what Claude Code still holds."""

    ledger_entries: int = 0
    state_files: int = 0
    claude_copies: list[Path] = field(default_factory=list)  # Claude Code's own session files, left in place
    projects: Path | None = None  # where Claude Code keeps them

    def lines(self, *, dry_run: bool = False) -> list[str]:
        verb = "would remove" if dry_run else "removed"
        out = [
            f"this machine's Claude Code records of these sessions: {verb} "
            f"{counted(self.ledger_entries, 'sync-ledger entry', 'sync-ledger entries')} and "
            f"{counted(self.state_files, 'hook state file')}"
        ]
        if self.claude_copies:
            shown = ", ".join(str(p) for p in self.claude_copies[:5])
            more = f" (+{len(self.claude_copies) - 5} more)" if len(self.claude_copies) > 5 else ""
            out.append(
                f"Claude Code still holds its own copies of {counted(len(self.claude_copies), 'session file')} "
                f"in {self.projects}: {shown}{more}. They are Claude Code's files and were left in place: "
                "delete them to remove these sessions from this machine (`episodes claude-code sync` reports "
                "them once as erased and never stores them)."
            )
        elif self.projects is not None:
            out.append(f"Claude Code holds no copy of these sessions in {self.projects}.")
        return out


def _plain(session_id: str) -> bool:
    """A session id that can name a file in a folder (nothing else is looked for)."""
    return (
        bool(session_id)
        and session_id not in (".", "..")
        and Path(session_id).name == session_id
        and "\\" not in session_id
        and "\0" not in session_id
    )


def clear(
    session_ids: Collection[str], *, base: Path | None = None, projects: Path | None = None, dry_run: bool = False
) -> Cleared:
    """Remove the sync-ledger entries and hook state files of ``session_ids``; list Claude Code's own files
    of them under ``projects`` (default: ~/.claude/projects). ``base``: $EPISODES_HOME (default: as the hooks)."""
    ids = {s for s in session_ids if _plain(s)}
    folder = projects or claude_home() / "projects"
    done = Cleared(projects=folder if folder.is_dir() else None)
    if not ids:
        return done
    ledger = load_ledger(base)
    gone = [key for key in ledger if Path(key).stem in ids]
    done.ledger_entries = len(gone)
    if gone and not dry_run:
        for key in gone:
            del ledger[key]
        save_ledger(ledger, base)
    for sid in sorted(ids):
        path = state_dir(base) / f"{sid}.json"
        if path.is_file():
            done.state_files += 1
            if not dry_run:
                path.unlink(missing_ok=True)
    if done.projects is not None:
        done.claude_copies = sorted(p for p in done.projects.glob("*/*.jsonl") if p.stem in ids and p.is_file())
    return done


__all__ = ["Cleared", "clear"]
