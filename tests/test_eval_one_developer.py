"""`episodes eval coding`, one developer's history (issue 47): every sde-bench chat and decoy under one user,
on the small fixture tests/data/sde-bench-mini."""

from __future__ import annotations

from pathlib import Path

from jobs.db import Database
from jobs.embeddings import Embedder
from jobs.eval import one_developer, sdebench
from jobs.eval.coding import format_report
from jobs.recall import RecallConfig, Recaller

MINI = Path(__file__).parent / "data" / "sde-bench-mini"
PER_BUDGET_KEYS = {
    "budget_tokens",
    "amended_tasks",
    "amending_relevant",
    "superseded_absent_or_replaced",
    "both",
    "tasks",
    "nothing_relevant",
    "nothing_relates_over_best_match",
    "per_task",
}


def test_one_developer_on_the_fixture(db: Database, embedder: Embedder) -> None:
    """One user holds the 4 decoys and the 3 chats of both tasks; the exact figures of the fixture."""
    data = sdebench.load(MINI)
    sdebench.build(db, data, "offline")
    report = one_developer.run_in(db, data, embedder, "offline", [1500, 750], MINI)
    assert {k: report[k] for k in ("user", "decoys", "tasks", "episodes", "chats", "now", "budgets")} == {
        "user": "sde-one-developer",
        "decoys": 4,
        "tasks": 2,
        "episodes": 3,
        "chats": 3,
        "now": "2025-07-03T10:00:00+00:00",  # one day after the amending chat (T + 30 days)
        "budgets": [1500, 750],
    }
    with db.connect() as conn:
        sessions = {
            r["session_id"]
            for r in conn.execute("SELECT session_id FROM episodes WHERE user_id = %s", (one_developer.USER,))
        }
    assert sessions == {
        *(f"one/decoy-{i:03d}" for i in range(4)),
        "one/mini-retry-amended-001/chat-1",
        "one/mini-retry-amended-001/chat-2",
        "one/mini-rounding-001/chat-1",
    }
    for budget in ("1500", "750"):
        x = report["by_budget"][budget]
        assert set(x) == PER_BUDGET_KEYS
        figures = {k: v for k, v in x.items() if k != "per_task"}
        assert figures == {
            "budget_tokens": int(budget),
            "amended_tasks": 1,
            "amending_relevant": 1,
            "superseded_absent_or_replaced": 0,  # the superseded chat is shown, not marked replaced
            "both": 0,
            "tasks": 2,
            "nothing_relevant": 0,
            "nothing_relates_over_best_match": 0,
        }
        retry = x["per_task"]["mini-retry-amended-001"]
        assert retry["amending_reasons"] == ["relevant", "recent"]
        assert retry["superseded_reasons"] == ["possibly related", "recent"]
        assert (retry["quoted_lines"], retry["lines_at_line_relevant"]) == (8, 1)
        assert x["per_task"]["mini-rounding-001"]["quoted_lines"] == 2
    table = format_report(
        {"extractor": "offline", "budget_tokens": 1500, "sde_bench": _sde_report(report)},
    )
    section = table[table.index("one developer's history") :]
    assert "1 of 1" in section and "0 of 2" in section and report["data_status"] in section
    assert "1500 tokens, amended tasks missing both: mini-retry-amended-001" in section
    assert "750 tokens, nothing relates above a best match: none" in section
    assert [line.split()[0] for line in section.splitlines()[2:4]] == ["1500", "750"]


def test_nothing_relates_above_a_best_match_is_counted(db: Database, embedder: Embedder) -> None:
    """The same recall with the block saying nothing relates is a violation; without quotes it is not."""
    data = sdebench.load(MINI)
    sdebench.build(db, data, "offline")
    one_developer.build(db, data, "offline")
    task = data.tasks[1]
    result = Recaller(db, embedder).recall(sdebench.TENANT, one_developer.USER, task.bug_report)
    threshold = RecallConfig().line_relevant
    assert one_developer.best_match_under_nothing(result, threshold)["violation"] is False
    result.nothing_relevant = True
    assert one_developer.best_match_under_nothing(result, threshold)["violation"] is True
    for ep in result.episodes:
        ep.lines = []
    assert one_developer.best_match_under_nothing(result, threshold)["violation"] is False


def _sde_report(one: dict[str, object]) -> dict[str, object]:
    """The smallest sde-bench report format_report prints, with the one-developer section."""
    row = {
        "questions": 0,
        "evidence_recall": 0.0,
        "answer_coverage": 0.0,
        "baseline_answer_coverage": 0.0,
        "dated_baseline_answer_coverage": 0.0,
        "answer_coverage_ratio": None,
        "mean_block_tokens": 0.0,
        "answer_word_share": 0.0,
        "baseline_answer_word_share": 0.0,
        "dated_baseline_answer_word_share": 0.0,
    }
    return {
        **row,
        "tasks": 2,
        "decoys": 4,
        "per_source": {},
        "amended": {"tasks": 1, "latest_rule_holds": 0},
        "still_open": {"mean_items": 0.0, "mean_foreign_items": 0.0, "blocks_with_foreign_items": 0},
        "budget_tokens": 1500,
        "seconds": 1,
        "one_developer": one,
    }
