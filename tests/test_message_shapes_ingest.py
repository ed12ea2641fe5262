"""Message shapes through the whole path (issue 30): records of each shape ingest, summarise offline and
through the fake Claude with grounded events, and keep their tool names in the stored transcript; the HTTP API
takes every shape."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from support import fake_anthropic as fa

from jobs.db import Database
from jobs.embeddings import Embedder
from jobs.extract.claude import AnthropicExtractor
from jobs.extract.offline import OfflineExtractor
from jobs.ingest import ingest
from jobs.summarize import run_summarize

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
