"""The counts of `episodes eval locomo` for one group of questions (jobs.eval.locomo): evidence, coverage, size."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from jobs.eval.tally import Coverage
from jobs.recall.result import RecalledEpisode, line_macros
from jobs.tokens import estimate_tokens

if TYPE_CHECKING:
    from jobs.eval.locomo_data import Question
    from jobs.recall import Recall


@dataclass
class Tally:
    all_hits: int = 0
    any_hits: int = 0
    full_hits: int = 0
    coverage: Coverage = field(default_factory=Coverage)
    tokens: list[int] = field(default_factory=list)
    episodes: list[int] = field(default_factory=list)

    def add(
        self, q: Question, shown: set[int], full: set[int], block: str, baseline: str = "", dated: str = ""
    ) -> None:
        self.all_hits += q.sessions <= shown
        self.any_hits += bool(q.sessions & shown)
        self.full_hits += q.sessions <= full
        self.coverage.add(q.answer_words, block, baseline, dated)
        self.tokens.append(estimate_tokens(block))
        self.episodes.append(len(shown))

    def summary(self) -> dict[str, Any]:
        n = len(self.tokens)
        return {
            "questions": n,
            "all_evidence_recall": round(self.all_hits / n, 4) if n else 0.0,
            "any_evidence_recall": round(self.any_hits / n, 4) if n else 0.0,
            "all_evidence_recall_full_text": round(self.full_hits / n, 4) if n else 0.0,
            # the same figure under its issue-16 name: evidence sessions shown in full, not as a compact line
            "all_evidence_recall_strict": round(self.full_hits / n, 4) if n else 0.0,
            **self.coverage.summary(),
            "mean_block_tokens": round(float(np.mean(self.tokens)), 1) if n else 0.0,
            "p95_block_tokens": round(float(np.percentile(self.tokens, 95)), 1) if n else 0.0,
            "mean_episodes": round(float(np.mean(self.episodes)), 2) if n else 0.0,
        }


@dataclass
class ForeignTally:
    """Questions of the other conversations asked of a user: the right answer is silence."""

    blocks_with_relevant: int = 0
    relevant_tokens: list[float] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)

    def add(self, result: Recall) -> None:
        relevant = [ep for ep in result.episodes if "relevant" in ep.reasons]
        self.blocks_with_relevant += bool(relevant)
        self.relevant_tokens.append(sum(_line_tokens(ep) for ep in relevant))
        self.tokens.append(estimate_tokens(result.render()))

    def summary(self) -> dict[str, Any]:
        n = len(self.tokens)
        return {
            "foreign_questions": n,
            "foreign_relevant_share": round(self.blocks_with_relevant / n, 4) if n else 0.0,
            "foreign_mean_relevant_tokens": round(float(np.mean(self.relevant_tokens)), 1) if n else 0.0,
            "foreign_mean_block_tokens": round(float(np.mean(self.tokens)), 1) if n else 0.0,
        }


def _line_tokens(ep: RecalledEpisode) -> float:
    """Tokens (characters / 4) of the episode's line in the block, its newline included."""
    return (len(line_macros().episode_line(ep)) + 1) / 4
