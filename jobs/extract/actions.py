"""What a coding session *did*: the files the agent wrote, edited or read and the commands it ran (issue 36).

A later session asks "which file did we put that in?", "how did we start the server?". In a coding
agent's session those answers are rarely said: they sit in the agent's tool calls (``Edit`` with a
``file_path``, ``Bash`` with a ``command``), which the canonical form keeps as one line per call
(``[tool call Bash: command="mix phx.server", description="Start Phoenix server"]``,
:mod:`jobs.formats.shapes`). This module turns those calls, never their results, into short action
lines such as ``Ran `mix phx.server` (Start Phoenix server).`` or ``Edited /tmp/example.py.``, which
the episode keeps beside what was said (:mod:`jobs.extract.lines`).

Which calls: those whose arguments name a file (``file_path``, ``notebook_path``, ``path``) or a
command (``command``, ``cmd``), whatever the host calls the tool. The verb comes from the tool's
name (write, edit, read; ``Ran`` for a command). Commands that only look around (``ls``, ``cat``,
``grep``, ``tail`` ...) are left out: they say where the agent looked, not what was done. Tool results
are never read: what a tool printed is context, not the session's action, and may hold anything.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass

from jobs.extract.rules.records import word_list

ACTION_SPEAKER = "assistant (tool call)"  # how an action line is labelled in the block: not something said
_CALL = re.compile(r"^\[tool call ([^:\]\n]{1,100})(?::(.*))?\]$")
# key="json string" | key=json scalar, as jobs.formats.shapes writes arguments (a cut value ends with "…").
_ARG = re.compile(r'(?:^|, )([A-Za-z_][\w-]{0,40})=("(?:[^"\\]|\\.)*(?:"|…)|[^,]*)')
# Which arguments name a file or a command, which words of a tool's name say what it did, and the commands that
# only look around (where the agent looked, not what it did): data, in jobs/extract/rules/words.toml.
_FILE_ARGS = word_list("file_arguments")
_COMMAND_ARGS = word_list("command_arguments")
_WRITE = re.compile("|".join(word_list("write_tool_words")), re.IGNORECASE)
_EDIT = re.compile("|".join(word_list("edit_tool_words")), re.IGNORECASE)
_READ = re.compile("|".join(word_list("read_tool_words")), re.IGNORECASE)
_LOOKING = frozenset(word_list("looking_commands"))
# ... unless it writes somewhere or goes on to something else ("cat a > b", "cd app && mix test").
_DOES = re.compile(r">|&&|;|\|\|")
_DESCRIPTION_CHARS = 120
COMMAND_CHARS = 200


@dataclass(frozen=True)
class Action:
    """One thing the agent did: ``kind`` is ``write``, ``edit``, ``command`` or ``read``; ``text`` the line."""

    kind: str
    text: str


def actions(content: str) -> Iterator[Action]:
    """The actions of a canonical tool message's call lines, in order (results are skipped)."""
    for raw in content.splitlines():
        m = _CALL.match(raw.strip())
        if m is None:
            continue
        tool, args = m.group(1).strip(), _arguments(m.group(2) or "")
        action = _action(tool, args)
        if action is not None:
            yield action


def _arguments(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in _ARG.findall(text.strip()):
        value = value.strip()
        if value.endswith("…"):  # cut by the canonical form: the head is all there is
            value = value[:-1]
            value = value + '"' if value.startswith('"') and not value.endswith('"') else value
        try:
            decoded = json.loads(value)
        except ValueError:
            decoded = value.strip('"')
        if isinstance(decoded, str):
            out.setdefault(key, " ".join(decoded.split()))
    return out


def _action(tool: str, args: dict[str, str]) -> Action | None:
    command = next((args[k] for k in _COMMAND_ARGS if args.get(k)), "")
    path = next((args[k] for k in _FILE_ARGS if args.get(k)), "")
    if command and not (path and " " not in command):  # a file tool's one-word sub-command ("view") is no shell
        first = command.split()[0].rsplit("/", 1)[-1]
        if first in _LOOKING and not _DOES.search(command):
            return None
        shown = command if len(command) <= COMMAND_CHARS else command[: COMMAND_CHARS - 3].rstrip() + "..."
        description = args.get("description", "")[:_DESCRIPTION_CHARS].strip()
        return Action("command", f"Ran `{shown}`" + (f" ({description})." if description else "."))
    if not path or len(path) > 300:
        return None
    verb = command or tool  # the sub-command names the operation when there is one
    if _WRITE.search(verb):
        return Action("write", f"Wrote {path}.")
    if _EDIT.search(verb) and args.get("old_string") == "":
        return Action("write", f"Wrote {path}.")  # an edit of nothing into something creates the file
    if _EDIT.search(verb):
        return Action("edit", f"Edited {path}.")
    if _READ.search(verb):
        return Action("read", f"Read {path}.")
    return None
