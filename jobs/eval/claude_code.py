"""Real Claude Code sessions in `episodes eval coding`: our own questions, block against baseline.

Data: the session files of ``../shared/data/claude-code`` (its README names each source and licence)
that :file:`jobs/eval/claude_code_questions.json` asks about. Those questions were written for issue
36 from the sessions alone, before any block was seen, and are never changed after seeing results
(the file says so); each reference answer is made of specifics said verbatim in its session.

Each file is ingested with the Claude Code format (as ``episodes ingest --format claude-code``) as a
user of its own (``cc-<file stem>``) and summarised end to end with the chosen extractor. Every
question is recalled with the question as the opening message, one hour after the user's last
session ended. *Evidence*: an episode of the file's sessions is in the block (with one user per file
this only fails when the session yields no episode or the block shows none, so it is near 1 by
construction). Answer coverage as everywhere (:func:`jobs.eval.answers.covers`), beside the
raw-message baselines (:mod:`jobs.eval.baseline`, undated and dated) on the same user and budget; answers said only in
tool traffic (``answer_in: tool``) are out of the baseline's reach by its definition.
"""

from __future__ import annotations

import datetime as dt
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path
from typing import Any

from jobs.concepts import DEFAULT_BUDGET_TOKENS
from jobs.config import Settings
from jobs.db import Database, one
from jobs.embeddings import Embedder, embedder_for
from jobs.embeddings.protocol import Vectors, embed_queries
from jobs.errors import EpisodesError
from jobs.eval.answers import content_words
from jobs.eval.baseline import MessageIndex
from jobs.eval.provenance import data_status
from jobs.eval.queries import eval_query
from jobs.eval.scratch import scratch_database
from jobs.eval.tally import CodingTally
from jobs.recall import Recaller

TENANT = "claude-code-eval"


@dataclass(frozen=True)
class CodingQuestion:
    file: str
    question: str
    answer: str
    answer_in: str

    @property
    def user_id(self) -> str:
        return f"cc-{Path(self.file).stem}"

    @property
    def answer_words(self) -> frozenset[str]:
        return content_words(self.answer)


def shipped_questions() -> dict[str, Any]:
    """jobs/eval/claude_code_questions.json, as shipped with the package."""
    text = files("jobs.eval").joinpath("claude_code_questions.json").read_text(encoding="utf-8")
    data: dict[str, Any] = json.loads(text)
    return data


def load(root: Path, questions: dict[str, Any] | None = None) -> list[CodingQuestion]:
    """The questions whose session file is in ``root``; an error naming the folder when none is."""
    data = questions if questions is not None else shipped_questions()
    if not root.is_dir():
        raise EpisodesError(
            f"No Claude Code session files in {root} (no such folder). They are not shipped with "
            f"the project: put them in ../shared/data/claude-code beside the clone (DESIGN.md, "
            f"'Evaluation data') or pass --claude-code PATH."
        )
    found = [
        CodingQuestion(name, q["question"], q["answer"], q.get("answer_in", "spoken"))
        for name, items in data["files"].items()
        if (root / name).is_file()
        for q in items
    ]
    if not found:
        raise EpisodesError(
            f"None of the session files the questions ask about is in {root}: expected "
            f"{', '.join(sorted(data['files']))}."
        )
    return found


def build(db: Database, root: Path, questions: list[CodingQuestion], extractor_name: str) -> int:
    """Ingest each asked-about file as its own user and summarise; the number of episodes written."""
    from jobs.extract import make_extractor
    from jobs.ingest import ingest
    from jobs.summarize import run_summarize

    for name in sorted({q.file for q in questions}):
        ingest(db, [root / name], fmt="claude-code", tenant_id=TENANT, user_id=f"cc-{Path(name).stem}")
    extractor = make_extractor(db.settings, extractor_name)
    try:
        run = run_summarize(db, extractor=extractor, tenant=TENANT, concurrency=1 if extractor_name == "offline" else 4)
    finally:
        extractor.close()
    return run.done


def evaluate(
    db: Database, questions: list[CodingQuestion], embedder: Embedder, *, budget_tokens: int = DEFAULT_BUDGET_TOKENS
) -> dict[str, Any]:
    """Recall every question; figures overall and per file."""
    return evaluate_budgets(db, questions, embedder, [budget_tokens])


def evaluate_budgets(
    db: Database, questions: list[CodingQuestion], embedder: Embedder, budgets: Sequence[int]
) -> dict[str, Any]:
    """:func:`evaluate` at each budget; the first budget's report with ``by_budget`` holding each budget's."""
    raw = MessageIndex(db, embedder)
    vectors = embed_queries(embedder, [q.question for q in questions])
    reports = {str(b): _evaluate_at(db, questions, embedder, raw, vectors, b) for b in budgets}
    return {**reports[str(budgets[0])], "budgets": list(budgets), "by_budget": reports}


def _evaluate_at(
    db: Database,
    questions: list[CodingQuestion],
    embedder: Embedder,
    raw: MessageIndex,
    vectors: Vectors,
    budget_tokens: int,
) -> dict[str, Any]:
    recaller = Recaller(db, embedder)
    tallies: dict[str, CodingTally] = {"all": CodingTally()}
    answered: dict[str, CodingTally] = {"spoken": CodingTally(), "tool": CodingTally()}
    for q, vector in zip(questions, vectors):
        with db.tenant(TENANT) as conn:
            last = one(conn.execute(eval_query("eval_user_last_ended"), {"tenant_id": TENANT, "user_id": q.user_id}))
        now = (last["ended_at"] or dt.datetime.now(dt.UTC)) + dt.timedelta(hours=1)
        result = recaller.recall_vector(TENANT, q.user_id, q.question, vector, budget_tokens=budget_tokens, now=now)
        evidence = any(ep.kind == "session" for ep in result.episodes)
        block = result.render()
        baseline, dated = raw.blocks(TENANT, q.user_id, vector, budget_tokens)
        for tally in (
            tallies["all"],
            tallies.setdefault(q.file, CodingTally()),
            answered.setdefault(q.answer_in, CodingTally()),
        ):
            tally.add(evidence=evidence, answer_words=q.answer_words, block=block, baseline=baseline, dated=dated)
    return {
        **tallies["all"].summary(),
        "files": len({q.file for q in questions}),
        "per_file": {name: t.summary() for name, t in tallies.items() if name != "all"},
        "per_answer_place": {name: t.summary() for name, t in answered.items() if t.questions},
        "budget_tokens": budget_tokens,
    }


def run(
    settings: Settings,
    root: Path,
    *,
    extractor: str = "offline",
    budget_tokens: int = DEFAULT_BUDGET_TOKENS,
    budgets: Sequence[int] | None = None,
) -> dict[str, Any]:
    """Load, build in a scratch database, evaluate at each of ``budgets`` (or ``budget_tokens``), drop."""
    started = time.perf_counter()
    questions = load(root)
    embedder = embedder_for(settings)
    with scratch_database(settings, embedder) as db:
        episodes = build(db, root, questions, extractor)
        report = evaluate_budgets(db, questions, embedder, list(budgets or [budget_tokens]))
    return {
        **report,
        "episodes": episodes,
        "data_status": data_status([root]),
        "seconds": round(time.perf_counter() - started, 1),
    }
