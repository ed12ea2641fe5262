"""Every common message shape in, one canonical form out (jobs/formats/shapes.py, issue 30), as properties:
any valid list of Anthropic Messages or OpenAI Chat Completions messages normalises without error, its text
survives verbatim, and tool traffic never speaks as the user."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.message_shapes import canonical

from jobs.formats.shapes import normalise_messages
from jobs.models import TranscriptIn

# -- strategies ------------------------------------------------------------------------------------

# Printable text with something in it (control characters are stripped by validation, by design).
TEXT = st.text(st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=80).filter(
    lambda t: t.strip() != ""
)
TOOL_NAME = st.from_regex(r"[A-Za-z][A-Za-z0-9_]{0,20}", fullmatch=True)
JSON_VALUE = st.recursive(
    st.none() | st.booleans() | st.integers() | TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
    max_leaves=6,
)
ARGS = st.dictionaries(st.from_regex(r"[a-z_]{1,12}", fullmatch=True), JSON_VALUE, max_size=4)


def _text_block(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


ANTHROPIC_USER_BLOCK = st.one_of(
    TEXT.map(_text_block),
    st.just({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}),
    st.builds(
        lambda t: {"type": "document", "title": t, "source": {"type": "text", "media_type": "text/plain", "data": "x"}},
        TEXT,
    ),
)
ANTHROPIC_ASSISTANT_BLOCK = st.one_of(
    TEXT.map(_text_block),
    st.builds(lambda t: {"type": "thinking", "thinking": THINK + t, "signature": "sig"}, TEXT),
    st.just({"type": "redacted_thinking", "data": "opaque"}),
    st.builds(lambda t: {"type": "a_block_from_the_future", "payload": t}, TEXT),
)


@st.composite
def anthropic_transcripts(draw: st.DrawFn) -> list[dict[str, Any]]:
    """User and assistant turns; assistant turns may call tools, answered in the next user turn."""
    messages: list[dict[str, Any]] = []
    for n in range(draw(st.integers(1, 6))):
        blocks = draw(st.lists(ANTHROPIC_USER_BLOCK, min_size=0, max_size=3))
        pending = [m for m in messages[-1:] if m["role"] == "assistant"]
        results = []
        for call in (
            b for m in pending for b in m["content"] if isinstance(b, dict) and b["type"].endswith("tool_use")
        ):
            content = draw(
                st.one_of(
                    TEXT.map(lambda t: OUT + t),
                    st.lists(TEXT.map(lambda t: _text_block(OUT + t)), min_size=1, max_size=2),
                )
            )
            kind = "web_search_tool_result" if call["type"] == "server_tool_use" else "tool_result"
            results.append(
                {
                    "type": kind,
                    "tool_use_id": call["id"],
                    "content": content,
                    **({"is_error": draw(st.booleans())} if kind == "tool_result" else {}),
                }
            )
        user_content: str | list[dict[str, Any]] = results + blocks
        if not results and len(blocks) > 0 and draw(st.booleans()):
            user_content = draw(TEXT)
        if user_content:
            messages.append({"role": "user", "content": user_content})
        said = draw(st.lists(ANTHROPIC_ASSISTANT_BLOCK, min_size=1, max_size=3))
        calls = [
            {
                "type": draw(st.sampled_from(["tool_use", "tool_use", "server_tool_use"])),
                "id": f"toolu_{n}_{k}",
                "name": draw(TOOL_NAME),
                "input": draw(ARGS),
            }
            for k in range(draw(st.integers(0, 2)))
        ]
        messages.append({"role": "assistant", "content": said + calls})
    return messages


OPENAI_USER_PART = st.one_of(
    TEXT.map(_text_block),
    st.just({"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}}),
    st.just({"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}}),
    st.builds(lambda t: {"type": "file", "file": {"filename": t, "file_id": "file-1"}}, TEXT),
)


@st.composite
def openai_transcripts(draw: st.DrawFn) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    if draw(st.booleans()):
        messages.append({"role": draw(st.sampled_from(["system", "developer"])), "content": draw(TEXT)})
    for n in range(draw(st.integers(1, 5))):
        content = draw(st.one_of(TEXT, st.lists(OPENAI_USER_PART, min_size=1, max_size=3)))
        messages.append({"role": "user", "content": content, **({"name": "dana"} if draw(st.booleans()) else {})})
        calls = [
            {
                "id": f"call_{n}_{k}",
                "type": "function",
                "function": {"name": draw(TOOL_NAME), "arguments": json.dumps(draw(ARGS))},
            }
            for k in range(draw(st.integers(0, 2)))
        ]
        said = draw(st.one_of(st.none(), TEXT, st.lists(TEXT.map(_text_block), min_size=1, max_size=2)))
        if said is None and not calls:
            said = draw(TEXT)
        reply: dict[str, Any] = {"role": "assistant", "content": said}
        if calls:
            reply["tool_calls"] = calls
        if draw(st.integers(0, 9)) == 0:
            reply["refusal"] = draw(TEXT)
        messages.append(reply)
        for call in calls:
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": OUT + draw(TEXT)})
    return messages


def texts_of(messages: list[dict[str, Any]]) -> list[str]:
    """Every piece of text a person or the model said in host messages."""
    out: list[str] = []
    for m in messages:
        if m["role"] == "tool":
            continue
        content = m.get("content")
        if isinstance(content, str):
            out.append(content)
        for block in content if isinstance(content, list) else []:
            if block.get("type") == "text":
                out.append(block["text"])
            elif block.get("type") == "a_block_from_the_future":
                pass  # no text field: left out, gracefully
        if isinstance(m.get("refusal"), str):
            out.append(m["refusal"])
    return out


OUT = "\u27e6out\u27e7 "  # marks tool output in generated transcripts
THINK = "\u27e6think\u27e7 "  # marks thinking


def normalised(host: list[dict[str, Any]]) -> TranscriptIn | None:
    """The canonical record of ``host``; None when nothing was said (only thinking, say), which
    validation refuses as a transcript with no content."""
    if not normalise_messages(host):
        assert texts_of(host) == [] and all(m["role"] == "assistant" for m in host)
        return None
    return canonical(host)


def check_invariants(host: list[dict[str, Any]], record: TranscriptIn) -> None:
    """Text survives verbatim; tool output only in role-tool messages; no thinking."""
    spoken = "\n".join(m.content for m in record.messages if m.role != "tool")
    for text in texts_of(host):
        assert text.strip() in spoken
    assert OUT not in spoken, "tool output must never be the user's or the assistant's words"
    assert all(THINK not in m.content for m in record.messages), "thinking is left out by default"
    for m in record.messages:
        assert m.role in ("user", "assistant", "system", "tool")
        assert m.role != "tool" or m.content.startswith("[tool ")


# -- properties ------------------------------------------------------------------------------------


@pytest.mark.slow  # 100 generated transcripts (~40-75 s)
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(anthropic_transcripts())
def test_any_anthropic_transcript_normalises_and_keeps_its_text(host: list[dict[str, Any]]) -> None:
    record = normalised(host)
    if record is None:
        return
    check_invariants(host, record)
    calls = [b for m in host if m["role"] == "assistant" for b in m["content"] if b["type"].endswith("tool_use")]
    tool_text = "\n".join(m.content for m in record.messages if m.role == "tool")
    for call in calls:
        assert f"[tool call {call['name']}" in tool_text
    results = [
        b
        for m in host
        if isinstance(m["content"], list)
        for b in m["content"]
        if isinstance(b, dict) and b["type"].endswith("tool_result")
    ]
    named = {b["id"]: b["name"] for b in calls}
    for result in results:
        label = "tool error" if result.get("is_error") else "tool result"
        assert f"[{label} {named[result['tool_use_id']]}" in tool_text


@pytest.mark.slow  # 100 generated transcripts (~30-50 s)
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(openai_transcripts())
def test_any_openai_transcript_normalises_and_keeps_its_text(host: list[dict[str, Any]]) -> None:
    record = normalised(host)
    assert record is not None
    check_invariants(host, record)
    names = {c["id"]: c["function"]["name"] for m in host for c in m.get("tool_calls") or []}
    tool_text = "\n".join(m.content for m in record.messages if m.role == "tool")
    for call_id, name in names.items():
        assert f"[tool call {name}" in tool_text and f"[tool result {name}" in tool_text, call_id
    assert all(m.role != "system" or host[0]["role"] in ("system", "developer") for m in record.messages)
