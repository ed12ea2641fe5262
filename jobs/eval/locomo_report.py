"""The table `episodes eval locomo` prints (jobs.eval.locomo builds the report it formats).

One table per budget (evidence, the block's answer coverage beside the undated and the dated
raw-message baseline, and the ratio to the better of the two), then, when several budgets ran, the
answer coverage of every budget side by side. The first line after the title says whether the
data is tuning data (:mod:`jobs.eval.provenance`).
"""

from __future__ import annotations

from typing import Any


def ratio(r: dict[str, Any]) -> str:
    """The block's answer coverage over the better raw-message baseline's, or ``-`` when neither covers any."""
    return "-" if r.get("answer_coverage_ratio") is None else f"{r['answer_coverage_ratio']:.2f}"


def _row(label: str, r: dict[str, Any], raw: bool = True) -> str:
    base = (
        f"{r['baseline_answer_coverage']:>7.3f} {r['dated_baseline_answer_coverage']:>7.3f} {ratio(r):>6}"
        if raw
        else f"{'':>7} {'':>7} {'':>6}"
    )
    return (
        f"{label:<24} {r['questions']:>5} {r['all_evidence_recall']:>7.3f} {r['any_evidence_recall']:>7.3f} "
        f"{r['all_evidence_recall_strict']:>7.3f} {r['answer_coverage']:>7.3f} {base} "
        f"{r['mean_block_tokens']:>8.0f} {r['p95_block_tokens']:>8.0f} {r['mean_episodes']:>5.1f}"
    )


def _rows(report: dict[str, Any], per_conversation: bool) -> list[tuple[str, dict[str, Any]]]:
    rows = [("recall (defaults)", report)]
    rows += [(f"  category {c} {r['name']}", r) for c, r in report["per_category"].items()]
    if per_conversation:
        rows += [(f"  conversation {name}", r) for name, r in report.get("per_conversation", {}).items()]
    return rows


def budget_table(report: dict[str, Any], *, per_conversation: bool = False) -> list[str]:
    """The detailed table of one budget's report."""
    lines = [
        f"budget {report['budget_tokens']} tokens (chars/4)",
        f"{'':<24} {'n':>5} {'all-ev':>7} {'any-ev':>7} {'strict':>7} {'answer':>7} {'raw':>7} {'dated':>7} "
        f"{'ratio':>6} {'mean tok':>8} {'p95 tok':>8} {'eps':>5}",
    ]
    lines += [_row(label, r) for label, r in _rows(report, per_conversation)]
    lines += [_row(f"baseline {name}", r, raw=False) for name, r in report["baselines"].items()]
    lines.append(
        f"foreign questions {report['foreign_questions']}: {report['foreign_relevant_share']:.3f} of blocks label an "
        f"episode relevant, {report['foreign_mean_relevant_tokens']:.0f} tokens on relevant episodes on average "
        f"(block {report['foreign_mean_block_tokens']:.0f})"
    )
    return lines


def side_by_side(reports: dict[str, dict[str, Any]], *, per_conversation: bool = False) -> list[str]:
    """Answer coverage (block, raw, dated, ratio) and all-evidence recall of every budget, one column group each."""
    budgets = list(reports)
    first = reports[budgets[0]]
    head = " ".join(f"| {b + ' tokens':<37}" for b in budgets)
    sub = " ".join(f"| {'answer':>6} {'raw':>6} {'dated':>6} {'ratio':>5} {'all-ev':>7}" for _ in budgets)
    lines = ["answer coverage by budget", f"{'':<24} {head}", f"{'':<24} {sub}"]
    for label, _ in _rows(first, per_conversation):
        cells = []
        for b in budgets:
            r = _find(reports[b], label)
            cells.append(
                f"| {r['answer_coverage']:>6.3f} {r['baseline_answer_coverage']:>6.3f} "
                f"{r['dated_baseline_answer_coverage']:>6.3f} {ratio(r):>5} {r['all_evidence_recall']:>7.3f}"
            )
        lines.append(f"{label:<24} {' '.join(cells)}")
    return lines


def compression_table(comp: dict[str, Any], *, per_conversation: bool = False) -> list[str]:
    """Answer coverage uncompressed and compressed, and compressed / uncompressed, of every budget side by side."""
    budgets = list(comp["by_budget"])
    first = comp["by_budget"][budgets[0]]
    labels = [("recall (defaults)", first)]
    labels += [(f"  category {c}", v) for c, v in first["per_category"].items()]
    if per_conversation:
        labels += [(f"  conversation {c}", v) for c, v in first["per_conversation"].items()]

    def pick(b: str, label: str) -> dict[str, Any]:
        r = comp["by_budget"][b]
        if label.startswith("  category "):
            return dict(r["per_category"][label.split()[1]])
        if label.startswith("  conversation "):
            return dict(r["per_conversation"][label.split()[1]])
        return dict(r)

    lines = [
        f"compression: sessions older than each conversation's last 30 days, by month, offline compressor: "
        f"{comp['sessions_compressed']} of {comp['sessions_older_than_30_days']} such sessions (of "
        f"{comp['sessions']}) compressed into {comp['supers']} super-summaries, {comp['failed']} groups failed",
        f"{'':<24} " + " ".join(f"| {b + ' tokens':<38}" for b in budgets),
        f"{'':<24} " + " ".join(f"| {'uncomp':>6} {'comp':>6} {'ratio':>5} {'all-ev':>7} {'comp':>7}" for _ in budgets),
    ]
    for label, _ in labels:
        cells = []
        for b in budgets:
            r = pick(b, label)
            rat = "-" if r["ratio"] is None else f"{r['ratio']:.2f}"
            cells.append(
                f"| {r['uncompressed']:>6.3f} {r['compressed']:>6.3f} {rat:>5} "
                f"{r['all_evidence_uncompressed']:>7.3f} {r['all_evidence_compressed']:>7.3f}"
            )
        lines.append(f"{label:<24} {' '.join(cells)}")
    lines.append("ratio = compressed / uncompressed answer coverage (goal >= 0.95); a super stands for its sessions")
    return lines


def _find(report: dict[str, Any], label: str) -> dict[str, Any]:
    return dict(_rows(report, True))[label]


def format_report(report: dict[str, Any], *, per_conversation: bool = False) -> str:
    """The human-readable tables printed without --json (with one row per conversation if asked)."""
    reports: dict[str, dict[str, Any]] = report.get("by_budget") or {str(report["budget_tokens"]): report}
    lines = [
        f"LoCoMo recall: {report['conversations']} conversations, {report['sessions']} sessions, "
        f"{report['episodes']} episodes ({report['extractor']})",
        *([report["data_status"]] if report.get("data_status") else []),
        "answer = the block's answer coverage; raw = the raw-message baseline's in the same budget (no dates); "
        "dated = the same with each message led by its session's date; ratio = answer / the better of raw and dated",
    ]
    for r in reports.values():
        lines += ["", *budget_table(r, per_conversation=per_conversation)]
    if len(reports) > 1:
        lines += ["", *side_by_side(reports, per_conversation=per_conversation)]
    if report.get("compression"):
        lines += ["", *compression_table(report["compression"], per_conversation=per_conversation)]
    lines += [
        "",
        f"skipped {report['malformed_evidence_ids']} malformed evidence ids; "
        f"{report['questions_without_usable_evidence']} questions without usable evidence left out; "
        f"{report['seconds']}s",
    ]
    return "\n".join(lines)
