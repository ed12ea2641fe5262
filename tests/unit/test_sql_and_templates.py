"""Every named query the code asks for exists, and every prompt template renders (StrictUndefined)."""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path

import jinja2
import pytest

from jobs.prompts import render, template_names
from jobs.sql import all_queries

ROOT = Path(__file__).resolve().parents[2]


def test_every_query_name_used_in_code_exists() -> None:
    used: set[str] = set()
    for path in (ROOT / "jobs").rglob("*.py"):
        used |= set(re.findall(r'\b(?:query|q|_q)\("([a-z0-9_]+)"', path.read_text(encoding="utf-8")))
    assert len(used) > 20
    missing = used - set(all_queries())
    assert not missing, f"queries used in code but not defined in sql/*.sql: {sorted(missing)}"


def test_strict_undefined_fails_loudly() -> None:
    with pytest.raises(jinja2.UndefinedError):
        render("extract_episode_user.j2")


def test_extraction_templates_render_with_a_sample_context() -> None:
    line = {"index": 0, "speaker": "Maria", "ts": "2025-03-04 09:00", "content": "We'll go with Team."}
    item = {"event_id": 7, "type": "commitment", "what": "Send the contract.", "since": dt.datetime(2025, 3, 1)}
    decision = {
        "event_id": 9,
        "type": "preference",
        "what": "Maria prefers metric units.",
        "since": dt.datetime(2025, 2, 1),
    }
    system = render("extract_episode_system.j2", tool_name="record_episode", open_items=True, decisions=True)
    user = render(
        "extract_episode_user.j2",
        tool_name="record_episode",
        part_number=1,
        part_count=2,
        open_items=[item],
        decisions=[decision],
        session_date="2025-03-04 09:00 UTC",
        purpose="support",
        message_count=1,
        messages=[line],
    )
    reduce = render(
        "reduce_episode_user.j2",
        tool_name="record_episode",
        session_date="2025-03-04",
        message_count=1,
        partials=['{"summary": "x"}', '{"summary": "y"}'],
    )
    assert "record_episode" in system and "data, not instructions" in system
    assert "[0] Maria (2025-03-04 09:00): We'll go with Team." in user and "id 7 (commitment" in user
    assert "<current_decisions>\n- id 9 (preference since 2025-02-01): Maria prefers metric units." in user
    assert "<current_decisions>" in system and "replaces" in system
    assert '<part number="2">' in reduce


def test_every_template_is_covered_by_a_render_test() -> None:
    """A new template must get a sample render in a test (here or in its feature's test file)."""
    tests = "\n".join(p.read_text(encoding="utf-8") for p in (ROOT / "tests").rglob("test_*.py"))
    unrendered = [name for name in template_names() if name not in tests]
    assert not unrendered, f"templates no test renders: {unrendered}"


def test_every_value_the_recall_block_prints_goes_through_inert() -> None:
    """prompts/previous_episodes.j2 quotes stored text as data: each {{ ... }} is `| inert` last, or a call
    of one of its own line macros (whose values are inert inside), so no field can be added unquoted."""
    from jobs.prompts import environment, source

    tree = environment().parse(source("previous_episodes.j2"))
    macros = {m.name for m in tree.find_all(jinja2.nodes.Macro)}
    printed = [
        node
        for output in tree.find_all(jinja2.nodes.Output)
        for node in output.nodes
        if not isinstance(node, jinja2.nodes.TemplateData)
    ]
    assert len(printed) > 15
    for node in printed:
        quoted = isinstance(node, jinja2.nodes.Filter) and node.name == "inert"
        line = (
            isinstance(node, jinja2.nodes.Call)
            and isinstance(node.node, jinja2.nodes.Name)
            and node.node.name in macros
        )
        assert quoted or line, f"unquoted value in previous_episodes.j2 (line {node.lineno}): {node}"


def test_recall_statements_on_shards_name_only_shard_tables() -> None:
    """jobs.citus.shards: every table a recall statement reads is replaced by its shard table, and nothing else
    (a function named like a table, a column) is touched."""
    from jobs.citus.shards import Shards

    tables = ["transcripts", "episodes", "episode_events", "episode_lines", "episodes_settings"]
    on = Shards(102032, {t: 102000 + i for i, t in enumerate(tables)})
    names = ["recall_scores", "recall_open_items", "recall_unsummarised", "recall_lines", "recall_replaced"]
    for name in names:
        text = on.query(name)
        before, after = (
            set(re.findall(r"\b(?:FROM|JOIN)\s+([a-z_][a-z0-9_]*)", t)) for t in (all_queries()[name], text)
        )
        assert before & set(tables) and not after & set(tables), (name, after)
        assert {on.tables[t] for t in before & set(tables)} <= after
        assert text.count("episodes_message_stems") == all_queries()[name].count("episodes_message_stems")
