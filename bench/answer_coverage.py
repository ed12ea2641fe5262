"""Does the recall block carry more of the answers than the raw-message baseline? (issue 36)

Run from the repository root:

    python bench/answer_coverage.py                 # LoCoMo, sde-bench and Claude Code, offline, 1,500 tokens
    python bench/answer_coverage.py --json
    python bench/answer_coverage.py --conversations 1 --sde-tasks 2 --sde-decoys 10   # a quick look

One process, one embedded PostgreSQL in a scratch home (removed afterwards), the offline extractor
end to end and the default budget. It runs the two evaluations of ``episodes eval``:

- ``episodes eval locomo --extractor offline`` on ``../shared/data/locomo`` (:mod:`jobs.eval.locomo`);
- ``episodes eval coding`` on ``../shared/data/sde-bench`` and ``../shared/data/claude-code``
  (:mod:`jobs.eval.coding`),

and prints, per data set and category, the block's answer coverage beside both raw-message baselines'
(:mod:`jobs.eval.baseline`: every user and assistant message embedded with the same embedder, the
closest to the question filling the same budget, without dates and each led by its session's date)
and the ratio of the block to the better of the two (issue 47's goal: at least 1.15 overall, 1 on
every conversation and data set), with evidence recall, then the seconds and the peak RSS of each
part. A data set whose folder is missing is reported as skipped. All of ../shared/data is tuning data
(:mod:`jobs.eval.provenance`). Figures in docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script from a checkout, without installing
    sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from _common import bench_database, peak_rss_mb, scratch_home  # noqa: E402

SHARED = ROOT.parent / "shared" / "data"


def _locomo(settings: Any, folder: Path, conversations: int | None, budget: int) -> dict[str, Any]:
    from jobs.eval.locomo import run_eval

    files = sorted(folder.glob("*.json"))[:conversations]
    if not files:
        return {"skipped": f"no LoCoMo *.json files in {folder}"}
    return run_eval(settings, files, extractor="offline", budget_tokens=budget)


def _sde_bench(settings: Any, folder: Path, tasks: int | None, decoys: int | None, budget: int) -> dict[str, Any]:
    from jobs.embeddings import embedder_for
    from jobs.eval import sdebench
    from jobs.eval.provenance import data_status
    from jobs.eval.scratch import scratch_database

    if not folder.is_dir():
        return {"skipped": f"no sde-bench data in {folder}"}
    data = sdebench.load(folder)
    if tasks is not None:  # keep both sources: amended tasks first, then the others
        ordered = [t for t in data.tasks if t.amended] + [t for t in data.tasks if not t.amended]
        picked = {t.task_id for t in ordered[: (tasks + 1) // 2]} | {t.task_id for t in ordered[::-1][: tasks // 2]}
        data = dataclasses.replace(data, tasks=[t for t in data.tasks if t.task_id in picked])
    if decoys is not None:
        data = dataclasses.replace(data, decoys=data.decoys[:decoys])
    embedder = embedder_for(settings)
    with scratch_database(settings, embedder) as db:
        built = sdebench.build(db, data, "offline")
        return {
            **sdebench.evaluate(db, data, embedder, budget_tokens=budget),
            **built,
            "data_status": data_status([folder]),
        }


def _claude_code(settings: Any, folder: Path, budget: int) -> dict[str, Any]:
    from jobs.eval import claude_code

    if not folder.is_dir():
        return {"skipped": f"no Claude Code sessions in {folder}"}
    return claude_code.run(settings, folder, extractor="offline", budget_tokens=budget)


def _timed(name: str, parts: dict[str, Any], run: Any) -> None:
    started = time.perf_counter()
    result = run()
    result["bench_seconds"] = round(time.perf_counter() - started, 1)
    result["peak_rss_mb_after"] = round(peak_rss_mb(), 1)
    parts[name] = result


def _ratio(r: dict[str, Any]) -> str:
    return "-" if r.get("answer_coverage_ratio") is None else f"{r['answer_coverage_ratio']:.2f}"


def _row(label: str, r: dict[str, Any], evidence_key: str) -> str:
    return (
        f"{label:<34} {r['questions']:>5} {r[evidence_key]:>9.3f} {r['answer_coverage']:>7.3f} "
        f"{r['baseline_answer_coverage']:>7.3f} {r['dated_baseline_answer_coverage']:>7.3f} {_ratio(r):>6}"
    )


def report(parts: dict[str, Any]) -> str:
    lines = [
        "Answer coverage, offline extractor end to end, budget "
        f"{parts['budget_tokens']} tokens: block vs the raw-message baselines, without dates (raw) and each message "
        "led by its session's date (dated); ratio = block / the better of raw and dated",
        "tuning data: everything in ../shared/data was read while choosing rules and settings",
        f"{'':<34} {'n':>5} {'evidence':>9} {'block':>7} {'raw':>7} {'dated':>7} {'ratio':>6}",
    ]
    for name, title in (("locomo", "LoCoMo"), ("sde_bench", "sde-bench"), ("claude_code", "Claude Code")):
        r = parts.get(name)
        if r is None:
            continue
        if "skipped" in r:
            lines.append(f"{title}: skipped ({r['skipped']})")
            continue
        if name == "locomo":
            lines.append(_row(f"LoCoMo ({r['conversations']} conversations)", r, "all_evidence_recall"))
            lines += [
                _row(f"  category {c} {v['name']}", v, "all_evidence_recall") for c, v in r["per_category"].items()
            ]
            lines += [_row(f"  conversation {c}", v, "all_evidence_recall") for c, v in r["per_conversation"].items()]
            extra = f"foreign questions with anything labelled relevant: {r['foreign_relevant_share']:.3f}"
        elif name == "sde_bench":
            lines.append(_row(f"sde-bench ({r['tasks']} tasks, {r['decoys']} decoys)", r, "evidence_recall"))
            lines += [_row(f"  {s}", v, "evidence_recall") for s, v in r["per_source"].items()]
            extra = (
                f"latest rule holds {r['amended']['latest_rule_holds']} of {r['amended']['tasks']}; still open "
                f"per block {r['still_open']['mean_items']:.1f}, from other chats "
                f"{r['still_open']['mean_foreign_items']:.1f}"
            )
        else:
            lines.append(_row(f"Claude Code ({r['files']} files)", r, "evidence_recall"))
            lines += [_row(f"  answer said in {k}", v, "evidence_recall") for k, v in r["per_answer_place"].items()]
            extra = ""
        lines.append(
            f"  {extra + '; ' if extra else ''}{r['bench_seconds']}s, peak RSS {r['peak_rss_mb_after']:.0f} MB"
        )
    lines.append(f"total {parts['seconds']}s, peak RSS {parts['peak_rss_mb']:.0f} MB")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    from jobs import config
    from jobs.concepts import DEFAULT_BUDGET_TOKENS

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--locomo", type=Path, default=SHARED / "locomo", help="folder of LoCoMo *.json files")
    parser.add_argument("--sde-bench", type=Path, default=SHARED / "sde-bench", help="folder of sde-bench")
    parser.add_argument(
        "--claude-code", type=Path, default=SHARED / "claude-code", help="folder of the Claude Code session files"
    )
    parser.add_argument("--conversations", type=int, default=None, help="only the first N LoCoMo conversations")
    parser.add_argument("--sde-tasks", type=int, default=None, help="only N sde-bench tasks (half of them amended)")
    parser.add_argument("--sde-decoys", type=int, default=None, help="only the first N sde-bench decoy chats")
    parser.add_argument("--budget", type=int, default=DEFAULT_BUDGET_TOKENS, help="token budget of every block")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    parts: dict[str, Any] = {"budget_tokens": args.budget}
    with scratch_home() as home:
        settings = config.load().with_(database_url=bench_database(home / "pgdata"), home=home)
        _timed("locomo", parts, lambda: _locomo(settings, args.locomo, args.conversations, args.budget))
        _timed(
            "sde_bench",
            parts,
            lambda: _sde_bench(settings, args.sde_bench, args.sde_tasks, args.sde_decoys, args.budget),
        )
        _timed("claude_code", parts, lambda: _claude_code(settings, args.claude_code, args.budget))
    parts["seconds"] = round(time.perf_counter() - started, 1)
    parts["peak_rss_mb"] = round(peak_rss_mb(), 1)
    print(json.dumps(parts, indent=1, default=str) if args.json else report(parts))


if __name__ == "__main__":
    main()
