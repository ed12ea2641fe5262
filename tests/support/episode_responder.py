"""A responder for the fake Anthropic server that answers extraction requests like a model would.

It reads the transcript lines (``[n] speaker: text``) out of the request and returns a valid
``record_episode`` tool input grounded in them, so tests and benchmarks exercise the real SDK,
the real prompt and the real validation, without a network. ``hallucinate=True`` adds an event
citing a message that does not exist and an entity that does not occur, to test grounding.
"""

from __future__ import annotations

import re
from typing import Any

from jobs.concepts import OPEN_ITEM_TYPES, STANDING_TYPES

# "[n] role (name) (time): text": the role, the speaker's name as an attribute (issue 46 #4), the time.
LINE = re.compile(r"^\[(\d+)\] ([a-z]+(?: [a-z]+)?)(?: \((?!\d{4}-)([^)]*)\))?(?: \([^)]*\))?: (.*)$", re.MULTILINE)


def transcript_lines(body: dict[str, Any]) -> list[tuple[int, str, str]]:
    """(index, who, text) per line; who is the speaker's name when the line gives one, as a model reads it."""
    content = body["messages"][0]["content"]
    text = content if isinstance(content, str) else " ".join(c.get("text", "") for c in content)
    return [(int(i), (name or role).strip(), said.strip()) for i, role, name, said in LINE.findall(text)]


def episode_for(body: dict[str, Any], hallucinate: bool = False) -> dict[str, Any]:
    lines = transcript_lines(body)
    if not lines:  # a reduce request: merge what the parts said
        return {
            "summary": "The user and the agent worked through a long session in several parts.",
            "topic_tags": ["long session"],
            "key_events": [],
            "entities": [],
            "importance": 0.5,
        }
    first = lines[0]
    events = []
    for index, who, said in lines:
        lowered = said.lower()
        if "go with" in lowered or "decided" in lowered:
            events.append({"type": "decision", "what": f"{who} decided: {said[:120]}", "evidence": [index], "who": who})
        elif "i'll" in lowered or "i will" in lowered:
            events.append(
                {"type": "commitment", "what": f"{who} promised: {said[:120]}", "evidence": [index], "who": who}
            )
    entities = [{"name": who, "kind": "person"} for who in sorted({w for _, w, _ in lines}) if who[:1].isupper()]
    if hallucinate:
        events.append({"type": "surprise", "what": "Something that never happened.", "evidence": [9999], "who": "user"})
        entities.append({"name": "Atlantis Corp", "kind": "org"})
    return {
        "summary": f"{first[1]} opened the session: {first[2][:200]}",
        "topic_tags": ["Support", "session"],
        "key_events": events[:20],
        "entities": entities[:30],
        "importance": 0.6,
    }


OPEN_ITEM = re.compile(rf"^- id (\d+) \(({'|'.join(OPEN_ITEM_TYPES)}) since [0-9-]+\): (.*)$", re.MULTILINE)


def resolving_responder(body: dict[str, Any]) -> dict[str, Any]:
    """Like ``responder``, and marks every offered open item resolved by the session's first message."""
    episode = episode_for(body)
    content = body["messages"][0]["content"]
    episode["resolved_items"] = [
        {"item_id": int(item_id), "outcome": "fulfilled" if kind == "commitment" else "answered", "evidence": [0]}
        for item_id, kind, _ in OPEN_ITEM.findall(content)
    ] + [{"item_id": 999999, "outcome": "answered", "evidence": [0]}]  # never offered: must be dropped
    return episode


def responder(body: dict[str, Any]) -> dict[str, Any]:
    return episode_for(body)


def hallucinating_responder(body: dict[str, Any]) -> dict[str, Any]:
    return episode_for(body, hallucinate=True)


CURRENT_DECISION = re.compile(rf"^- id (\d+) \(({'|'.join(STANDING_TYPES)}) since [0-9-]+\): (.*)$", re.MULTILINE)


def replacing_responder(body: dict[str, Any]) -> dict[str, Any]:
    """Like ``responder``, and each decision of this session replaces one offered in
    <current_decisions> (the newest first); one more event replaces an id never offered."""
    episode = episode_for(body)
    content = body["messages"][0]["content"]
    offered = [int(item_id) for item_id, _, _ in CURRENT_DECISION.findall(content)]
    decisions = [e for e in episode["key_events"] if e["type"] == "decision"]
    for event, item_id in zip(decisions, offered):
        event["replaces"] = item_id
    first = transcript_lines(body)[0]
    episode["key_events"].append(
        {
            "type": "preference",
            "what": f"{first[1]} prefers: {first[2][:120]}",
            "evidence": [first[0]],
            "who": first[1],
            "replaces": 999999,
        }
    )  # never offered
    return episode


OPENAI_MODEL = "llama3.2:3b"  # the model the tests ask the OpenAI-compatible stand-in (fake_openai) for


def model_like(body: dict[str, Any]) -> dict[str, Any]:
    """An OpenAI Chat Completions request answered like a model would, grounded in the transcript of its user
    message (for fake_openai.FakeOpenAI)."""
    user = next(m["content"] for m in body["messages"] if m["role"] == "user")
    return episode_for({"messages": [{"content": user}]})
