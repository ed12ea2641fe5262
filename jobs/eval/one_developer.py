"""sde-bench as one developer's history (issue 47, goal "One developer's history"), in `episodes eval coding`.

:mod:`jobs.eval.sdebench` gives every task its own user so that families sharing a module never mix.
Here they do: one user, ``sde-one-developer``, holds the 140 decoy chats AND every task's chats (27
``conversation`` tasks with one chat, 6 ``conversation-amended`` tasks with two), on the same synthetic
timeline as :mod:`jobs.eval.sdebench` (decoy ``i`` at T - (140 - i) days, each task's first chat at T,
an amended task's second chat at T + 30 days, turns a minute apart). Every task's first chat starts at
T, so the 33 decision chats overlap in time: the timeline rule, kept as it is.

**Building.** The decoys, already summarised once for :mod:`jobs.eval.sdebench` (user ``sde-decoys``),
are copied to the user (:func:`jobs.eval.clone.clone_user`, session ids prefixed ``one/``); then every
task's chats are ingested oldest first (``one/<task_id>/chat-<j>``) and summarised by the summarize job
with the chosen extractor, as :func:`jobs.eval.sdebench.build` does for one task.

**Figures**, at each budget, every task's ``bug_report`` recalled as the opening message with ``now``
one day after the latest chat of the whole history:

- amended tasks (6): the amending chat's episode is in the block and labelled relevant (``"relevant"`` in
  its reasons); the superseded chat's episode is absent or marked replaced (``replaced_on`` set); both;
- every task (33): the block says nothing relates (``Recall.nothing_relevant``) while it quotes one of the
  best matches: a quoted line at least ``RecallConfig().line_relevant`` similar to the opening message, or
  the quoted line most similar to it (the lines recalled are the lines the block quotes). Goal: 0.

All of sde-bench is tuning data (:mod:`jobs.eval.provenance`); the report says so.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from jobs.db import Database
from jobs.embeddings import Embedder
from jobs.embeddings.protocol import embed_queries
from jobs.errors import EpisodesError
from jobs.eval.clone import clone_user
from jobs.eval.provenance import data_status
from jobs.eval.sdebench import DECOY_USER, TENANT, SdeBench, Task, _loaded, _record, chat_start
from jobs.ingest import ingest_records
from jobs.recall import Recall, RecallConfig, Recaller

USER = "sde-one-developer"
PREFIX = "one/"


def session_id(task: Task, j: int) -> str:
    """The session id of a task's chat ``j`` in the one-developer history."""
    return f"{PREFIX}{task.session_id(j)}"


def last_chat(data: SdeBench) -> dt.datetime:
    """The start of the latest chat of the whole history (an amended task's second chat, when there is one)."""
    return max(chat_start(t, len(t.chats) - 1) for t in data.tasks)


def _decoys_summarised(db: Database) -> int:
    with db.tenant(TENANT) as conn:
        row = conn.execute(
            "SELECT count(*) AS n FROM episodes WHERE tenant_id = %s AND user_id = %s", (TENANT, DECOY_USER)
        ).fetchone()
    return int(row["n"]) if row else 0


def build(db: Database, data: SdeBench, extractor_name: str) -> dict[str, int]:
    """The one-developer user: the summarised decoys copied, then every task's chats summarised, oldest first.

    Runs after :func:`jobs.eval.sdebench.build` in the same database (it copies the decoys' episodes)."""
    from jobs.extract import make_extractor
    from jobs.summarize import run_summarize

    if data.decoys and not _decoys_summarised(db):
        raise EpisodesError(
            f"one developer's history: user {DECOY_USER!r} has no episodes; run jobs.eval.sdebench.build first"
        )
    clone_user(db, TENANT, DECOY_USER, [(USER, PREFIX)])
    order = sorted(
        ((chat_start(t, j), i, j) for i, t in enumerate(data.tasks) for j in range(len(t.chats))),
        key=lambda x: (x[0], x[2], x[1]),
    )
    chats = [
        (
            f"{data.tasks[i].task_id} chat {j + 1} (one developer)",
            _record(USER, session_id(data.tasks[i], j), start, data.tasks[i].chats[j]),
        )
        for start, i, j in order
    ]
    _loaded(ingest_records(db, chats, tenant_id=TENANT, only_tenant=True))
    extractor = make_extractor(db.settings, extractor_name)
    try:  # one worker keeps the offline run deterministic, as in jobs.eval.sdebench.build
        concurrency = 1 if extractor_name == "offline" else 4
        done = run_summarize(db, extractor=extractor, tenant=TENANT, concurrency=concurrency).done
    finally:
        extractor.close()
    return {"episodes": done, "chats": len(chats)}


def best_match_under_nothing(result: Recall, line_relevant: float) -> dict[str, Any]:
    """Whether the block says nothing relates above a quote among the best matches (module docstring)."""
    lines = [line for ep in result.episodes for line in ep.lines]
    top = max((line.similarity for line in lines), default=None)
    best = [line for line in lines if line.similarity >= line_relevant or line.similarity == top]
    return {
        "nothing_relevant": result.nothing_relevant,
        "quoted_lines": len(lines),
        "best_line_similarity": None if top is None else round(top, 4),
        "lines_at_line_relevant": sum(line.similarity >= line_relevant for line in lines),
        "violation": bool(result.nothing_relevant and best),
    }


def amended_figures(result: Recall, task: Task) -> dict[str, Any]:
    """The amending chat shown and labelled relevant; the superseded one absent or marked replaced."""
    shown = {ep.session_id: ep for ep in result.episodes if ep.session_id}
    new, old = shown.get(session_id(task, len(task.chats) - 1)), shown.get(session_id(task, 0))
    relevant = new is not None and "relevant" in new.reasons
    replaced = old is None or old.replaced_on is not None
    return {
        "amending_shown": new is not None,
        "amending_reasons": [] if new is None else list(new.reasons),
        "amending_relevant": relevant,
        "superseded_shown": old is not None,
        "superseded_reasons": [] if old is None else list(old.reasons),
        "superseded_absent_or_replaced": replaced,
        "both": relevant and replaced,
    }


def evaluate_at(db: Database, data: SdeBench, embedder: Embedder, budget_tokens: int) -> dict[str, Any]:
    """Every task's bug report recalled from the one user at one budget; the figures of the module docstring."""
    recaller = Recaller(db, embedder)
    line_relevant = RecallConfig().line_relevant
    now = last_chat(data) + dt.timedelta(days=1)
    vectors = embed_queries(embedder, [t.bug_report for t in data.tasks])
    per_task: dict[str, dict[str, Any]] = {}
    for task, vector in zip(data.tasks, vectors):
        result = recaller.recall_vector(TENANT, USER, task.bug_report, vector, budget_tokens=budget_tokens, now=now)
        row = {**best_match_under_nothing(result, line_relevant), "tokens": result.tokens}
        if task.amended:
            row.update(amended_figures(result, task))
        per_task[task.task_id] = row
    amended = [r for r in per_task.values() if "both" in r]
    return {
        "budget_tokens": budget_tokens,
        "amended_tasks": len(amended),
        "amending_relevant": sum(r["amending_relevant"] for r in amended),
        "superseded_absent_or_replaced": sum(r["superseded_absent_or_replaced"] for r in amended),
        "both": sum(r["both"] for r in amended),
        "tasks": len(per_task),
        "nothing_relevant": sum(r["nothing_relevant"] for r in per_task.values()),
        "nothing_relates_over_best_match": sum(r["violation"] for r in per_task.values()),
        "per_task": per_task,
    }


def run_in(
    db: Database, data: SdeBench, embedder: Embedder, extractor_name: str, budgets: Sequence[int], root: Path
) -> dict[str, Any]:
    """Build the one user in ``db`` (after :func:`jobs.eval.sdebench.build`) and evaluate at each budget."""
    built = build(db, data, extractor_name)
    by_budget = {str(b): evaluate_at(db, data, embedder, b) for b in budgets}
    return {
        "user": USER,
        "decoys": len(data.decoys),
        "tasks": len(data.tasks),
        **built,
        "now": (last_chat(data) + dt.timedelta(days=1)).isoformat(),
        "line_relevant": RecallConfig().line_relevant,
        "budgets": list(budgets),
        "by_budget": by_budget,
        "data_status": data_status([root]),
    }


def format_section(r: dict[str, Any]) -> str:
    """The table printed by `episodes eval coding` for the one-developer history, a row per budget."""
    n, a = r["tasks"], next(iter(r["by_budget"].values()))["amended_tasks"]
    lines = [
        f"sde-bench, one developer's history: user {r['user']} holds {r['decoys']} decoy chats and the {r['chats']} "
        f"chats of all {n} tasks; each bug report opens a session on {r['now'][:10]} (goal: {a} of {a}, and 0)",
        f"{'budget':>8} {'amending relevant':>18} {'superseded gone/replaced':>25} {'both':>6} "
        f"{'nothing relates':>16} {'...over a best match':>21}",
    ]
    for b, x in r["by_budget"].items():
        k = x["amended_tasks"]
        lines.append(
            f"{b:>8} {x['amending_relevant']:>13} of {k} {x['superseded_absent_or_replaced']:>20} of {k} "
            f"{x['both']:>1} of {k} {x['nothing_relevant']:>10} of {n} {x['nothing_relates_over_best_match']:>15} of {n}"
        )
    for b, x in r["by_budget"].items():
        missed = [t for t, row in x["per_task"].items() if "both" in row and not row["both"]]
        over = [t for t, row in x["per_task"].items() if row["violation"]]
        lines.append(f"{b} tokens, amended tasks missing both: {', '.join(missed) or 'none'}")
        lines.append(f"{b} tokens, nothing relates above a best match: {', '.join(over) or 'none'}")
    lines.append(
        f"best match: a quoted line at least {r['line_relevant']} similar to the bug report (line_relevant), "
        "or the quoted line most similar to it; amended = conversation-amended tasks"
    )
    return "\n".join([*lines, r["data_status"]])
