"""A model that refuses a forced tool choice (Claude Sonnet 5.5 and Opus 5.5 answer it with a 400) is
offered the tool with ``auto`` and asked to call it, so configuring one does not dead-letter every
session; the others keep the forced choice. Through the real SDK against the fake server."""

from __future__ import annotations

import pytest
from support import fake_anthropic as fa
from support.summarize_steps import add, run, state

from jobs.db import Database
from jobs.embeddings import Embedder
from jobs.llm.prices import model_id
from jobs.llm.tools import NO_FORCED_TOOL_CHOICE


@pytest.mark.parametrize("model", ["claude-sonnet-5-5", "claude-opus-5-5-20260922"])
def test_a_model_that_refuses_forced_tools_is_asked_to_call_the_tool(
    llm_db: Database,
    fake: fa.FakeAnthropic,
    embedder: Embedder,
    model: str,
) -> None:
    db = Database(llm_db.settings.with_(model=model), url=llm_db.url)
    try:
        add(db, "s1")
        report = run(db, embedder)
    finally:
        db.close()
    assert report.counts["done"] == 1, report
    request = fake.calls()[0].body
    assert request["tool_choice"] == {"type": "auto"}
    assert request["messages"][0]["content"].endswith("Answer only by calling the record_episode tool, once.")
    assert state(llm_db)["episodes"] == 1


def test_other_models_keep_the_forced_tool_choice(llm_db: Database, fake: fa.FakeAnthropic, embedder: Embedder) -> None:
    add(llm_db, "s1")
    run(llm_db, embedder)
    assert fake.calls()[0].body["tool_choice"] == {"type": "tool", "name": "record_episode"}
    assert all(model_id(m) == m for m in NO_FORCED_TOOL_CHOICE)
