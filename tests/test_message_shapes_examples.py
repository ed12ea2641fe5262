"""Message shapes by example (jobs/formats/shapes.py, issue 30): Anthropic blocks and OpenAI tool calls to
speakers and tool lines, condensed tool results, server tools and unknown blocks, plain messages unchanged, and
shapes that fit nothing refused naming the place."""

from __future__ import annotations

import json
from typing import Any

import pytest
from support.message_shapes import canonical

from jobs.db import Database
from jobs.formats.shapes import ShapeError, normalise_messages
from jobs.ingest import validate
from jobs.models import TranscriptIn

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
