"""Episode lines: the verbatim lines of a session that an episode keeps (issue 36).

A summary says what a session was about; a later session asks what was *said*: the version chosen,
the name of the dog, the rule that was settled. So each session episode keeps, beside its summary and
events, up to :data:`MAX_LINES` short lines of what the user and the agent said, verbatim, and recall
quotes the ones that best match the next opening message under the episode they come from
(:mod:`jobs.recall.fitting`). They are stored in ``episode_lines`` with the episode, so they outlive the
transcript (retention) and go with the episode (erasure).

Which lines:

- What a person or the model *said*: messages of role ``user`` and ``assistant``, never tool
  output (tool results), system text, hook output or injected blocks
  (:func:`jobs.extract.rules.agent.clean_said`), thinking or attachments placeholders.
- What the agent *did*, from its tool calls: the files it wrote, edited or read and the commands it ran
  (:mod:`jobs.extract.actions`), as lines of their own under the speaker ``assistant (tool call)``
  ("Ran `mix phx.server` (Start Phoenix server).", "Wrote /tmp/example.py."), at most
  :data:`MAX_ACTION_SHARE` of the lines.
- A message is cut into lines of whole sentences of at most :data:`LINE_CHARS` characters; a longer
  sentence is clipped with "...". Lines without a word of three letters are dropped, and so are
  repeats.
- When a session has more lines than :data:`MAX_LINES`, the ones kept are those that carry specifics
  (numbers, versions, names, identifiers, file names, quoted values), the user's before the agent's,
  and never the agent's working narration ("Let me check...") while there is anything else; they stay
  in the session's order.

The same action done again is one line (ten edits of one file are "Edited <file>." once). Action lines
rank among the others by what they are: a file written or edited, then a command, then a file read.

The messages were redacted before the extractor saw them (jobs.summarize.claim), so the lines are too.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from jobs.extract.actions import ACTION_SPEAKER, actions
from jobs.extract.rules.agent import clean_said, is_narration, is_tool_text
from jobs.extract.rules.specifics import LINE_SPECIFIC
from jobs.extract.rules.text import split_sentences
from jobs.extract.rules.values import count, value, value_map
from jobs.models import Message
from jobs.store import EpisodeLine

MAX_LINES = 60  # lines kept per episode
LINE_CHARS = 300  # characters per line at most
MAX_ACTION_SHARE = 1 / 3  # of the lines kept, at most this share are actions (tool calls)
# How much a line is worth (rules/values.toml): an action line by its kind, against a said one, whose worth is its
# specifics (up to lines.specifics_counted), more for the user's, less for an assistant's narration.
ACTION_WEIGHT = value_map("lines.action_weight")
_SPECIFICS_COUNTED, _USER, _NARRATION = count("lines.specifics_counted"), value("lines.user"), value("lines.narration")
_MIN_CHARS = 12
_WORD3 = re.compile(r"[^\W\d_]{3,}")
_PLACEHOLDER = re.compile(r"^\s*\[(?:thinking|image|audio|document|file|attachment)\b[^\]]*\]\s*$", re.IGNORECASE)
# What questions ask about: numbers and versions, capitalised names inside a sentence, identifiers and
# paths (snake_case, dotted, slashed, backticked), quoted values (jobs/extract/rules/specifics.py).
_SPECIFIC = LINE_SPECIFIC


def episode_lines(messages: Sequence[Message], *, limit: int = MAX_LINES) -> list[EpisodeLine]:
    """The lines of ``messages`` an episode keeps, in the session's order (see the module docstring)."""
    found: list[tuple[float, int, EpisodeLine]] = []
    seen: set[str] = set()
    acted: list[tuple[float, int, EpisodeLine]] = []
    for index, message in enumerate(messages):
        if message.role == "tool":
            for action in actions(message.content):
                key = " ".join(action.text.lower().split())
                if key not in seen:
                    seen.add(key)
                    line = EpisodeLine(index, ACTION_SPEAKER, message.ts, action.text)
                    acted.append((ACTION_WEIGHT[action.kind], len(found) + len(acted), line))
            continue
        if message.role not in ("user", "assistant"):
            continue
        for text in _lines_of(message.content):
            key = " ".join(text.lower().split())
            if key in seen:
                continue
            seen.add(key)
            line = EpisodeLine(index, message.speaker, message.ts, text)
            found.append((_weight(line, message.role), len(found) + len(acted), line))
    room = max(int(limit * MAX_ACTION_SHARE), 1)
    found += sorted(acted, key=lambda f: (-f[0], f[1]))[:room]
    if len(found) > limit:
        found = sorted(found, key=lambda f: (-f[0], f[1]))[:limit]
    return [line for _, _, line in sorted(found, key=lambda f: f[1])]  # in the session's order


def _lines_of(content: str) -> list[str]:
    """A message's said text cut into lines of whole sentences within LINE_CHARS."""
    said = clean_said(content)
    if not said.strip() or is_tool_text(said) or _PLACEHOLDER.match(said):
        return []
    lines: list[str] = []
    current = ""
    for sentence in split_sentences(said, max_sentences=400, max_chars=LINE_CHARS):
        sentence = " ".join(sentence.split())
        if is_tool_text(sentence) or _PLACEHOLDER.match(sentence):
            continue
        if len(sentence) > LINE_CHARS:
            sentence = sentence[: LINE_CHARS - 3].rstrip() + "..."
        if current and len(current) + 1 + len(sentence) > LINE_CHARS:
            lines.append(current)
            current = sentence
        else:
            current = f"{current} {sentence}" if current else sentence
    if current:
        lines.append(current)
    return [line for line in lines if len(line) >= _MIN_CHARS and _WORD3.search(line.replace("[code]", ""))]


def _weight(line: EpisodeLine, role: str) -> float:
    """How much a line is worth keeping when a session has more than the limit."""
    specifics = len(_SPECIFIC.findall(line.text))
    weight = min(specifics, _SPECIFICS_COUNTED) + (_USER if role == "user" else 0.0)
    if role == "assistant" and is_narration(line.text):
        weight += _NARRATION
    return weight
