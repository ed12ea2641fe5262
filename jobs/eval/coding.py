"""`episodes eval coding`: what the recall block carries into the next coding session.

Two data sets, each in its own scratch database (:mod:`jobs.eval.scratch`), summarised end to end
with the chosen extractor (default ``offline``):

- sde-bench (:mod:`jobs.eval.sdebench`): a bug report opens the session after a decision chat;
- real Claude Code sessions (:mod:`jobs.eval.claude_code`): our own questions about each session.

For every question the block is recalled with the production defaults and the same budget is
filled by both raw-message baselines (:mod:`jobs.eval.baseline`: undated, and each message led by
its session's date). Figures per data set: questions, evidence recall (the session holding the
answer has its episode in the block), the block's answer coverage (:func:`jobs.eval.answers.covers`),
each baseline's, and the ratio of the block to the better baseline; at every budget asked for, the
budgets side by side. sde-bench is also measured as one developer's history (every chat and decoy
under one user, :mod:`jobs.eval.one_developer`). Both data sets are tuning data (:mod:`jobs.eval.provenance`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from jobs.concepts import DEFAULT_BUDGET_TOKENS
from jobs.config import Settings
from jobs.eval import claude_code, one_developer, sdebench


def _ratio(r: dict[str, Any]) -> str:
    return "-" if r["answer_coverage_ratio"] is None else f"{r['answer_coverage_ratio']:.2f}"


def format_table(title: str, rows: dict[str, dict[str, Any]], notes: list[str]) -> str:
    """One data set's table at one budget: a row per group, then its notes."""
    w = max(28, *(len(label) for label in rows))
    lines = [
        title,
        f"{'':<{w}} {'n':>5} {'evidence':>9} {'block':>7} {'raw':>7} {'dated':>7} {'ratio':>6} {'mean tok':>9}",
    ]
    for label, r in rows.items():
        lines.append(
            f"{label:<{w}} {r['questions']:>5} {r['evidence_recall']:>9.3f} {r['answer_coverage']:>7.3f} "
            f"{r['baseline_answer_coverage']:>7.3f} {r['dated_baseline_answer_coverage']:>7.3f} {_ratio(r):>6} "
            f"{r['mean_block_tokens']:>9.0f}"
        )
    return "\n".join([*lines, *notes])


def side_by_side(title: str, rows: dict[str, dict[str, dict[str, Any]]]) -> str:
    """``rows``: label -> budget -> figures; block, raw, dated and ratio of each budget side by side."""
    budgets = list(next(iter(rows.values())))
    w = max(28, *(len(label) for label in rows))
    head = " ".join(f"| {b + ' tokens':<27}" for b in budgets)
    sub = " ".join(f"| {'block':>6} {'raw':>6} {'dated':>6} {'ratio':>5}" for _ in budgets)
    lines = [title, f"{'':<{w}} {head}", f"{'':<{w}} {sub}"]
    for label, by_budget in rows.items():
        cells = [
            f"| {r['answer_coverage']:>6.3f} {r['baseline_answer_coverage']:>6.3f} "
            f"{r['dated_baseline_answer_coverage']:>6.3f} {_ratio(r):>5}"
            for r in by_budget.values()
        ]
        lines.append(f"{label:<{w}} {' '.join(cells)}")
    return "\n".join(lines)


def _sde_rows(r: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {
        "all tasks": r,
        **{f"  {k}": v for k, v in r["per_source"].items()},
        **{f"  half {k}": v for k, v in r.get("per_half", {}).items()},
    }


def _cc_rows(r: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {
        "all questions": r,
        **{f"  answer said in {k}": v for k, v in r["per_answer_place"].items()},
        **{f"  {k}": v for k, v in r["per_file"].items()},
    }


def _sde_notes(r: dict[str, Any]) -> list[str]:
    amended, still = r["amended"], r["still_open"]
    return [
        f"latest rule holds (amended chat shown, superseded one absent or marked replaced): "
        f"{amended['latest_rule_holds']} of {amended['tasks']}"
        + "".join(
            f"; half {h} {v['latest_rule_holds']} of {v['tasks']}" for h, v in amended.get("per_half", {}).items()
        ),
        "halves: within each source, tasks in task-id order alternate A / B; issue 36's rules were chosen on A, "
        "and B was read too",
        f"mean share of the answer words held: block {r['answer_word_share']:.3f}, raw "
        f"{r['baseline_answer_word_share']:.3f}, dated {r['dated_baseline_answer_word_share']:.3f}",
        f"still open items per block: {still['mean_items']:.1f} on average, {still['mean_foreign_items']:.1f} "
        f"from chats other than the task's ({still['blocks_with_foreign_items']} of {r['tasks']} blocks show any)",
    ]


def _data_set(title: str, r: dict[str, Any], rows: Any, notes: list[str]) -> list[str]:
    reports: dict[str, dict[str, Any]] = r.get("by_budget") or {str(r["budget_tokens"]): r}
    parts = [
        format_table(f"{title}, budget {b} tokens", rows(x), notes if b == next(iter(reports)) else [])
        for b, x in reports.items()
    ]
    if len(reports) > 1:
        labels = rows(r)
        parts.append(
            side_by_side(
                f"{title}: answer coverage by budget",
                {label: {b: rows(x)[label] for b, x in reports.items()} for label in labels},
            )
        )
    if r.get("data_status"):
        parts.append(r["data_status"])
    parts.append(f"{r['seconds']}s")
    return ["\n".join(parts)]


def format_report(report: dict[str, Any]) -> str:
    """The tables printed by `episodes eval coding` without --json."""
    parts = [
        f"Coding sessions ({report['extractor']} extractor), budgets in tokens (chars/4); "
        "block = the recall block's answer coverage, raw = the raw-message baseline's (no dates), dated = the same "
        "with each message led by its session's date, ratio = block / the better of raw and dated"
    ]
    if "sde_bench" in report:
        r = report["sde_bench"]
        title = f"sde-bench: {r['tasks']} tasks, {r['decoys']} decoy chats per user"
        parts += _data_set(title, r, _sde_rows, _sde_notes(r))
        if "one_developer" in r:
            parts.append(one_developer.format_section(r["one_developer"]))
    if "claude_code" in report:
        r = report["claude_code"]
        title = f"Claude Code sessions: {r['files']} files, {r['questions']} questions (jobs/eval/claude_code_questions.json)"
        parts += _data_set(title, r, _cc_rows, [])
    return "\n\n".join(parts)


DATA_SETS = ("sde-bench", "claude-code")


def run(
    settings: Settings,
    *,
    sde_bench: Path,
    claude_code_root: Path,
    only: str | None = None,
    extractor: str = "offline",
    budget_tokens: int = DEFAULT_BUDGET_TOKENS,
    budgets: Sequence[int] | None = None,
) -> dict[str, Any]:
    """Both data sets (or ``only`` one), each in its own scratch database, at every budget; one report."""
    chosen = list(budgets or [budget_tokens])
    report: dict[str, Any] = {"extractor": extractor, "budget_tokens": chosen[0], "budgets": chosen}
    if only in (None, "sde-bench"):
        report["sde_bench"] = sdebench.run(
            settings,
            sde_bench,
            extractor=extractor,
            budgets=chosen,
            also={
                "one_developer": lambda db, data, embedder, at: one_developer.run_in(
                    db, data, embedder, extractor, at, sde_bench
                )
            },
        )
    if only in (None, "claude-code"):
        report["claude_code"] = claude_code.run(settings, claude_code_root, extractor=extractor, budgets=chosen)
    return report
