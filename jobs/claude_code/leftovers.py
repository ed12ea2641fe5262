"""What `episodes claude-code uninstall` removes besides the hooks, once no install is left under this
EPISODES_HOME.

Install records its choices and the places it wrote to ($EPISODES_HOME/claude-code/install.json,
jobs.claude_code.choices); the hooks and sync keep the sync ledger (``claude-code/synced.json``), one
state file per session (``claude-code/sessions/``) and their log (``logs/claude-code-hooks.log``), which
together say which projects the user worked on, and when. An uninstall that leaves no hooks of ours in
any settings file install recorded (nor an MCP registration) removes all of them, so nothing of the
integration stays behind; while another place still holds our hooks (a project installed besides the
user scope), the record is kept, without the places just emptied, for the hooks still in use.

The memory itself (sessions and episodes in the database) is not the integration's to remove: uninstall
says so, and `episodes forget` erases it.
"""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

from jobs.claude_code import choices, hook_settings
from jobs.claude_code.places import home, log_file


def integration_files(base: Path | None = None) -> list[Path]:
    """The files and folders the integration keeps under EPISODES_HOME (those that exist)."""
    folder = (base or home()) / "claude-code"
    found = [folder / choices.FILE_NAME, folder / "synced.json", folder / "sessions", log_file(base)]
    return [p for p in found if p.exists()]


def holds_ours(path: Path) -> bool:
    """Whether the settings file ``path`` still holds hooks of ours (one that cannot be read counts as yes)."""
    try:
        return bool(hook_settings.installed_commands(hook_settings.read(path)))
    except Exception:
        return True


def still_installed(saved: choices.Choices, emptied: list[Path], unregistered: list[str]) -> choices.Choices:
    """``saved`` without the places an uninstall just emptied and the registrations it removed; the
    places that still hold our hooks stay."""
    gone = {str(p.absolute()) for p in emptied}
    places = tuple(p for p in saved.places if p not in gone and holds_ours(Path(p)))
    return replace(saved, places=places, mcp=tuple(m for m in saved.mcp if m not in unregistered))


def remove(base: Path | None = None) -> list[Path]:
    """Remove the integration's files under EPISODES_HOME; the ones removed."""
    removed = integration_files(base)
    for path in removed:
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
    folder = (base or home()) / "claude-code"
    if folder.is_dir() and not any(folder.iterdir()):
        folder.rmdir()
    return removed
