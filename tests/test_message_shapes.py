"""Every common message shape in, one canonical form out (jobs/formats/shapes.py, issue 30).

Property tests: any valid list of Anthropic Messages or OpenAI Chat Completions messages
normalises without error, its text survives verbatim, and tool traffic never speaks as the user.
Then the whole path: records of each shape ingest, summarise offline and through the fake Claude
with grounded events, and keep their tool names in the stored transcript.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import fake_anthropic as fa

from jobs.db import Database
from jobs.embeddings import Embedder
from jobs.extract.claude import AnthropicExtractor
from jobs.extract.offline import OfflineExtractor
from jobs.formats.shapes import ShapeError, ShapeOptions, normalise_messages
from jobs.ingest import ingest, validate
from jobs.models import TranscriptIn
from jobs.summarize import run_summarize

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


def canonical(messages: list[dict[str, Any]], **options: Any) -> TranscriptIn:
    record = {"tenant_id": "acme", "user_id": "u1", "session_id": "s1", "messages": messages}
    return TranscriptIn.model_validate(record, context={"shapes": ShapeOptions(**options)})


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


# -- examples --------------------------------------------------------------------------------------


def test_anthropic_blocks_map_to_speakers_and_tool_lines() -> None:
    record = canonical(
        [
            {"role": "user", "content": "Run the tests please."},
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "The user wants pytest run.", "signature": "x"},
                    {"type": "text", "text": "I'll run them."},
                    {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "pytest -q"}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_1",
                        "content": [{"type": "text", "text": "3 passed"}],
                    },
                    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "x"}},
                    {"type": "text", "text": "Great, ship it."},
                ],
            },
        ]
    )
    assert [(m.role, m.content) for m in record.messages] == [
        ("user", "Run the tests please."),
        ("assistant", "I'll run them."),
        ("tool", '[tool call Bash: command="pytest -q"]\n[tool result Bash: 3 passed]'),
        ("user", "[image]\n\nGreat, ship it."),
    ]
    kept = canonical(
        [
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "Hmm.", "signature": "x"},
                    {"type": "text", "text": "Done."},
                ],
            }
        ],
        keep_thinking=True,
    )
    assert kept.messages[0].content == "[thinking: Hmm.]\n\nDone."


def test_openai_tool_calls_developer_and_parts() -> None:
    record = canonical(
        [
            {"role": "developer", "content": "Answer briefly."},
            {
                "role": "user",
                "name": "dana",
                "content": [
                    {"type": "text", "text": "What's the weather in Oslo?"},
                    {"type": "image_url", "image_url": {"url": "https://x/y.png"}},
                ],
            },
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": '{"temp_c": 4}'},
            {"role": "assistant", "content": "It is 4 °C in Oslo."},
        ]
    )
    assert [(m.role, m.name, m.content) for m in record.messages] == [
        ("system", None, "Answer briefly."),
        ("user", "dana", "What's the weather in Oslo?\n\n[image]"),
        ("tool", None, '[tool call get_weather: city="Oslo"]\n[tool result get_weather: {"temp_c": 4}]'),
        ("assistant", None, "It is 4 °C in Oslo."),
    ]


def test_tool_results_are_condensed_head_and_tail_to_the_setting() -> None:
    output = "collected 120 items\n" + "." * 5000 + "\nFAILED tests/test_x.py::test_y - AssertionError\n1 failed"
    host = [
        {
            "role": "assistant",
            "content": [
                {
                    "type": "tool_use",
                    "id": "t1",
                    "name": "Bash",
                    "input": {"command": "pytest -q", "description": "x" * 500},
                }
            ],
        },
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": output}]},
    ]
    short = canonical(host, tool_result_chars=200).messages[0].content
    call, result = short.split("\n", 1)
    assert call.startswith('[tool call Bash: command="pytest -q", description="xxx') and call.endswith("…]")
    assert len(call) <= 400
    assert result.startswith("[tool result Bash: collected 120 items") and result.endswith("1 failed]")
    assert "chars cut]" in result and len(result) < 300
    assert len(canonical(host, tool_result_chars=2000).messages[0].content) > 2000


def test_server_tools_and_unknown_blocks_are_handled() -> None:
    record = canonical(
        [
            {"role": "user", "content": "Search for pgvector releases."},
            {
                "role": "assistant",
                "content": [
                    {
                        "type": "server_tool_use",
                        "id": "srvtoolu_1",
                        "name": "web_search",
                        "input": {"query": "pgvector"},
                    },
                    {
                        "type": "web_search_tool_result",
                        "tool_use_id": "srvtoolu_1",
                        "content": [
                            {
                                "type": "web_search_result",
                                "title": "pgvector 0.8.0",
                                "url": "https://github.com/pgvector",
                            }
                        ],
                    },
                    {"type": "citations_delta_of_2030", "blob": 1},
                    {"type": "text", "text": "pgvector 0.8.0 is the latest."},
                ],
            },
        ]
    )
    assert [m.role for m in record.messages] == ["user", "tool", "assistant"]
    assert record.messages[1].content == (
        '[tool call web_search: query="pgvector"]\n[tool result web_search: pgvector 0.8.0]'
    )


def test_plain_messages_pass_unchanged_and_keep_their_hash() -> None:
    plain = [{"role": "user", "content": "hi", "name": "Maria"}, {"role": "tool", "content": "raw", "name": "calc"}]
    record = canonical(plain)
    assert [m.model_dump(exclude_none=True) for m in record.messages] == plain
    assert "metadata" not in json.dumps(record.model_dump(exclude={"metadata"}))
    with_meta = TranscriptIn.model_validate(
        {"tenant_id": "acme", "user_id": "u1", "session_id": "s1", "messages": plain, "metadata": {"project": "/p"}}
    )
    assert with_meta.content_hash() != record.content_hash()  # metadata is content when given ...
    payload = record.model_dump(mode="json", exclude={"tenant_id", "session_id", "metadata"})
    import hashlib  # ... and absent, the hash is the one a record had before metadata existed

    assert (
        record.content_hash()
        == hashlib.sha256(json.dumps(payload, sort_keys=True, ensure_ascii=False).encode()).hexdigest()
    )


@pytest.mark.parametrize(
    "bad,where",
    [
        ([{"role": "user", "content": {"$where": "1"}}], "messages.0.content: expected a string"),
        ([{"role": "user", "content": [42]}], "messages.0.content.0: expected a content block"),
        ([{"role": "robot", "content": "hi"}], "messages.0.role: 'robot'"),
        (["hello"], "messages.0: expected a message object"),
        (
            [{"role": "assistant", "content": None, "tool_calls": [{"function": "oops"}]}],
            "messages.0.tool_calls.0.function",
        ),
    ],
)
def test_shapes_that_fit_nothing_are_refused_naming_the_place(bad: list[Any], where: str) -> None:
    with pytest.raises(ShapeError, match=where.replace("(", r"\(").replace("[", r"\[")):
        normalise_messages(bad)


def test_unknown_record_fields_are_refused_naming_the_intended_one(db: Database) -> None:
    base = {
        "tenant_id": "acme",
        "user_id": "u1",
        "session_id": "s1",
        "messages": [{"role": "user", "content": "hello"}],
    }
    cases = {
        "endedAt": "'ended_at'",
        "startedAt": "'started_at'",
        "sesion_id": "'session_id'",
        "agentID": "'agent_id'",
        "color": None,
    }
    for key, meant in cases.items():
        outcome = validate("x.jsonl:1", {**base, key: "2025-01-01T00:00:00Z"}, db.settings, None)
        assert not isinstance(outcome, TranscriptIn)
        assert f"unknown field {key!r}" in outcome.reason and "metadata" in outcome.reason
        assert (f"did you mean {meant}?" in outcome.reason) if meant else "did you mean" not in outcome.reason
    too_big = validate("x", {**base, "metadata": {"blob": "x" * 20_000}}, db.settings, None)
    assert not isinstance(too_big, TranscriptIn) and "over the limit of 16,384" in too_big.reason
    not_object = validate("x", {**base, "metadata": ["a"]}, db.settings, None)
    assert not isinstance(not_object, TranscriptIn) and "metadata" in not_object.reason


# -- through ingest and summarise ------------------------------------------------------------------

ANTHROPIC_RECORD = {
    "tenant_id": "acme",
    "user_id": "u-ann",
    "session_id": "anthropic-1",
    "purpose": "coding",
    "started_at": "2025-03-04T09:00:00Z",
    "ended_at": "2025-03-04T09:20:00Z",
    "messages": [
        {"role": "user", "content": "The login page is slow. We'll go with Redis for the session cache."},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Let me look at the current session store."},
                {"type": "tool_use", "id": "toolu_a", "name": "Grep", "input": {"pattern": "SessionStore"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_a",
                    "content": "app/session.py:12: class SessionStore(DatabaseStore):\n" * 200,
                }
            ],
        },
        {"role": "assistant", "content": [{"type": "text", "text": "Switched SessionStore to Redis."}]},
        {"role": "user", "content": "I'll deploy it to staging by Friday."},
    ],
}
OPENAI_RECORD = {
    "tenant_id": "acme",
    "user_id": "u-oli",
    "session_id": "openai-1",
    "purpose": "support",
    "started_at": "2025-03-05T10:00:00Z",
    "endedAt": "2025-03-05T10:10:00Z",
    "messages": [
        {"role": "developer", "content": "You are the billing assistant of Acme."},
        {"role": "user", "content": "We'll go with the annual Team plan for Globex."},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_9",
                    "type": "function",
                    "function": {
                        "name": "create_invoice",
                        "arguments": '{"plan": "team-annual", "customer": "Globex"}',
                    },
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_9", "content": '{"invoice": "INV-2041", "status": "draft"}'},
        {"role": "assistant", "content": "Invoice INV-2041 is drafted. I'll send it to Globex by Monday."},
    ],
}


def write(tmp_path: Path, records: list[dict[str, Any]]) -> Path:
    path = tmp_path / "shapes.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def stored(db: Database) -> dict[str, dict[str, Any]]:
    with db.admin() as conn:
        return {
            r["session_id"]: r for r in conn.execute("SELECT session_id, messages, metadata, ended_at FROM transcripts")
        }


def test_both_shapes_ingest_summarise_offline_grounded_and_keep_tool_names(
    db: Database, tmp_path: Path, embedder: Embedder
) -> None:
    path = write(
        tmp_path,
        [
            ANTHROPIC_RECORD,
            OPENAI_RECORD,
            {
                **OPENAI_RECORD,
                "session_id": "openai-2",
                "endedAt": None,
                "ended_at": "2025-03-05T10:10:00Z",
                "metadata": {"crm": {"account": 7}},
            },
        ],
    )
    report = ingest(db, [path])
    assert report.inserted == 1 and [str(r) for r in report.rejected] == [
        f"{path}:2: unknown field 'endedAt'; did you mean 'ended_at'? (free-form data goes under 'metadata')",
        f"{path}:3: unknown field 'endedAt'; did you mean 'ended_at'? (free-form data goes under 'metadata')",
    ]
    fixed = {**OPENAI_RECORD, "ended_at": OPENAI_RECORD["endedAt"], "metadata": {"crm": {"account": 7}}}
    del fixed["endedAt"]
    assert ingest(db, [write(tmp_path, [ANTHROPIC_RECORD, fixed])]).inserted == 1
    rows = stored(db)
    anthropic, openai = rows["anthropic-1"]["messages"], rows["openai-1"]["messages"]
    assert [m["role"] for m in anthropic] == ["user", "assistant", "tool", "assistant", "user"]
    assert anthropic[2]["content"].startswith('[tool call Grep: pattern="SessionStore"]\n[tool result Grep: ')
    assert len(anthropic[2]["content"]) < 600  # 11 KB of grep output condensed
    assert [m["role"] for m in openai] == ["system", "user", "tool", "assistant"]
    assert (
        "[tool call create_invoice:" in openai[2]["content"] and "[tool result create_invoice:" in openai[2]["content"]
    )
    assert rows["openai-1"]["metadata"] == {"crm": {"account": 7}} and rows["anthropic-1"]["metadata"] is None
    assert rows["openai-1"]["ended_at"] is not None

    summary = run_summarize(db, extractor=OfflineExtractor(embedder), embedder=embedder)
    assert summary.counts == {"done": 2}
    with db.admin() as conn:
        events = conn.execute(
            "SELECT t.session_id, ev.type, ev.evidence, ev.who FROM episode_events ev "
            "JOIN episodes e ON e.id = ev.episode_id JOIN transcripts t ON t.id = e.transcript_id"
        ).fetchall()
    by_session: dict[str, list[dict[str, Any]]] = {}
    for e in events:
        by_session.setdefault(e["session_id"], []).append(e)
    messages = {"anthropic-1": anthropic, "openai-1": openai}
    for session, evs in by_session.items():
        for e in evs:  # grounded: evidence points at canonical messages someone said, never at tool output
            assert all(0 <= i < len(messages[session]) for i in e["evidence"])
            assert all(messages[session][i]["role"] != "tool" for i in e["evidence"])
    assert {e["type"] for e in by_session["anthropic-1"]} >= {"decision", "commitment"}
    assert {e["type"] for e in by_session["openai-1"]} >= {"decision", "commitment"}


def test_both_shapes_summarise_through_the_fake_claude(
    llm_db: Database, fake: fa.FakeAnthropic, tmp_path: Path, embedder: Embedder
) -> None:
    fixed = {k: v for k, v in OPENAI_RECORD.items() if k != "endedAt"} | {"ended_at": OPENAI_RECORD["endedAt"]}
    assert ingest(llm_db, [write(tmp_path, [ANTHROPIC_RECORD, fixed])]).inserted == 2
    with AnthropicExtractor(llm_db.settings) as extractor:
        report = run_summarize(llm_db, extractor=extractor, embedder=embedder)
    assert report.counts == {"done": 2}
    prompts = [c.body["messages"][0]["content"] for c in fake.calls()]
    anthropic = next(p for p in prompts if "Redis" in p)
    openai = next(p for p in prompts if "Globex" in p)
    assert '] tool context: [tool call Grep: pattern="SessionStore"]' in anthropic
    assert (
        "] tool context: [tool call create_invoice:" in openai and "] system: You are the billing assistant" in openai
    )
    assert "] user: [tool" not in anthropic + openai  # tool output never speaks as the user
    with llm_db.admin() as conn:
        rows = conn.execute(
            "SELECT ev.evidence, t.message_count FROM episode_events ev JOIN episodes e "
            "ON e.id = ev.episode_id JOIN transcripts t ON t.id = e.transcript_id"
        ).fetchall()
    assert rows and all(max(r["evidence"]) < r["message_count"] for r in rows)


def test_post_transcripts_takes_every_shape_and_names_unknown_fields(db: Database) -> None:
    import httpx
    from support.api_server import serve

    from jobs.service.keys import create_key

    secret = create_key(db, "acme", ("ingest",), name="shapes")[1]
    openai = {k: v for k, v in OPENAI_RECORD.items() if k not in ("tenant_id", "endedAt")}
    with (
        serve(db) as url,
        httpx.Client(base_url=url, headers={"Authorization": f"Bearer {secret}"}, timeout=60) as client,
    ):
        answer = client.post(
            "/v1/transcripts",
            json={
                "transcripts": [
                    {k: v for k, v in ANTHROPIC_RECORD.items() if k != "tenant_id"},
                    {**openai, "endedAt": "x"},
                    openai,
                ]
            },
        )
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert (body["accepted"], body["rejected"]) == (2, 1)
    assert body["results"][1]["reason"] == (
        "unknown field 'endedAt'; did you mean 'ended_at'? (free-form data goes under 'metadata')"
    )
    rows = stored(db)
    assert "[tool call create_invoice:" in rows["openai-1"]["messages"][2]["content"]
    assert rows["anthropic-1"]["messages"][2]["content"].startswith('[tool call Grep: pattern="SessionStore"]')
