"""One list per concept (jobs/concepts.py), and every copy that cannot import it tied to it.

The event types, entity kinds, key scopes, the purpose rule and the default budget are written once,
in jobs/concepts.py. Python takes them from there (mypy checks each name written elsewhere against
the ``Literal``); what is not Python is compared with them here: the database's lookup table and CHECK
constraints, the schemas the model, HTTP clients and MCP clients see, the prompt, the named queries
and templates, the report and the offline rules. Adding an event type without its migration, its
prompt text or a decision on the offline rules fails one of these tests, naming what is missing.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any, get_args

import pytest

from jobs.concepts import (
    DEFAULT_BUDGET_TOKENS,
    DEFAULT_PURPOSE,
    ENTITY_KINDS,
    EVENT_STATUSES,
    EVENT_TYPES,
    MAX_BUDGET_TOKENS,
    MIN_BUDGET_TOKENS,
    OPEN_ITEM_TYPES,
    PURPOSE_PATTERN,
    SCOPES,
    STANDING_TYPES,
)
from jobs.db import Conn, Database

ROOT = Path(__file__).resolve().parent.parent
# Where a copy of a list could hide: everything we ship or run, but not the migrations (history,
# never edited) and not this file (it builds its patterns from the lists).
SCANNED = ("jobs", "sql", "prompts", "reports", "tests", "bench", "examples", "docs")
SUFFIXES = {".py", ".sql", ".j2", ".md", ".toml", ".yml", ".yaml", ".json", ".jsonl", ".js", ".sh", ".txt"}
# The only files that may spell every event type: the list itself, and the offline extractor's
# per-type rules (checked below to cover exactly the list).
MAY_LIST_THE_EVENT_TYPES = {"jobs/concepts.py", "jobs/extract/offline_events.py"}


def _sources() -> dict[str, str]:
    files = [p for top in SCANNED for p in (ROOT / top).rglob("*") if p.is_file() and p.suffix in SUFFIXES]
    files += [p for p in ROOT.glob("*") if p.is_file() and p.suffix in SUFFIXES]
    return {
        str(p.relative_to(ROOT)): p.read_text(encoding="utf-8", errors="replace")
        for p in files
        if "__pycache__" not in p.parts
        and not str(p.relative_to(ROOT)).startswith("sql/migrations/")
        and p != Path(__file__).resolve()
    }


def _quoted(text: str, names: tuple[str, ...]) -> set[str]:
    """Which of ``names`` ``text`` spells as a quoted literal ('x' or "x")."""
    return {name for name in names if re.search(rf"""(["']){re.escape(name)}\1""", text)}


def _check_values(conn: Conn, table: str, column: str) -> tuple[str, ...]:
    """The quoted values of the CHECK constraint on ``table`` that names ``column``, in order."""
    defs = [
        r["def"]
        for r in conn.execute(
            "SELECT pg_get_constraintdef(oid) AS def FROM pg_constraint WHERE conrelid = %s::regclass AND contype = 'c'",
            (table,),
        )
        if re.search(rf"\b{column}\b", r["def"])
    ]
    assert len(defs) == 1, (table, column, defs)
    return tuple(re.findall(r"'([^']*)'::text", defs[0]))


# -- the database ----------------------------------------------------------------------------------


def test_the_database_holds_the_same_lists(db: Database) -> None:
    with db.admin() as conn:
        types = {r["name"] for r in conn.execute("SELECT name FROM event_types")}
        assert types == set(EVENT_TYPES), "a new event type needs a migration: INSERT INTO event_types"
        analyst = {r["name"] for r in conn.execute("SELECT name FROM analyst.event_types")}
        assert analyst == set(EVENT_TYPES)
        assert _check_values(conn, "episode_entities", "kind") == ENTITY_KINDS
        assert _check_values(conn, "api_keys", "scopes") == SCOPES
        assert _check_values(conn, "transcripts", "purpose") == (PURPOSE_PATTERN,)
        default = conn.execute(
            "SELECT column_default FROM information_schema.columns "
            "WHERE table_name = 'transcripts' AND column_name = 'purpose'"
        ).fetchone()
        assert default is not None and default["column_default"] == f"'{DEFAULT_PURPOSE}'::text"


# -- what the model, HTTP clients and MCP clients see ----------------------------------------------


def _enum(schema: dict[str, Any]) -> list[Any]:
    """The enum of a property, through pydantic's ``anyOf: [{enum}, {null}]`` for an optional one."""
    if "enum" in schema:
        return list(schema["enum"])
    (found,) = [s["enum"] for s in schema.get("anyOf", []) if "enum" in s]
    return list(found)


def test_the_forced_tool_and_its_prompt_offer_the_lists() -> None:
    from jobs.models import KeyEvent, tool_input_schema

    schema = tool_input_schema()["properties"]
    assert _enum(schema["key_events"]["items"]["properties"]["type"]) == list(EVENT_TYPES)
    assert _enum(schema["entities"]["items"]["properties"]["kind"]) == list(ENTITY_KINDS)
    # The description is the prompt: it explains every type, and no type the list lacks.
    described = re.findall(r"(?:^|\. )([a-z_]+): ", KeyEvent.model_fields["type"].description or "")
    assert sorted(described) == sorted(EVENT_TYPES), "explain a new event type in KeyEvent.type's description"


def test_the_http_api_and_the_mcp_tools_offer_the_lists(db: Database) -> None:
    from jobs.recall import Recaller
    from jobs.service.app import create_app
    from jobs.service.mcp_tools import Caller, build_server

    spec = create_app(db).openapi()
    params = {p["name"]: p["schema"] for p in spec["paths"]["/v1/events"]["get"]["parameters"]}
    assert _enum(params["type"]) == list(EVENT_TYPES)
    assert _enum(params["status"]) == list(EVENT_STATUSES)
    recall = spec["components"]["schemas"]["RecallRequest"]["properties"]
    assert recall["budget_tokens"]["default"] == DEFAULT_BUDGET_TOKENS
    assert (recall["budget_tokens"]["minimum"], recall["budget_tokens"]["maximum"]) == (
        MIN_BUDGET_TOKENS,
        MAX_BUDGET_TOKENS,
    )
    assert [s.get("pattern") for s in recall["purpose"]["anyOf"] if s.get("type") == "string"] == [PURPOSE_PATTERN]

    server = build_server(db, Recaller(db), lambda ctx: Caller("acme", "u1", SCOPES))
    tools = {tool.name: tool.input_schema["properties"] for tool in asyncio.run(server.list_tools())}
    assert _enum(tools["list_events"]["type"]) == list(EVENT_TYPES)
    assert _enum(tools["list_events"]["status"]) == list(EVENT_STATUSES)
    budget = tools["recall_memory"]["budget_tokens"]
    assert (budget["default"], budget["minimum"], budget["maximum"]) == (
        DEFAULT_BUDGET_TOKENS,
        MIN_BUDGET_TOKENS,
        MAX_BUDGET_TOKENS,
    )
    assert [s.get("pattern") for s in tools["recall_memory"]["purpose"]["anyOf"] if s.get("type") == "string"] == [
        PURPOSE_PATTERN
    ]


def test_the_recall_entry_points_default_to_the_one_budget() -> None:
    import inspect

    from click.testing import CliRunner

    from jobs.cli.recall import recall_command
    from jobs.recall import Recaller, recall

    for fn in (recall, Recaller.recall, Recaller.recall_vector):
        assert inspect.signature(fn).parameters["budget_tokens"].default == DEFAULT_BUDGET_TOKENS, fn
    help_text = CliRunner().invoke(recall_command, ["--help"]).output
    assert f"[default: {DEFAULT_BUDGET_TOKENS}]" in " ".join(help_text.split())


# -- SQL, templates and Python that name single types --------------------------------------------


COMPARISONS = (
    re.compile(r"\btype\s*(?:=|<>|!=)\s*'([a-z_]+)'", re.IGNORECASE),  # SQL
    re.compile(r"""\btype\s*(?:==|!=)\s*["']([a-z_]+)["']"""),
)  # Python, Jinja2
IN_LISTS = re.compile(r"""\btype\s+(?:NOT\s+)?IN\s*\(([^()]*["'][^()]*)\)""", re.IGNORECASE)


def test_queries_templates_and_code_compare_types_only_with_the_lists() -> None:
    """``type = 'x'`` names a known type; ``type IN (...)`` is the open items or the standing types."""
    compared, grouped = 0, 0
    for path, text in _sources().items():
        if path.startswith(("tests/", "docs/", "bench/")) or not path.endswith((".py", ".sql", ".j2")):
            continue
        for match in (m for pattern in COMPARISONS for m in pattern.finditer(text)):
            assert match.group(1) in EVENT_TYPES, f"{path}: {match.group(0)} names no event type"
            compared += 1
        for match in IN_LISTS.finditer(text):
            named = set(re.findall(r"""["']([a-z_]+)["']""", match.group(1)))
            assert named in (set(OPEN_ITEM_TYPES), set(STANDING_TYPES)), (
                f"{path}: {match.group(0)} is neither OPEN_ITEM_TYPES nor STANDING_TYPES (jobs/concepts.py)"
            )
            grouped += 1
    assert compared >= 5 and grouped >= 8  # the patterns still find what they are meant to


def test_the_report_charts_every_type_the_timeline_counts(db: Database) -> None:
    from jobs.report.data import count_column, report_queries

    with db.admin() as conn:
        columns = {
            r["column_name"]
            for r in conn.execute(
                "SELECT column_name FROM information_schema.columns "
                "WHERE table_schema = 'analyst' AND table_name = 'episode_timeline'"
            )
        }
    counted = [t for t in EVENT_TYPES if count_column(t) in columns]
    assert len(counted) >= 4
    selected = re.search(r"SELECT(.*?)FROM", report_queries()["episodes"], re.DOTALL)
    assert selected is not None
    names = {name.strip() for name in selected.group(1).split(",")}
    assert [t for t in EVENT_TYPES if count_column(t) in names] == counted, (
        "the report's episodes query (reports/report.sql) selects every count column of analyst.episode_timeline"
    )


# -- the offline rules ---------------------------------------------------------------------------


def test_the_offline_rules_cover_exactly_the_known_types() -> None:
    from jobs.extract.offline import RESOLVE_SIMILARITY
    from jobs.extract.offline_events import EVENT_WEIGHT
    from jobs.extract.rules.cues import CueType

    assert set(EVENT_WEIGHT) == set(EVENT_TYPES), "give a new event type its weight in the offline extractor"
    assert set(RESOLVE_SIMILARITY) == set(OPEN_ITEM_TYPES)
    assert set(get_args(CueType)) <= set(EVENT_TYPES)


# -- the copies are gone -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("names", "where", "allowed"),
    [
        (EVENT_TYPES, SCANNED, MAY_LIST_THE_EVENT_TYPES),
        # the code we ship only: tests create keys with every scope, and that is no copy of the list
        (SCOPES, ("jobs", "sql", "prompts", "reports"), {"jobs/concepts.py"}),
        # the entity finder's tie-break order, checked below to hold every kind
        (ENTITY_KINDS, ("jobs", "sql", "prompts", "reports"), {"jobs/concepts.py", "jobs/extract/rules/entities.py"}),
        # the statuses the read API reports, derived in sql/service.sql
        (EVENT_STATUSES, ("jobs", "sql", "prompts", "reports"), {"jobs/concepts.py", "sql/service.sql"}),
    ],
    ids=["event_types", "scopes", "entity_kinds", "event_statuses"],
)
def test_each_list_is_spelled_in_at_most_two_files(
    names: tuple[str, ...], where: tuple[str, ...], allowed: set[str]
) -> None:
    """A file that spells every name of a list as a quoted literal holds a copy of the list."""
    listing = sorted(
        path
        for path, text in _sources().items()
        if path.startswith(tuple(f"{top}/" for top in where)) and _quoted(text, names) == set(names)
    )
    assert "jobs/concepts.py" in listing  # the scan sees the list itself
    assert set(listing) <= allowed, f"take the list from jobs.concepts in {sorted(set(listing) - allowed)}"


def test_the_entity_finder_ranks_every_kind() -> None:
    from jobs.extract.rules.entities import KIND_PRIORITY

    assert sorted(KIND_PRIORITY) == sorted(ENTITY_KINDS)


def test_the_purpose_rule_and_the_default_budget_are_written_once() -> None:
    """No other module spells the purpose pattern or the literal default budget."""
    jobs = {path: text for path, text in _sources().items() if path.startswith("jobs/") and path != "jobs/concepts.py"}
    assert sorted(path for path, text in jobs.items() if PURPOSE_PATTERN in text) == []
    assert sorted(path for path, text in jobs.items() if re.search(rf"\b{DEFAULT_BUDGET_TOKENS}\b", text)) == [], (
        "use DEFAULT_BUDGET_TOKENS"
    )


def _table(page: str, header: str) -> dict[str, str]:
    """The rows of the Markdown table under ``header`` in docs/``page``: first cell (a `name`) -> last cell."""
    text = (ROOT / "docs" / page).read_text(encoding="utf-8")
    table = text[text.index(header) :].split("\n\n", 1)[0]
    rows = [[cell.strip() for cell in line.strip().strip("|").split("|")] for line in table.splitlines()[2:]]
    return {row[0].strip("`"): row[-1] for row in rows}


def test_the_docs_name_the_same_event_types_and_scopes() -> None:
    """The docs' table of event types is the list and says which stay open or stand; the service's
    table of scopes is the list of scopes."""
    events = _table("concepts.md", "| type | what | status |")
    assert set(events) == set(EVENT_TYPES)
    assert {t for t, status in events.items() if status.strip().startswith("open until")} == set(OPEN_ITEM_TYPES)
    assert {t for t, status in events.items() if status.strip().startswith("stands until")} == set(STANDING_TYPES)
    assert set(_table("service.md", "| scope | allows |")) == set(SCOPES)
