"""Claude Code session files (``~/.claude/projects/<project>/<session-id>.jsonl``) as transcripts.

One JSON object per line; ``user`` and ``assistant`` lines carry an Anthropic Messages ``message``.
What a reader of the file must get right, and what this module does:

- **One transcript per session** (``sessionId``); an assistant message streamed over several lines
  sharing ``message.id`` is joined into one.
- **Only conversation.** ``progress``, ``file-history-snapshot``, ``queue-operation``, ``summary``
  and ``system`` lines are skipped, as are ``isMeta`` notices and types newer versions add.
  ``attachment`` lines are skipped whole: they hold what Claude Code or a hook put into the
  model's context (a SessionStart hook's output, our own ``<previous_episodes>`` block above all),
  and memory stored back as conversation would come back as memory. The same blocks, and
  ``<system-reminder>`` and local-command output, are cut out of user text and tool results; a
  slash command's markup becomes the command as typed (``/model opus``).
- **Compaction summaries are dropped.** When a conversation is compacted Claude Code writes a ``user``
  line flagged ``isCompactSummary`` ("This session is being continued from a previous conversation that ran
  out of context ..."): a model's retelling of the earlier conversation, not the user's words. It is left
  out rather than kept as a ``system`` message because what it retells is stored already (the earlier
  messages above it in the same file, or the earlier session's own transcript), and because it retells what
  was in the context, our injected ``<previous_episodes>`` block included: kept, recalled memory would come
  back as conversation. Older files without the flag are known by that opening sentence. Hook feedback
  written into the user's turn ("Stop hook feedback: ...") is dropped the same way.
- **Subagents are kept apart, i.e. left out.** ``isSidechain`` lines (and newer versions' separate
  ``subagents/agent-*.jsonl`` files, which share the parent's session id) are a subagent's own tool
  steps; the main thread keeps the Task call and the subagent's final report as its result, which
  is what the session decided. Folding them in would multiply tool noise and, for the separate
  files, store one session twice.
- **Project and times from the lines.** ``cwd`` (the project), ``gitBranch`` and the Claude Code
  version go to the record's ``metadata``; ``agent_id`` is ``claude-code``; the ``purpose`` is the
  project's, its git repository's or else ``cc-<folder>-<16 hex of the path>`` (:func:`project_purpose`), which is how recall
  scopes by project (the rule of the hooks, jobs/claude_code/places.py, so a session stored by a hook
  and by ``episodes ingest --format claude-code`` is the same record). ``started_at`` is the
  session's first timestamp.
- **Finished or not.** A file does not say reliably that the session ended (a SessionEnd hook
  leaves a line only when one is configured and prints). So the session is closed when a line names
  the ``SessionEnd`` hook event, or when its last line is older than the idle-close interval
  (``EPISODES_IDLE_CLOSE``, the one ``serve --idle-close`` uses; 30 minutes when that is off);
  otherwise it is stored open, and a later ingest of the grown file, or a hook, closes it. A closed
  session's ``ended_at`` is its last message's time, not the last line's: Claude Code appends
  bookkeeping lines after the conversation, and an ``ended_at`` moving with them would change the
  content hash. Re-ingesting replaces the stored transcript (same session id), never doubles it.
- **Bad lines** are reported with their ``file:line`` and the rest of the file loads.

Messages stay in the Anthropic shape here (with each line's timestamp as ``ts``); validation turns
them into the canonical form (:mod:`jobs.formats.shapes`), condensing the tool output that makes
up most of a multi-MB session.
"""

from __future__ import annotations

import datetime as dt
import getpass
import hashlib
import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

AGENT_ID = "claude-code"
TENANT = "local"  # the tenant of the sessions when none is named
PURPOSE_PREFIX = "cc-"
PURPOSE_DIGEST_HEX = 16  # 64 bits of the project path's SHA-256 (issue 35: 24 bits were forged in 3.5 s)
PURPOSE_SLUG_CHARS = 64 - len(PURPOSE_PREFIX) - 1 - PURPOSE_DIGEST_HEX
_NOT_SLUG = re.compile(r"[^a-z0-9]+")
IDLE_CLOSE_SECONDS = 1800.0  # when idle close is switched off, files still close after this long
MAX_LINE_BYTES = 64 * 1024 * 1024  # one line (one huge tool result) read at most
_CONVERSATION = {"user", "assistant"}
# Blocks a host or hook injected into the context, never the user's words.
_INJECTED = re.compile(
    r"<(system-reminder|previous_episodes|user-prompt-submit-hook|session-start-hook|local-command-stdout"
    r"|local-command-stderr)\b[^>]*>.*?(?:</\1\s*>|\Z)",
    re.DOTALL | re.IGNORECASE,
)

_COMMAND = re.compile(r"<command-(name|args)>(.*?)</command-\1>", re.DOTALL)
# Claude Code's own notice before local command output (an isMeta line in newer versions).
_CAVEAT = "Caveat: The messages below were generated by the user while running local commands."
# Text in the user's turn that the host wrote: a compaction summary (files older than the isCompactSummary
# flag) and hook feedback ("Stop hook feedback:", "PreToolUse:Bash hook error: ...").
_HOST_WRITTEN = re.compile(
    r"\s*(?:This session is being continued from a previous conversation\b|"
    r"(?:[A-Za-z]+(?::[\w*|.-]+)? )?hook (?:feedback|blocking error|error)\b[^\n]*:)"
)

# What reading yields: a location and a transcript record, or a location and why a line was refused.
Item = tuple[str, "dict[str, Any] | str"]


@dataclass
class _Session:
    session_id: str
    first_line: int
    messages: list[dict[str, Any]] = field(default_factory=list)
    by_message_id: dict[str, int] = field(default_factory=dict)
    first_ts: dt.datetime | None = None
    last_ts: dt.datetime | None = None
    ended: bool = False
    metadata: dict[str, str] = field(default_factory=dict)


def default_user() -> str:
    """The user of this machine's sessions when none is named: the login name."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no name for this uid (a container)
        return "local"


def project_purpose(cwd: str) -> str:
    """The purpose of the sessions run in ``cwd``: its git repository's (:func:`repository_purpose`), so
    worktrees and clones of one repository share one memory (issue 49); outside git, the folder's
    (:func:`path_purpose`)."""
    from jobs.repository.identity import place_of  # standard library only: cheap for the hook

    place = place_of(cwd) if cwd else None
    return repository_purpose(place.name, place.identity) if place else path_purpose(cwd)


def repository_purpose(name: str, identity: str) -> str:
    """``cc-<repository name>-<16 hex of its identity>`` (jobs.repository.identity): the remote URL or the
    common folder is hashed with a ``repo:`` prefix, so it never equals a folder's purpose."""
    return _purpose(name, f"repo:{identity}")


def path_purpose(cwd: str) -> str:
    """The purpose of the sessions run in ``cwd`` outside git: ``cc-<folder name>-<16 hex of the full path>``
    (readable, and two folders kept apart: 64 bits of SHA-256, as no look-alike path can be searched
    for; 24 bits were found in seconds). At most 64 characters: the name is cut, never the digest.
    sql/migrations/0028_project_scope_bits.sql computes the same from a stored project path."""
    path = os.path.normpath(os.path.abspath(cwd or "/"))
    return _purpose(os.path.basename(path), path)


def _purpose(name: str, hashed: str) -> str:
    digest = hashlib.sha256(hashed.encode("utf-8", "surrogateescape")).hexdigest()[:PURPOSE_DIGEST_HEX]
    slug = _NOT_SLUG.sub("-", name.lower()).strip("-")[:48] or "root"
    slug = slug[:PURPOSE_SLUG_CHARS].rstrip("-")  # 3 + 44 + 1 + 16 = 64, the purpose's limit
    return f"{PURPOSE_PREFIX}{slug}-{digest}"


def strip_injected(text: str) -> str:
    """``text`` without injected blocks (system reminders, a recall block, hook output)."""
    return _INJECTED.sub("", text).strip() if "<" in text else text


def user_text(text: str) -> str:
    """What the user typed: injected blocks cut out, a slash command's markup
    (``<command-name>/model</command-name><command-args>opus</command-args>...``) as ``/model opus``,
    Claude Code's caveat before local command output dropped."""
    text = strip_injected(text)
    if text.startswith(_CAVEAT) or _HOST_WRITTEN.match(text):
        return ""
    if "<command-name>" in text:
        parts = {k: " ".join(v.split()) for k, v in _COMMAND.findall(text)}
        return f"{parts.get('name', '')} {parts.get('args', '')}".strip()
    return text


def is_empty(path: Path) -> bool:
    """Whether ``path`` holds nothing but blanks (and a byte order mark): Claude Code leaves such session
    files behind (a session opened and left at once). Read until the first other byte."""
    with path.open("rb") as handle:
        first = True
        while chunk := handle.read(1 << 16):
            if first:
                chunk, first = chunk.removeprefix(b"\xef\xbb\xbf"), False
            if chunk.strip():
                return False
    return True


def read_session_file(
    path: Path,
    *,
    tenant_id: str,
    user_id: str,
    idle_close_seconds: float | None,
    now: dt.datetime | None = None,
    closed: bool = False,
) -> Iterator[Item]:
    """The transcripts of one session file, then nothing else: bad lines are yielded as they are met
    (``(path:line, reason)``), each session's record once the whole file is read. ``closed``: the
    caller knows the session ended (its SessionEnd hook fired), whatever the file records."""
    now = now or dt.datetime.now(dt.UTC)
    idle = dt.timedelta(seconds=idle_close_seconds or IDLE_CLOSE_SECONDS)
    sessions: dict[str, _Session] = {}
    default_id: str | None = None
    with path.open("rb") as handle:
        for lineno, raw in enumerate(handle, start=1):
            where = f"{path}:{lineno}"
            if not raw.strip():
                continue
            if len(raw) > MAX_LINE_BYTES:
                yield where, f"line is {len(raw):,} bytes, over {MAX_LINE_BYTES:,}"
                continue
            try:
                line = json.loads(raw.decode("utf-8"))
            except UnicodeDecodeError as exc:
                yield where, f"invalid UTF-8 at byte {exc.start}"
                continue
            except json.JSONDecodeError as exc:  # the column in its line, as ingest tells it for JSONL
                yield where, f"not valid JSON at column {exc.colno}: {exc.msg}"
                continue
            except RecursionError:
                yield where, "not valid JSON: nested too deeply"
                continue
            if not isinstance(line, dict):
                yield where, f"not a Claude Code line (a JSON {type(line).__name__}, expected an object)"
                continue
            kind = line.get("type")
            if not isinstance(kind, str):
                yield where, "not a Claude Code line (no type)"
                continue
            sid = line.get("sessionId") if isinstance(line.get("sessionId"), str) else None
            default_id = default_id or sid
            session_id = sid or default_id or path.stem
            session = sessions.get(session_id)
            if session is None:
                session = sessions[session_id] = _Session(session_id, lineno)
            _note_line(session, line)
            if (
                kind not in _CONVERSATION
                or line.get("isSidechain") is True
                or line.get("isMeta") is True
                or line.get("isCompactSummary") is True
            ):
                continue
            problem = _add_message(session, kind, line)
            if problem:
                yield where, problem
    for session in sessions.values():
        if not session.messages:
            continue  # only snapshots, notices or subagent steps: nothing was said
        ended = closed or session.ended or (session.last_ts is not None and now - session.last_ts >= idle)
        said = [t for m in session.messages if (t := _timestamp(m.get("ts"))) is not None]
        end = max(said) if said else session.last_ts
        record: dict[str, Any] = {
            "tenant_id": tenant_id,
            "user_id": user_id,
            "session_id": session.session_id,
            "agent_id": AGENT_ID,
            "purpose": project_purpose(session.metadata.get("project") or "/"),
            "started_at": session.first_ts.isoformat() if session.first_ts else None,
            "ended_at": end.isoformat() if ended and end else None,
            "messages": session.messages,
        }
        if session.metadata:
            record["metadata"] = dict(session.metadata)
        yield f"{path}:{session.first_line}", record


def _timestamp(value: Any) -> dt.datetime | None:
    if not isinstance(value, str):
        return None
    try:
        stamp = dt.datetime.fromisoformat(value)
    except ValueError:
        return None
    return stamp if stamp.tzinfo else stamp.replace(tzinfo=dt.UTC)


def _note_line(session: _Session, line: dict[str, Any]) -> None:
    """Times, project and the end of the session, from any line (skipped ones too)."""
    stamp = _timestamp(line.get("timestamp"))
    if stamp is not None:
        session.first_ts = stamp if session.first_ts is None else min(session.first_ts, stamp)
        session.last_ts = stamp if session.last_ts is None else max(session.last_ts, stamp)
    for key, name in (("cwd", "project"), ("gitBranch", "git_branch"), ("version", "claude_code_version")):
        value = line.get(key)
        if isinstance(value, str) and value and name not in session.metadata:
            session.metadata[name] = value[:1000]
    for holder in (line, line.get("data"), line.get("attachment")):
        if isinstance(holder, dict) and holder.get("hookEvent") == "SessionEnd":
            session.ended = True


def _add_message(session: _Session, kind: str, line: dict[str, Any]) -> str | None:
    """Add a user or assistant line's message; the reason when it has none to add."""
    message = line.get("message")
    if not isinstance(message, dict):
        return f"{kind} line without a message object"
    if "content" not in message:
        return f"{kind} line whose message has no content"
    content = message["content"]
    if kind == "user":
        content = _clean_user(content)
        if content is None:
            return None  # only injected text
    elif not isinstance(content, (str, list)):
        return f"assistant message content is a {type(content).__name__}, expected text or blocks"
    stamp = _timestamp(line.get("timestamp"))
    ts = {"ts": stamp.isoformat()} if stamp else {}
    message_id = message.get("id")
    if kind == "assistant" and isinstance(message_id, str) and message_id in session.by_message_id:
        joined = session.messages[session.by_message_id[message_id]]
        joined["content"] = _blocks(joined["content"]) + _blocks(content)
        return None
    if kind == "assistant" and isinstance(message_id, str):
        session.by_message_id[message_id] = len(session.messages)
    session.messages.append({"role": kind, "content": content, **ts})
    return None


def _blocks(content: Any) -> list[Any]:
    return [{"type": "text", "text": content}] if isinstance(content, str) else list(content)


def _clean_user(content: Any) -> Any:
    """User content without injected blocks; None when nothing of the user's is left."""
    if isinstance(content, str):
        text = user_text(content)
        return text or None
    if not isinstance(content, list):
        return content  # validation names what is wrong with it
    kept: list[Any] = []
    for block in content:
        if isinstance(block, dict) and block.get("type") == "text" and isinstance(block.get("text"), str):
            text = user_text(block["text"])
            if text:
                kept.append({**block, "text": text})
        elif isinstance(block, dict) and block.get("type") == "tool_result":
            kept.append({**block, "content": _clean_result(block.get("content"))})
        elif isinstance(block, str):
            text = user_text(block)
            if text:
                kept.append(text)
        else:
            kept.append(block)
    return kept or None


def _clean_result(content: Any) -> Any:
    if isinstance(content, str):
        return strip_injected(content)
    if isinstance(content, list):
        return [
            {**b, "text": strip_injected(b["text"])} if isinstance(b, dict) and isinstance(b.get("text"), str) else b
            for b in content
        ]
    return content
