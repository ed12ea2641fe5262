"""Host message shapes in, one canonical message form out.

Hosts hand sessions over in the shapes they already have: our plain ``{role, content, ts?, name?}``,
Anthropic Messages messages (a string or content blocks: text, tool_use, tool_result, thinking,
image, document, server-tool blocks) and OpenAI Chat Completions messages (roles system, developer,
user, assistant, tool; content a string, null or parts; ``tool_calls``; ``tool_call_id``). The
prompts, grounding (evidence indexes point at canonical messages), redaction and recall read one
form only, the canonical one: ``{role: user|assistant|system|tool, content: str, ts?, name?}``.

How a host message maps (its order kept):

- What a person or the model *said* (text blocks and parts, a refusal) stays verbatim under the
  host message's role (``developer`` becomes ``system``). Images, audio, documents and files become
  placeholders such as ``[image]``; thinking is left out unless asked for.
- Tool traffic becomes canonical messages of role ``tool``, never ``user``: a call is one line
  ``[tool call Bash: command="pytest -q"]`` (arguments shortened), a result is
  ``[tool result Bash: ...]`` (or ``[tool error ...]``) condensed to ``tool_result_chars``, its tool
  named by pairing tool_use / tool_call ids with results. Consecutive tool lines of a transcript
  share one canonical message, so a session of a thousand tool calls stays within the message limit.
- A message already in our plain shape (a string ``content`` and no tool fields) passes unchanged,
  so the content hash of a plain transcript is what it always was.

The stored transcript is this canonical form; the raw blocks are not kept (tool output beyond the
condensed size is gone, on purpose: it is most of a coding session's bytes and none of its memory).
Re-summarising works from the canonical form, which keeps who spoke and every tool's name.

This module imports nothing from ``jobs``: it sits below :mod:`jobs.models`, which calls it while
validating a transcript.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

TOOL_RESULT_CHARS = 400  # default condensed size of one tool result (Settings.tool_result_chars)
TOOL_ARG_CHARS = 120  # one argument's value in a tool-call line
TOOL_CALL_CHARS = 400  # a whole tool-call line
ROLES = {
    "user": "user",
    "assistant": "assistant",
    "system": "system",
    "developer": "system",
    "tool": "tool",
    "function": "tool",
}
_NUL = re.compile(r"\x00")


@dataclass(frozen=True)
class ShapeOptions:
    """How host messages are condensed. ``tool_result_chars``: characters kept of each tool result
    (head and tail); ``keep_thinking``: keep thinking blocks as ``[thinking: ...]`` lines."""

    tool_result_chars: int = TOOL_RESULT_CHARS
    keep_thinking: bool = False


class ShapeError(ValueError):
    """A message that is none of the accepted shapes; the text names where (``messages.3.content.1``)."""


@dataclass
class _Piece:
    kind: str  # "said" or "tool"
    text: str


def is_plain(message: dict[str, Any]) -> bool:
    """Our own shape: a string content and none of the OpenAI tool (or refusal) fields."""
    return (
        isinstance(message.get("content"), str)
        and message.get("role") in ("user", "assistant", "system", "tool")
        and not message.get("tool_calls")
        and not message.get("tool_call_id")
        and not message.get("function_call")
        and not message.get("refusal")
    )


def normalise_messages(raw: Sequence[Any], options: ShapeOptions | None = None) -> list[dict[str, Any]]:
    """The canonical messages of a host transcript, in order (see the module docstring).

    Raises :class:`ShapeError` naming the first message that fits no accepted shape."""
    options = options or ShapeOptions()
    tool_names: dict[str, str] = {}
    out: list[dict[str, Any]] = []
    for index, message in enumerate(raw):
        where = f"messages.{index}"
        if not isinstance(message, dict):
            raise ShapeError(f"{where}: expected a message object, got {type(message).__name__}")
        if is_plain(message):
            out.append(message)
            continue
        role = message.get("role")
        if role not in ROLES:
            raise ShapeError(f"{where}.role: {role!r} is not one of {', '.join(ROLES)}")
        base = {k: message[k] for k in ("ts",) if message.get(k) is not None}
        name = message.get("name") if ROLES[role] != "tool" else None
        for piece in _pieces(message, where, tool_names, options):
            if piece.kind == "tool":
                previous = out[-1] if out else None
                if previous is not None and previous.get("_tool_lines"):
                    previous["content"] += "\n" + piece.text
                else:
                    out.append({"role": "tool", "content": piece.text, **base, "_tool_lines": True})
            else:
                said = {"role": ROLES[role], "content": piece.text, **base}
                if name is not None:
                    said["name"] = name
                out.append(said)
    for message in out:
        message.pop("_tool_lines", None)
    return out


def _pieces(message: dict[str, Any], where: str, tool_names: dict[str, str], options: ShapeOptions) -> list[_Piece]:
    role = ROLES[message["role"]]
    content = message.get("content")
    pieces: list[_Piece] = []
    if role == "tool":  # OpenAI: a tool's reply to one call (legacy role "function" names itself)
        call_id = message.get("tool_call_id")
        tool = tool_names.get(call_id, "") if isinstance(call_id, str) else ""
        tool = tool or (message.get("name") if isinstance(message.get("name"), str) else "") or ""
        return [_Piece("tool", _result_line(tool, _flatten(content, f"{where}.content"), False, options))]
    if isinstance(content, str):
        pieces.append(_Piece("said", content))
    elif isinstance(content, list):
        for k, block in enumerate(content):
            pieces.extend(_block(block, f"{where}.content.{k}", tool_names, options))
    elif content is not None:
        raise ShapeError(f"{where}.content: expected a string, null or a list of blocks, got {type(content).__name__}")
    if isinstance(message.get("refusal"), str) and message["refusal"]:
        pieces.append(_Piece("said", message["refusal"]))
    calls = message.get("tool_calls")
    if calls is not None and not isinstance(calls, list):
        raise ShapeError(f"{where}.tool_calls: expected a list")
    for k, call in enumerate(calls or []):
        pieces.append(_openai_call(call, f"{where}.tool_calls.{k}", tool_names))
    if isinstance(message.get("function_call"), dict):  # the legacy single function call
        pieces.append(_openai_call({"function": message["function_call"]}, f"{where}.function_call", tool_names))
    return _merge_said(pieces)


def _merge_said(pieces: list[_Piece]) -> list[_Piece]:
    """Adjacent spoken blocks of one message form one canonical message (joined by a blank line)."""
    merged: list[_Piece] = []
    for piece in pieces:
        if piece.kind == "said" and not piece.text.strip():
            continue
        if merged and piece.kind == "said" and merged[-1].kind == "said":
            merged[-1] = _Piece("said", merged[-1].text + "\n\n" + piece.text)
        else:
            merged.append(piece)
    return merged


def _block(block: Any, where: str, tool_names: dict[str, str], options: ShapeOptions) -> list[_Piece]:
    if isinstance(block, str):  # seen in the wild: a bare string among the blocks
        return [_Piece("said", block)]
    if not isinstance(block, dict):
        raise ShapeError(f"{where}: expected a content block object, got {type(block).__name__}")
    kind = block.get("type")
    if kind == "text" or (kind is None and isinstance(block.get("text"), str)):
        text = block.get("text")
        if not isinstance(text, str):
            raise ShapeError(f"{where}.text: expected a string")
        return [_Piece("said", text)]
    if kind == "refusal" and isinstance(block.get("refusal"), str):  # OpenAI part
        return [_Piece("said", block["refusal"])]
    if kind in ("thinking", "redacted_thinking"):
        if options.keep_thinking and isinstance(block.get("thinking"), str):
            return [_Piece("said", f"[thinking: {block['thinking']}]")]
        return []
    if kind in ("tool_use", "server_tool_use", "mcp_tool_use"):
        name = str(block.get("name") or "tool")
        if isinstance(block.get("id"), str):
            tool_names[block["id"]] = name
        return [_Piece("tool", _call_line(name, block.get("input")))]
    if isinstance(kind, str) and kind.endswith("tool_result"):  # tool_result, web_search_tool_result, ...
        return [_tool_result(block, kind, where, tool_names, options)]
    placeholder = _placeholder(block, kind)
    if placeholder is not None:
        return [_Piece("said", placeholder)]
    # An unknown block type (a newer API's, a host's own): its text if it has one, else nothing.
    text = block.get("text")
    return [_Piece("said", text)] if isinstance(text, str) else []


def _tool_result(
    block: dict[str, Any], kind: str, where: str, tool_names: dict[str, str], options: ShapeOptions
) -> _Piece:
    """A tool's output, named by the call it answers (or by its block type: web_search_tool_result)."""
    call_id = block.get("tool_use_id")
    tool = tool_names.get(call_id, "") if isinstance(call_id, str) else ""
    if not tool and kind != "tool_result":
        tool = kind.removesuffix("_tool_result")
    text = _flatten(block.get("content"), f"{where}.content")
    return _Piece("tool", _result_line(tool, text, bool(block.get("is_error")), options))


def _placeholder(block: dict[str, Any], kind: Any) -> str | None:
    """What stands for media in the text: [image], [audio], [document: title] (None: not media)."""
    if kind in ("image", "image_url"):
        return "[image]"
    if kind in ("input_audio", "audio"):
        return "[audio]"
    if kind in ("document", "file"):
        title = block.get("title")
        if not title and isinstance(block.get("file"), dict):
            title = block["file"].get("filename")
        return f"[{kind}: {title}]" if isinstance(title, str) and title else f"[{kind}]"
    return None


def _openai_call(call: Any, where: str, tool_names: dict[str, str]) -> _Piece:
    if not isinstance(call, dict):
        raise ShapeError(f"{where}: expected a tool call object")
    function = call.get("function") or call.get("custom") or {}
    if not isinstance(function, dict):
        raise ShapeError(f"{where}.function: expected an object with name and arguments")
    name = str(function.get("name") or "tool")
    if isinstance(call.get("id"), str):
        tool_names[call["id"]] = name
    arguments = function.get("arguments", function.get("input"))
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            pass  # not JSON: shown as the string it is
    return _Piece("tool", _call_line(name, arguments))


def _flatten(content: Any, where: str) -> str:
    """A tool result's content as text: a string, or blocks (text kept, images as placeholders)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for k, block in enumerate(content):
            if isinstance(block, str):
                parts.append(block)
            elif isinstance(block, dict):
                if isinstance(block.get("text"), str):
                    parts.append(block["text"])
                elif block.get("type") in ("image", "image_url"):
                    parts.append("[image]")
                elif block.get("type") == "document":
                    parts.append("[document]")
                elif isinstance(block.get("content"), (str, list)):  # nested results (search results)
                    parts.append(_flatten(block["content"], f"{where}.{k}"))
                elif isinstance(block.get("url"), str):
                    parts.append(str(block.get("title") or block["url"]))
            else:
                raise ShapeError(f"{where}.{k}: expected a block object or a string")
        return "\n".join(p for p in parts if p)
    if isinstance(content, dict):
        if isinstance(content.get("text"), str):
            return str(content["text"])
        return json.dumps(content, ensure_ascii=False, sort_keys=True)
    return str(content)


def _call_line(name: str, arguments: Any) -> str:
    if isinstance(arguments, dict):
        args = ", ".join(f"{key}={_short(value)}" for key, value in arguments.items())
    elif arguments is None or arguments == "":
        args = ""
    else:
        args = _short(arguments)
    line = f"[tool call {_one_line(name)}: {args}]" if args else f"[tool call {_one_line(name)}]"
    return line if len(line) <= TOOL_CALL_CHARS else line[: TOOL_CALL_CHARS - 2] + "…]"


def _short(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, sort_keys=True)
    return text if len(text) <= TOOL_ARG_CHARS else text[: TOOL_ARG_CHARS - 1] + "…"


def _one_line(text: str) -> str:
    return " ".join(text.split())[:100]


def condense(text: str, limit: int) -> str:
    """``text`` within ``limit`` characters: its head and tail (where a command's output says how it
    ended), the cut marked with how much was left out."""
    text = _NUL.sub("", text).strip()
    if len(text) <= limit:
        return text
    head = max(limit * 2 // 3, 1)
    tail = max(limit - head, 0)
    cut = len(text) - head - tail
    return f"{text[:head]} …[{cut:,} chars cut]… {text[len(text) - tail :] if tail else ''}".rstrip()


def _result_line(tool: str, text: str, error: bool, options: ShapeOptions) -> str:
    label = "tool error" if error else "tool result"
    named = f"{label} {_one_line(tool)}" if tool.strip() else label
    body = condense(text, options.tool_result_chars)
    return f"[{named}: {body}]" if body else f"[{named}]"
