"""Which evaluation data is tuning data (issue 47): said in every report of `episodes eval` and on the docs.

Every file in the project's shared data folder (``../shared/data``: LoCoMo, sde-bench, the Claude Code
sessions) has been read while choosing the offline extractor's rules and recall's settings, so its
figures are tuning figures, whatever half or subset they come from. Held-out figures come from data
kept aside by whoever checks the project, not in this tree. A path elsewhere is held out only if
nobody read it while choosing, which the tool cannot know; the report says so.
"""

from __future__ import annotations

from pathlib import Path

TUNING = (
    "tuning data: everything in ../shared/data (LoCoMo, sde-bench, the Claude Code sessions) was read while "
    "choosing the extractor's rules and recall's settings; these are not held-out figures"
)
UNKNOWN = "data outside ../shared/data: held out only if nobody read it while choosing rules or settings"


def in_shared_data(path: Path) -> bool:
    """True when ``path`` lies in a folder ``shared/data`` (the project's evaluation data, all of it read)."""
    parts = path.resolve().parts
    return any(parts[i : i + 2] == ("shared", "data") for i in range(len(parts) - 1))


def data_status(paths: list[Path]) -> str:
    """The note printed with a report on ``paths``: tuning data, or data whose status the tool cannot know."""
    return TUNING if paths and all(in_shared_data(p) for p in paths) else UNKNOWN
