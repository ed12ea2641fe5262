"""`episodes eval coding`: what the recall block carries into the next coding session.

Two data sets, each in its own scratch database (:mod:`jobs.eval.scratch`), summarised end to end
with the chosen extractor (default ``offline``):

- sde-bench (:mod:`jobs.eval.sdebench`): a bug report opens the session after a decision chat;
- real Claude Code sessions (:mod:`jobs.eval.claude_code`): our own questions about each session.

For every question the block is recalled with the production defaults and the same budget is
filled by the raw-message baseline (:mod:`jobs.eval.baseline`). Figures per data set: questions,
evidence recall (the session holding the answer has its episode in the block), the block's answer
coverage (:func:`jobs.eval.answers.covers`), the baseline's, and their ratio (block / baseline).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from jobs.concepts import DEFAULT_BUDGET_TOKENS
from jobs.config import Settings
from jobs.eval import claude_code, sdebench


def format_table(title: str, rows: dict[str, dict[str, Any]], notes: list[str]) -> str:
    """One data set's table: a row per group, then its notes."""
    w = max(28, *(len(label) for label in rows))
    lines = [title, f"{'':<{w}} {'n':>5} {'evidence':>9} {'block':>7} {'raw':>7} {'ratio':>6} {'mean tok':>9}"]
    for label, r in rows.items():
        ratio = "-" if r["answer_coverage_ratio"] is None else f"{r['answer_coverage_ratio']:.2f}"
        lines.append(
            f"{label:<{w}} {r['questions']:>5} {r['evidence_recall']:>9.3f} {r['answer_coverage']:>7.3f} "
            f"{r['baseline_answer_coverage']:>7.3f} {ratio:>6} {r['mean_block_tokens']:>9.0f}"
        )
    return "\n".join([*lines, *notes])


def format_report(report: dict[str, Any]) -> str:
    """The tables printed by `episodes eval coding` without --json."""
    parts = [
        f"Coding sessions ({report['extractor']} extractor), budget {report['budget_tokens']} tokens (chars/4); "
        "block = the recall block's answer coverage, raw = the raw-message baseline's, ratio = block / raw"
    ]
    if "sde_bench" in report:
        r = report["sde_bench"]
        amended = r["amended"]
        still = r["still_open"]
        parts.append(
            format_table(
                f"sde-bench: {r['tasks']} tasks, {r['decoys']} decoy chats per user",
                {
                    "all tasks": r,
                    **{f"  {k}": v for k, v in r["per_source"].items()},
                    **{f"  {k} half": v for k, v in r.get("per_half", {}).items()},
                },
                [
                    f"latest rule holds (amended chat shown, superseded one absent or marked replaced): "
                    f"{amended['latest_rule_holds']} of {amended['tasks']}"
                    + "".join(
                        f"; {h} half {v['latest_rule_holds']} of {v['tasks']}"
                        for h, v in amended.get("per_half", {}).items()
                    ),
                    "halves: within each source, tasks in task-id order alternate tuning / held-out "
                    "(the offline extractor's rules were chosen on the tuning half only)"
                    + "".join(f"; {k} is tuning: {v}" for k, v in r.get("opened", {}).items()),
                    f"mean share of the answer words held: block {r['answer_word_share']:.3f}, raw "
                    f"{r['baseline_answer_word_share']:.3f}",
                    f"still open items per block: {still['mean_items']:.1f} on average, {still['mean_foreign_items']:.1f} "
                    f"from chats other than the task's ({still['blocks_with_foreign_items']} of {r['tasks']} blocks show any)",
                    f"{r['seconds']}s",
                ],
            )
        )
    if "claude_code" in report:
        r = report["claude_code"]
        parts.append(
            format_table(
                f"Claude Code sessions: {r['files']} files, {r['questions']} questions (jobs/eval/claude_code_questions.json)",
                {
                    "all questions": r,
                    **{f"  answer said in {k}": v for k, v in r["per_answer_place"].items()},
                    **{f"  {k}": v for k, v in r["per_file"].items()},
                },
                [f"{r['seconds']}s"],
            )
        )
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
) -> dict[str, Any]:
    """Both data sets (or ``only`` one), each in its own scratch database; one report."""
    report: dict[str, Any] = {"extractor": extractor, "budget_tokens": budget_tokens}
    if only in (None, "sde-bench"):
        report["sde_bench"] = sdebench.run(settings, sde_bench, extractor=extractor, budget_tokens=budget_tokens)
    if only in (None, "claude-code"):
        report["claude_code"] = claude_code.run(
            settings, claude_code_root, extractor=extractor, budget_tokens=budget_tokens
        )
    return report
