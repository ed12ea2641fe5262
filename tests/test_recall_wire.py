"""The recall result as one typed object from the recaller to the wire (issue 38): ``POST /v1/recall``
answers the recaller's :class:`Recall` itself, ``episodes recall --json`` prints the same JSON, the MCP
tool ``recall_memory`` answers its block (as text alone), the OpenAPI document and the HTTP reference
type every field of it, and the block is rendered once per result. Against a real `episodes api`
(uvicorn in a thread) over a real database, with episodes that have quoted lines and open items and a
session not yet summarised."""

from __future__ import annotations

import dataclasses
import datetime as dt
import importlib.util
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import fastapi.routing
import httpx
import httpx2
import pytest
from click.testing import CliRunner
from fastapi.concurrency import run_in_threadpool
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from pydantic_core import to_jsonable_python
from support.api_server import scratch_database, serve

import jobs.recall.result as result_module
from jobs.cli import cli
from jobs.db import Database
from jobs.embeddings import Embedder
from jobs.recall.recaller import Recaller
from jobs.recall.result import Recall
from jobs.service.keys import create_key
from jobs.tokens import estimate_tokens

USER = "u-maria"
MESSAGE = "What did we decide about the pricing and the renewal order form?"
NOW = "2025-07-01T12:00:00Z"
TRANSCRIPTS = [
    {
        "user_id": USER,
        "session_id": "m1",
        "purpose": "sales",
        "started_at": "2025-01-21T10:00:00Z",
        "ended_at": "2025-01-21T10:20:00Z",
        "messages": [
            {"role": "user", "content": "We decided to go with the Business plan at $69 per seat for pricing."},
            {"role": "assistant", "content": "Noted. I'll send the renewal order form by Friday."},
            {"role": "user", "content": "Can you also check whether Snowflake costs are included?"},
        ],
    },
    {
        "user_id": USER,
        "session_id": "m2",
        "purpose": "support",
        "started_at": "2025-06-03T09:00:00Z",
        "ended_at": "2025-06-03T09:30:00Z",
        "messages": [
            {"role": "user", "content": "Let's set the Cost Guard threshold to 5 credits per query."},
            {"role": "assistant", "content": "Configured: alerts go to the data-costs channel."},
        ],
    },
    {  # still open: recall shows it as a session not yet summarised
        "user_id": USER,
        "session_id": "m3",
        "purpose": "sales",
        "started_at": "2025-06-30T08:00:00Z",
        "messages": [{"role": "user", "content": "Is the renewal order form for the Business plan ready yet?"}],
    },
]

# What POST /v1/recall answered before the result was typed (45e157c): a field-by-field copy of to_dict()
# with these keys, the episodes, open items and sessions as untyped dicts (their dataclass fields, and
# "when" and "similarity" for an episode, "when" for a session).
LEGACY_KEYS = {
    "block",
    "tenant_id",
    "user_id",
    "purpose",
    "budget_tokens",
    "tokens",
    "now",
    "candidates",
    "nothing_relevant",
    "episodes",
    "open_items",
    "sessions",
}
# The keys to_dict() had and the HTTP copy left out; the typed answer has them too (one shape everywhere).
ADDED_KEYS = {"opening_message", "purposes", "earlier"}
ROOT = Path(__file__).resolve().parent.parent


@dataclass
class Service:
    url: str
    db: Database
    key: str


@pytest.fixture(scope="module")
def service(
    embedder: Embedder, admin_url: str, template_db: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Service]:
    from jobs.extract.offline import OfflineExtractor
    from jobs.summarize import run_summarize

    name = f"wire_{os.getpid()}_{Path(__file__).stem}"
    with scratch_database(admin_url, template_db, name, home=tmp_path_factory.mktemp("home")) as db:
        key = create_key(db, "acme", ("recall", "write"), name="wire")[1]
        with serve(db) as url:
            with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=60) as c:
                answer = c.post("/v1/transcripts", json={"transcripts": TRANSCRIPTS})
                assert answer.status_code == 200 and answer.json()["accepted"] == 3, answer.text
            run_summarize(db, extractor=OfflineExtractor(embedder), embedder=embedder)
            yield Service(url, db, key)


def _post_recall(service: Service, **extra: Any) -> dict[str, Any]:
    with httpx.Client(base_url=service.url, headers={"Authorization": f"Bearer {service.key}"}, timeout=60) as c:
        answer = c.post("/v1/recall", json={"user_id": USER, "message": MESSAGE, **extra})
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    return body


def _direct(service: Service, embedder: Embedder) -> Recall:
    return Recaller(service.db, embedder).recall("acme", USER, MESSAGE, now=dt.datetime.fromisoformat(NOW))


def _legacy_body(result: Recall) -> dict[str, Any]:
    """The old route's answer for ``result``, built the old way (the values pydantic made of its dicts)."""
    block = result.render()
    body = {
        "block": block,
        "tenant_id": result.tenant_id,
        "user_id": result.user_id,
        "purpose": result.purpose,
        "budget_tokens": result.budget_tokens,
        "tokens": estimate_tokens(block),
        "now": result.now,
        "candidates": result.candidates,
        "nothing_relevant": result.nothing_relevant,
        "episodes": [
            {**dataclasses.asdict(ep), "when": ep.when, "similarity": ep.similarity} for ep in result.episodes
        ],
        "open_items": [dataclasses.asdict(item) for item in result.open_items],
        "sessions": [{**dataclasses.asdict(s), "when": s.when} for s in result.sessions],
    }
    legacy: dict[str, Any] = to_jsonable_python(body)
    return legacy


def test_the_answer_is_what_it_was_plus_three_keys(service: Service, embedder: Embedder) -> None:
    """Same keys and values as the field-by-field copy answered, for a recall that shows every nested type;
    the three keys to_dict() always had are added. `episodes recall --json` prints the same JSON."""
    body = _post_recall(service, now=NOW)
    direct = _direct(service, embedder)
    assert direct.episodes and direct.open_items and direct.sessions and any(ep.lines for ep in direct.episodes)
    assert set(body) == LEGACY_KEYS | ADDED_KEYS
    assert {k: body[k] for k in LEGACY_KEYS} == _legacy_body(direct)
    assert body["opening_message"] == MESSAGE and body["purposes"] is None
    assert body["earlier"] == direct.candidates + direct.unsummarised == 3
    assert body == direct.to_dict() == json.loads(direct.to_json())

    printed = CliRunner().invoke(
        cli,
        ["recall", "--tenant", "acme", "--user", USER, "--now", NOW[:19], "--json", MESSAGE],
        env={"DATABASE_URL": service.db.url},
    )
    assert printed.exit_code == 0, printed.output
    assert json.loads(printed.output) == body


def test_the_answer_is_the_bytes_of_to_json(service: Service, embedder: Embedder) -> None:
    """The route sends :meth:`Recall.to_json` as it is, as JSON with its length, the bytes FastAPI's
    response_model sent for the dataclass (bench/recall_cpu.py compares them over many recalls)."""
    with httpx.Client(base_url=service.url, headers={"Authorization": f"Bearer {service.key}"}, timeout=60) as c:
        answer = c.post("/v1/recall", json={"user_id": USER, "message": MESSAGE, "now": NOW})
    assert answer.status_code == 200, answer.text
    assert answer.content == _direct(service, embedder).to_json()
    assert answer.headers["content-type"] == "application/json"
    assert answer.headers["content-length"] == str(len(answer.content))
    assert answer.headers["cache-control"] == "no-store" and answer.headers["x-request-id"]


def test_a_recall_takes_one_thread_pool_hand_off(service: Service, monkeypatch: pytest.MonkeyPatch) -> None:
    """The endpoint's own hand-off and no second one: a route that returned the dataclass had FastAPI check
    it against response_model in a hand-off of its own after the endpoint's (~0.2 ms of CPU a recall)."""
    handed: list[str] = []
    real = run_in_threadpool  # what fastapi.routing calls it by

    async def counted(function: Any, /, *args: Any, **kwargs: Any) -> Any:
        handed.append(getattr(function, "__name__", repr(function)))
        return await real(function, *args, **kwargs)

    _post_recall(service)
    monkeypatch.setattr(fastapi.routing, "run_in_threadpool", counted)
    _post_recall(service)
    assert handed == ["_run_sync_endpoint"]


def _walk(schemas: dict[str, Any], name: str, seen: set[str]) -> None:
    """Every property of the component ``name`` and of the components it names has a type; none is a
    bare object or an untyped value."""
    if name in seen:
        return
    seen.add(name)
    component = schemas[name]
    assert component["type"] == "object" and component["properties"], name
    assert set(component["required"]) == set(component["properties"]), name  # every answer carries every field
    for field, spec in component["properties"].items():
        kinds = spec.get("anyOf", [spec])
        for kind in kinds:
            item = kind.get("items", kind) if kind.get("type") == "array" else kind
            assert "$ref" in item or item.get("type") in {"string", "integer", "number", "boolean", "null"}, (
                f"{name}.{field} is not typed: {spec}"
            )
            if "$ref" in item:
                _walk(schemas, item["$ref"].rsplit("/", 1)[-1], seen)


def test_the_openapi_document_types_every_field_of_the_answer(service: Service) -> None:
    doc = httpx.get(f"{service.url}/openapi.json", timeout=60).json()
    answer = doc["paths"]["/v1/recall"]["post"]["responses"]["200"]["content"]["application/json"]["schema"]
    assert answer == {"$ref": "#/components/schemas/Recall"}
    schemas = doc["components"]["schemas"]
    seen: set[str] = set()
    _walk(schemas, "Recall", seen)
    assert seen == {"Recall", "RecalledEpisode", "RecalledLine", "RecalledOpenItem", "RecalledSession"}
    recall = schemas["Recall"]["properties"]
    assert recall["episodes"]["items"] == {"$ref": "#/components/schemas/RecalledEpisode"}
    assert recall["open_items"]["items"] == {"$ref": "#/components/schemas/RecalledOpenItem"}
    assert recall["sessions"]["items"] == {"$ref": "#/components/schemas/RecalledSession"}
    assert schemas["RecalledEpisode"]["properties"]["lines"]["items"] == {"$ref": "#/components/schemas/RecalledLine"}
    assert recall["block"]["readOnly"] and "previous_episodes" in recall["block"]["description"]
    assert recall["now"]["format"] == "date-time" and recall["candidates"]["type"] == "integer"
    assert "unsummarised" not in recall and "minimum_budget" not in recall  # not on the wire, as before
    # the fields the document names are the fields an answer has, at every level
    body = _post_recall(service, now=NOW)
    assert set(body) == set(recall)
    assert {key for ep in body["episodes"] for key in ep} == set(schemas["RecalledEpisode"]["properties"])
    assert {key for ln in body["episodes"][0]["lines"] for key in ln} == set(schemas["RecalledLine"]["properties"])
    assert {key for item in body["open_items"] for key in item} == set(schemas["RecalledOpenItem"]["properties"])
    assert {key for s in body["sessions"] for key in s} == set(schemas["RecalledSession"]["properties"])


def test_the_block_is_rendered_once_per_recall(service: Service, monkeypatch: pytest.MonkeyPatch) -> None:
    """The old route rendered it twice per answer (to_dict() asked for the tokens, then the block)."""
    _post_recall(service)  # the fitting's measures of the template are made once per process: not counted
    renders: list[int] = []
    real = result_module.render_block

    def counted(*args: Any, **kwargs: Any) -> str:
        renders.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(result_module, "render_block", counted)
    body = _post_recall(service)
    assert body["block"].startswith("<previous_episodes") and len(renders) == 1

    result = Recaller(service.db).recall("acme", USER, MESSAGE)
    renders.clear()
    assert result.to_dict()["block"] == result.render() == json.loads(result.to_json())["block"]
    assert result.tokens == estimate_tokens(result.block) and len(renders) == 1
    result.nothing_relevant = not result.nothing_relevant  # a changed field renders anew
    assert result.render() != body["block"] and len(renders) == 2


def test_mcp_answers_the_block_of_the_same_result_as_text_only(service: Service) -> None:
    """recall_memory's answer is the block that POST /v1/recall sends for the same recall, as text, with no
    structured content and no output schema: Claude Code gives a tool's structuredContent to the model in
    place of its text (anthropics/claude-code 55677, 79944), so the SDK's default for a str-returning tool,
    {"result": block}, put the block JSON-escaped into the model's context."""
    headers = {"Authorization": f"Bearer {service.key}", "X-Episodes-User": USER}

    async def call() -> tuple[Any, Any]:
        async with (
            httpx2.AsyncClient(headers=headers, timeout=60) as http,
            Client(streamable_http_client(f"{service.url}/mcp", http_client=http), read_timeout_seconds=60) as client,
        ):
            tools = {tool.name: tool for tool in (await client.list_tools()).tools}
            return tools["recall_memory"], await client.call_tool("recall_memory", {"message": MESSAGE})

    tool, answer = anyio.run(call)
    body = _post_recall(service)
    assert not answer.is_error and tool.output_schema is None and answer.structured_content is None
    assert [getattr(block, "text", None) for block in answer.content] == [body["block"]]
    assert body["block"].startswith("<previous_episodes") and "Business plan" in body["block"]


def test_the_http_reference_shows_every_field_of_the_answer(service: Service) -> None:
    """docs/http-reference.md is rendered from the document (docs/hooks/http_reference.py): a section per
    result type, a row per field with its type, and the episodes linked to their section."""
    spec = importlib.util.spec_from_file_location("http_reference", ROOT / "docs" / "hooks" / "http_reference.py")
    assert spec is not None and spec.loader is not None
    hook = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hook)
    doc = httpx.get(f"{service.url}/openapi.json", timeout=60).json()
    page: str = hook.render(doc)
    assert "| 200 | Successful Response | [Recall](#schema-recall) |" in page
    for name in ("Recall", "RecalledEpisode", "RecalledLine", "RecalledOpenItem", "RecalledSession"):
        section = page.split(f"### {name} {{#schema-{name.lower()}}}\n", 1)[1].split("\n### ", 1)[0]
        rows = [line for line in section.splitlines() if line.startswith("| `")]
        assert [row.split("`")[1] for row in rows] == list(doc["components"]["schemas"][name]["properties"]), name
        assert all("| yes |" in row for row in rows), name
    assert "| `episodes` | array of [RecalledEpisode](#schema-recalledepisode) | yes |" in page
    assert "| `lines` | array of [RecalledLine](#schema-recalledline) | yes |" in page
    assert "| `when` | string | yes | The day of its session" in page
