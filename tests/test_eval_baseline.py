"""The raw-message baseline (jobs.eval.baseline): budget, closeness, what it reads."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from jobs.db import Database
from jobs.embeddings import Embedder
from jobs.eval.answers import content_words, covers
from jobs.eval.baseline import MessageIndex, RawMessage, fill_budget, raw_messages
from jobs.ingest import ingest
from jobs.tokens import estimate_tokens


def _unit(*xs: float) -> np.ndarray:
    v = np.array(xs, dtype=np.float32)
    return v / np.linalg.norm(v)


def test_fill_budget_takes_the_closest_and_never_exceeds() -> None:
    messages = [RawMessage("user", f"message number {i} " + "x" * 30) for i in range(50)]
    # message i points at angle i degrees from the query: the closest is 0, then 1, 2, ...
    vectors = np.stack([_unit(np.cos(np.radians(i)), np.sin(np.radians(i))) for i in range(50)])
    for budget in (1, 12, 13, 40, 100, 333):
        text = fill_budget(messages, vectors, _unit(1.0, 0.0), budget)
        assert estimate_tokens(text) <= budget
        lines = text.splitlines()
        assert lines == [messages[i].line for i in range(len(lines))]  # closest first, none skipped
        if len(lines) < 50:  # full: the next line would not have fitted
            assert estimate_tokens("\n".join([*lines, messages[len(lines)].line])) > budget
    assert fill_budget(messages, vectors, _unit(1.0, 0.0), 10_000).count("\n") == 49  # all of them fit


def test_fill_budget_skips_a_long_message_and_fills_on() -> None:
    messages = [
        RawMessage("user", "y" * 400),
        RawMessage("assistant", "short answer one"),
        RawMessage("user", "short answer two"),
    ]
    vectors = np.stack([_unit(1, 0), _unit(1, 0.1), _unit(1, 0.2)])
    text = fill_budget(messages, vectors, _unit(1, 0), 20)
    assert text == "- assistant: short answer one\n- user: short answer two"


def test_raw_messages_keep_user_and_assistant_text_only() -> None:
    found = raw_messages(
        [
            {"role": "system", "content": "be nice"},
            {"role": "user", "content": "Let's use\nPostgreSQL 17", "name": "Caroline"},
            {"role": "tool", "content": "Bash: ls -> 3 files"},
            {"role": "assistant", "content": "  "},
            {"role": "assistant", "content": "Done."},
        ]
    )
    assert [m.line for m in found] == ["- Caroline: Let's use PostgreSQL 17", "- assistant: Done."]
    dated = raw_messages([{"role": "user", "content": "hi", "name": "Caroline"}], "8 May 2023")
    assert [m.dated_line for m in dated] == ["- [8 May 2023] Caroline: hi"]
    assert [m.dated_line for m in found] == [m.line for m in found]  # no date known: the plain line


def test_message_index_reads_transcripts_and_ranks_by_meaning(db: Database, embedder: Embedder, tmp_path: Path) -> None:
    """A known answer: the question about the bike finds the bike message first, no dates shown."""
    turns = [
        ("Ana", "I baked a vegetarian lasagna with spinach for my sister."),
        ("Bo", "I replaced the chain and cassette of my gravel bike yesterday."),
        ("Ana", "My sourdough starter gets rye flour every morning."),
        ("Bo", "The weather was rainy all week."),
    ]
    data = {
        "speaker_a": "Ana",
        "speaker_b": "Bo",
        "qa": [],
        "session_1": [{"speaker": s, "dia_id": f"D1:{i}", "text": t} for i, (s, t) in enumerate(turns, 1)],
        "session_1_date_time": "1:00 pm on 1 May, 2023",
    }
    path = tmp_path / "9.json"
    path.write_text(json.dumps(data))
    ingest(db, [path], fmt="locomo", tenant_id="t-base")
    index = MessageIndex(db, embedder)
    question = embedder.embed(["What did Bo change on his bicycle?"])[0]
    text = index.block("t-base", "locomo-9", question, 1500)
    assert text.splitlines()[0] == "- Bo: I replaced the chain and cassette of my gravel bike yesterday."
    assert len(text.splitlines()) == 4 and "2023" not in text
    one = index.block("t-base", "locomo-9", question, 20)
    assert one == "- Bo: I replaced the chain and cassette of my gravel bike yesterday."
    assert index.block("t-base", "nobody", question, 1500) == ""
    # The dated baseline: the same messages in the same order, each led by its session's date.
    undated, dated = index.blocks("t-base", "locomo-9", question, 1500)
    assert undated == text
    assert dated.splitlines() == [line.replace("- ", "- [1 May 2023] ", 1) for line in text.splitlines()]
    # The date is written as the block writes a resolved date, so an answer given as a date is among its words.
    assert covers(dated, content_words("1 May, 2023")) and not covers(undated, content_words("1 May, 2023"))
    # The date takes room in the same budget: 20 tokens no longer hold the bike message with its date.
    assert (
        index.block("t-base", "locomo-9", question, 20, dated=True)
        == "- [1 May 2023] Bo: The weather was rainy all week."
    )
