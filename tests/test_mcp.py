"""The MCP tools through real transports, with the official `mcp` SDK's client: `episodes mcp`
spawned as a subprocess (stdio), and `/mcp` on a real `episodes api` (uvicorn, streamable HTTP).

Two tenants (acme, globex) and two acme users; every tool called, write refused without the write
scope, other users' and tenants' episodes not found, bad arguments and a lost database answered as
tool errors in a session that stays usable."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx
import psycopg
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp_types import CallToolResult
from support.api_server import backend_database, serve
from support.databases import url_for
from support.mcp_http import http_transport

from jobs.db import Database, one
from jobs.embeddings import Embedder
from jobs.formats.records import from_objects
from jobs.ingest import ingest_records
from jobs.service.keys import create_key

# The MCP transports and tools are Python over the queries recall and search run: on one PostgreSQL only
# (tests/test_api_service.py and the recall tests run those queries on Citus).

TOOLS = {"recall_memory", "search_episodes", "list_events", "get_episode", "forget_episode"}


def _session(user: str, session: str, day: str, *lines: str, purpose: str = "sales") -> dict[str, Any]:
    roles = ["user", "assistant"]
    return {
        "user_id": user,
        "session_id": session,
        "purpose": purpose,
        "started_at": f"{day}T10:00:00Z",
        "ended_at": f"{day}T10:20:00Z",
        "messages": [{"role": roles[i % 2], "content": text} for i, text in enumerate(lines)],
    }


ACME = [
    _session(
        "u-maria",
        "m1",
        "2025-01-21",
        "We decided to go with the Business plan at $69 per seat for pricing.",
        "Noted. I'll send the renewal order form by Friday.",
        "Can you also check whether Snowflake costs are included?",
    ),
    _session(
        "u-maria",
        "m2",
        "2025-06-03",
        "Let's set the Cost Guard threshold to 5 credits per query.",
        "Configured: alerts go to the data-costs channel.",
        purpose="support",
    ),
    _session(
        "u-other",
        "o1",
        "2025-03-02",
        "We decided to move the offsite to Lisbon in May.",
        "Great, I will book the venue.",
    ),
    _session(
        "u-forget", "f1", "2025-04-01", "We decided to rename the project to Falcon.", "Understood, Falcon it is."
    ),
    _session(
        "u-forget",
        "f2",
        "2025-04-08",
        "I'd like weekly status emails on Mondays.",
        "Sure, I'll send them every Monday.",
    ),
]
GLOBEX = [
    _session(
        "u-sam",
        "g1",
        "2025-02-01",
        "We decided to keep the pricing tier at Pro for the globex team.",
        "Understood, Pro it is.",
    )
]


@dataclass
class World:
    url: str  # the API's base URL
    db: Database
    db_url: str
    keys: dict[str, str]  # label -> secret
    episodes: dict[str, int]  # session id -> episode id

    def http(self, key: str | None, user: str | None = "u-maria") -> Client:
        headers = {} if key is None else {"Authorization": f"Bearer {self.keys[key]}"}
        if user is not None:
            headers["X-Episodes-User"] = user
        return Client(http_transport(f"{self.url}/mcp", headers), read_timeout_seconds=60)

    def stdio(self, *args: str, database_url: str | None = None) -> Client:
        env = {
            "DATABASE_URL": database_url or self.db_url,
            "EPISODES_HOME": os.environ["EPISODES_HOME"],
            "HF_HUB_OFFLINE": "1",
            **{k: v for k, v in os.environ.items() if k in ("XDG_CACHE_HOME", "HOME")},
        }
        params = StdioServerParameters(
            command=sys.executable,
            args=["-m", "jobs.cli", "mcp", *args],
            env=env,
            cwd=Path(__file__).resolve().parent.parent,
        )
        return Client(params, read_timeout_seconds=120)


def run(body: Callable[[], Awaitable[None]]) -> None:
    anyio.run(body)


def text(result: CallToolResult) -> str:
    return "\n".join(getattr(block, "text", "") for block in result.content)


def data(result: CallToolResult) -> Any:
    assert not result.is_error, text(result)
    return json.loads(text(result))


@pytest.fixture(scope="module", params=["single"])
def world(
    request: pytest.FixtureRequest, embedder: Embedder, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[World]:
    from jobs.extract.offline import OfflineExtractor
    from jobs.summarize import run_summarize

    with backend_database(
        request, f"mcp_{os.getpid()}", home=tmp_path_factory.mktemp("home"), api_key_cache_seconds=0.0
    ) as db:
        for tenant, records in (("acme", ACME), ("globex", GLOBEX)):
            report = ingest_records(
                db, from_objects(records, db.settings.max_transcript_bytes), tenant_id=tenant, only_tenant=True
            )
            assert not report.rejected
        run_summarize(db, extractor=OfflineExtractor(embedder), embedder=embedder)
        with db.admin() as conn:
            episodes = {r["session_id"]: r["id"] for r in conn.execute("SELECT session_id, id FROM episodes")}
        keys = {
            label: create_key(db, tenant, scopes, name=label)[1]
            for label, tenant, scopes in [
                ("acme", "acme", ("recall", "write")),
                ("acme_read", "acme", ("recall",)),
                ("acme_write_only", "acme", ("write",)),
                ("globex", "globex", ("recall", "write")),
            ]
        }
        with serve(db) as api_url:
            yield World(api_url, db, db.url, keys, episodes)


# --- streamable HTTP at /mcp ----------------------------------------------------------------------


def test_http_lists_the_tools_with_descriptions_and_hints(world: World) -> None:
    async def body() -> None:
        async with world.http("acme_read") as client:
            tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert set(tools) == TOOLS
        for tool in tools.values():
            assert tool.description and len(tool.description) > 80, tool.name
        assert "start of a conversation" in (tools["recall_memory"].description or "")
        assert "confirm" in tools["forget_episode"].input_schema["properties"]
        assert tools["forget_episode"].annotations and tools["forget_episode"].annotations.destructive_hint
        assert tools["get_episode"].annotations and tools["get_episode"].annotations.read_only_hint
        assert "user_id" not in json.dumps(tools["search_episodes"].input_schema)  # the user is the session's

    run(body)


def test_http_calls_every_read_tool_for_the_header_user(world: World) -> None:
    async def body() -> None:
        async with world.http("acme_read") as client:
            block = text(await client.call_tool("recall_memory", {"message": "What did we agree on pricing?"}))
            found = data(await client.call_tool("search_episodes", {"query": "business plan"}))
            by_time = data(await client.call_tool("search_episodes", {"since": "2025-05-01", "until": "2025-07-01"}))
            everything = data(await client.call_tool("search_episodes", {"limit": 1}))
            older = data(await client.call_tool("search_episodes", {"limit": 1, "cursor": everything["next_cursor"]}))
            decisions = data(await client.call_tool("list_events", {"type": "decision"}))
            episode = data(await client.call_tool("get_episode", {"episode_id": world.episodes["m1"]}))
        assert block.startswith("<previous_episodes") and "Business plan" in block and "Lisbon" not in block
        assert [e["id"] for e in found["episodes"]] == [world.episodes["m1"]] and found["next_cursor"] is None
        assert [e["id"] for e in by_time["episodes"]] == [world.episodes["m2"]]
        assert [e["id"] for e in everything["episodes"] + older["episodes"]] == [
            world.episodes["m2"],
            world.episodes["m1"],
        ]
        assert decisions["events"] and {e["user_id"] for e in decisions["events"]} == {"u-maria"}
        assert {e["type"] for e in decisions["events"]} == {"decision"} and decisions["events"][0]["status"]
        assert episode["user_id"] == "u-maria" and episode["summary"]
        assert episode["events"] and all(event["evidence"] for event in episode["events"])

    run(body)


def test_http_another_users_or_tenants_episode_is_not_found(world: World) -> None:
    async def body() -> None:
        async with world.http("acme") as client:
            others = [
                await client.call_tool(tool, {"episode_id": world.episodes[session], **extra})
                for tool, extra in (("get_episode", {}), ("forget_episode", {}), ("forget_episode", {"confirm": True}))
                for session in ("g1", "o1")
            ]
            own = await client.call_tool("get_episode", {"episode_id": world.episodes["m2"]})
        for result in others:
            assert result.is_error and "not found:" in text(result), text(result)
        assert not own.is_error
        with world.db.admin() as conn:  # nothing was erased
            assert (
                one(
                    conn.execute(
                        "SELECT count(*) AS n FROM episodes WHERE id = ANY(%s)",
                        ([world.episodes["g1"], world.episodes["o1"]],),
                    )
                )["n"]
                == 2
            )

    run(body)


def test_http_forget_needs_the_write_scope_and_reading_needs_recall(world: World) -> None:
    async def body() -> None:
        async with world.http("acme_read", user="u-forget") as client:
            refused = await client.call_tool("forget_episode", {"episode_id": world.episodes["f1"], "confirm": True})
            after = await client.call_tool("get_episode", {"episode_id": world.episodes["f1"]})
        async with world.http("acme_write_only", user="u-forget") as client:
            unread = await client.call_tool("search_episodes", {})
        assert refused.is_error and "forbidden:" in text(refused) and "'edit'" in text(refused)
        assert not after.is_error  # the session is usable after the refusal, and nothing was erased
        assert unread.is_error and "forbidden:" in text(unread) and "'recall'" in text(unread)

    run(body)


def test_http_forget_erases_one_episode_of_the_user(world: World) -> None:
    episode_id = world.episodes["f2"]

    async def body() -> None:
        async with world.http("acme", user="u-forget") as client:
            dry = data(await client.call_tool("forget_episode", {"episode_id": episode_id, "dry_run": True}))
            asked = data(await client.call_tool("forget_episode", {"episode_id": episode_id}))
            refused = data(await client.call_tool("forget_episode", {"episode_id": episode_id, "confirm": False}))
            both = data(
                await client.call_tool("forget_episode", {"episode_id": episode_id, "confirm": True, "dry_run": True})
            )
            still = await client.call_tool("get_episode", {"episode_id": episode_id})
            done = data(await client.call_tool("forget_episode", {"episode_id": episode_id, "confirm": True}))
            gone = await client.call_tool("get_episode", {"episode_id": episode_id})
            left = data(await client.call_tool("search_episodes", {}))
        assert dry["dry_run"] and not dry["erased"] and dry["summary"].startswith("would erase") and not still.is_error
        for unconfirmed in (asked, refused):  # without confirm=true: what would go, and how to confirm; nothing erased
            assert not unconfirmed["erased"] and unconfirmed["summary"].startswith("would erase")
            assert "confirm=true" in unconfirmed["confirmation_needed"] and unconfirmed["counts"]["events"]
        assert not both["erased"] and "confirmation_needed" not in both and "confirmation_needed" not in dry
        assert (
            done["erased"] and done["summary"].startswith(f"erased episode {episode_id}") and done["counts"]["events"]
        )
        assert "confirmation_needed" not in done
        assert gone.is_error and "not found:" in text(gone)
        assert [e["id"] for e in left["episodes"]] == [world.episodes["f1"]]

    run(body)


def test_http_bad_arguments_are_tool_errors_and_the_session_carries_on(world: World) -> None:
    calls: list[tuple[str, dict[str, Any]]] = [
        ("get_episode", {"episode_id": 0}),
        ("get_episode", {"episode_id": "seven"}),
        ("get_episode", {}),
        ("list_events", {"status": "pending"}),
        ("search_episodes", {"limit": 1000}),
        ("search_episodes", {"cursor": "not-a-cursor"}),
        ("recall_memory", {"message": ""}),
        ("recall_memory", {"message": "hi", "budget_tokens": 10}),
    ]

    async def body() -> None:
        async with world.http("acme_read") as client:
            bad = [await client.call_tool(name, args) for name, args in calls]
            fine = data(await client.call_tool("search_episodes", {"query": "cost guard"}))
        for result in bad:
            assert result.is_error and text(result), text(result)
        assert text(bad[0]) == (
            "Error executing tool get_episode: invalid argument episode_id: Input should be greater than or equal to 1"
        )
        assert "invalid argument episode_id: Field required" in text(bad[2])
        assert "invalid argument status:" in text(bad[3]) and "invalid argument cursor:" in text(bad[5])
        assert [e["id"] for e in fine["episodes"]] == [world.episodes["m2"]]

    run(body)


def test_http_refuses_a_request_without_a_key_or_a_user(world: World) -> None:
    hello = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    accept = {"Accept": "application/json, text/event-stream"}
    no_key = httpx.post(f"{world.url}/mcp", json=hello, headers={**accept, "X-Episodes-User": "u-maria"})
    bad_key = httpx.post(
        f"{world.url}/mcp",
        json=hello,
        headers={**accept, "X-Episodes-User": "u-maria", "Authorization": "Bearer ep_nope"},
    )
    no_user = httpx.post(
        f"{world.url}/mcp", json=hello, headers={**accept, "Authorization": f"Bearer {world.keys['acme']}"}
    )
    assert no_key.status_code == 401 and no_key.headers["www-authenticate"] == "Bearer"
    assert no_key.json()["error"]["code"] == "unauthorized" and bad_key.status_code == 401
    assert no_user.status_code == 400 and no_user.json()["error"]["field"] == "header.x-episodes-user"
    assert "X-Episodes-User" in no_user.json()["error"]["message"]


def test_http_get_opens_no_endless_stream(world: World) -> None:
    """GET would open a stream for server-initiated messages, which this server never sends: it stayed open
    for ever. It answers 405 with Allow: POST (the MCP specification's answer for no such stream), and ends."""
    headers = {
        "Accept": "text/event-stream",
        "Authorization": f"Bearer {world.keys['acme']}",
        "X-Episodes-User": "u-maria",
    }
    with httpx.stream("GET", f"{world.url}/mcp", headers=headers, timeout=30) as r:
        body = r.read()  # the answer ends; an open stream would end this test with a read timeout
        assert r.status_code == 405 and r.headers["allow"] == "POST", body
    assert json.loads(body)["error"]["code"] == "method_not_allowed"

    async def tools_still_work() -> None:  # clients carry on over POST
        async with world.http("acme") as client:
            assert (await client.list_tools()).tools

    run(tools_still_work)


# --- stdio: `episodes mcp` as a subprocess --------------------------------------------------------


def test_stdio_serves_the_command_line_user(world: World) -> None:
    async def body() -> None:
        async with world.stdio("--tenant", "acme", "--user", "u-maria", "--read-only") as client:
            names = {tool.name for tool in (await client.list_tools()).tools}
            block = text(await client.call_tool("recall_memory", {"message": "the Cost Guard threshold"}))
            found = data(await client.call_tool("search_episodes", {"query": "snowflake"}))
            events = data(await client.call_tool("list_events", {"status": "open"}))
            episode = data(await client.call_tool("get_episode", {"episode_id": world.episodes["m2"]}))
            elsewhere = await client.call_tool("get_episode", {"episode_id": world.episodes["g1"]})
            refused = await client.call_tool("forget_episode", {"episode_id": world.episodes["m1"], "confirm": True})
            bad = await client.call_tool("list_events", {"type": "rumour"})
            again = data(await client.call_tool("search_episodes", {}))
        assert names == TOOLS
        assert "Cost Guard" in block
        assert [e["id"] for e in found["episodes"]] == [world.episodes["m1"]]
        assert {e["user_id"] for e in events["events"]} <= {"u-maria"}
        assert {e["status"] for e in events["events"]} <= {"open"}
        assert episode["id"] == world.episodes["m2"]
        assert elsewhere.is_error and "not found:" in text(elsewhere)
        assert refused.is_error and "forbidden:" in text(refused)
        assert bad.is_error and "type" in text(bad)
        assert {e["id"] for e in again["episodes"]} == {world.episodes["m1"], world.episodes["m2"]}

    run(body)


@pytest.mark.slow  # an MCP server process waits out a lost database (~30 s)
def test_stdio_a_lost_database_is_a_tool_error_and_the_session_survives(
    world: World, admin_url: str, template_db: str
) -> None:
    name = f"mcp_lost_{os.getpid()}"
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template_db}"')

    async def body() -> None:
        async with world.stdio(
            "--tenant", "acme", "--user", "u-maria", database_url=url_for(admin_url, name)
        ) as client:
            before = await client.call_tool("search_episodes", {})
            with psycopg.connect(admin_url, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
            lost = await client.call_tool("search_episodes", {})
            listed = {tool.name for tool in (await client.list_tools()).tools}
            lost_again = await client.call_tool("get_episode", {"episode_id": 1})
        assert data(before) == {"episodes": [], "next_cursor": None}
        for result in (lost, lost_again):
            assert result.is_error and text(result).endswith(": database unavailable: try again in a few seconds")
        assert listed == TOOLS

    run(body)


def test_mcp_command_has_help_and_requires_tenant_and_user() -> None:
    from click.testing import CliRunner

    from jobs.cli import cli

    shown = CliRunner().invoke(cli, ["mcp", "--help"])
    assert shown.exit_code == 0 and "claude mcp add episodes" in shown.output
    missing = CliRunner().invoke(cli, ["mcp", "--tenant", "acme"])
    assert missing.exit_code == 2 and "--user" in missing.output
