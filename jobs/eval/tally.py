"""Answer coverage beside both raw-message baselines, and the figures of one group of coding questions.

:class:`Coverage` counts, for one group of questions, how many answers the recall block covers, how
many the undated raw-message baseline covers and how many the dated one does (:mod:`jobs.eval.baseline`),
all in the same budget. The ratio is the block's against the *better* of the two baselines on that
group (issue 47): a block must beat whichever plain retrieval does best there.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from jobs.eval.answers import covers, words
from jobs.tokens import estimate_tokens


@dataclass
class Coverage:
    """Answers covered by the block and by each raw-message baseline, among questions with an answer."""

    coverable: int = 0
    covered: int = 0
    baseline_covered: int = 0
    dated_covered: int = 0

    def add(self, answer_words: frozenset[str], block: str, baseline: str, dated: str) -> None:
        self.coverable += bool(answer_words)
        self.covered += covers(block, answer_words)
        self.baseline_covered += covers(baseline, answer_words)
        self.dated_covered += covers(dated, answer_words)

    def summary(self) -> dict[str, Any]:
        c = self.coverable
        better = max(self.baseline_covered, self.dated_covered)
        return {
            "answer_coverage": round(self.covered / c, 4) if c else 0.0,
            "baseline_answer_coverage": round(self.baseline_covered / c, 4) if c else 0.0,
            "dated_baseline_answer_coverage": round(self.dated_covered / c, 4) if c else 0.0,
            "better_baseline": "dated" if self.dated_covered > self.baseline_covered else "undated",
            # block / the better baseline; None when neither covers anything
            "answer_coverage_ratio": round(self.covered / better, 3) if better else None,
            "undated_ratio": round(self.covered / self.baseline_covered, 3) if self.baseline_covered else None,
        }


@dataclass
class CodingTally:
    """Counts for one group of coding questions (a data set, or a part of one)."""

    questions: int = 0
    evidence: int = 0
    coverage: Coverage = field(default_factory=Coverage)
    tokens: list[int] = field(default_factory=list)
    word_share: list[float] = field(default_factory=list)  # of the answer's words, the share in the block
    baseline_word_share: list[float] = field(default_factory=list)
    dated_word_share: list[float] = field(default_factory=list)

    def add(self, *, evidence: bool, answer_words: frozenset[str], block: str, baseline: str, dated: str = "") -> None:
        self.questions += 1
        self.evidence += evidence
        self.coverage.add(answer_words, block, baseline, dated)
        self.tokens.append(estimate_tokens(block))
        if answer_words:  # a graded view beside all-or-nothing coverage (long sde-bench policies)
            for shares, text in (
                (self.word_share, block),
                (self.baseline_word_share, baseline),
                (self.dated_word_share, dated),
            ):
                shares.append(len(answer_words & set(words(text))) / len(answer_words))

    def summary(self) -> dict[str, Any]:
        n, c = self.questions, self.coverage.coverable
        return {
            "questions": n,
            "evidence_recall": round(self.evidence / n, 4) if n else 0.0,
            **self.coverage.summary(),
            "mean_block_tokens": round(sum(self.tokens) / n, 1) if n else 0.0,
            "answer_word_share": round(sum(self.word_share) / c, 4) if c else 0.0,
            "baseline_answer_word_share": round(sum(self.baseline_word_share) / c, 4) if c else 0.0,
            "dated_baseline_answer_word_share": round(sum(self.dated_word_share) / c, 4) if c else 0.0,
        }
