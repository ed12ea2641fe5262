"""The figures of one group of coding questions (jobs.eval.coding): evidence, block and baseline coverage."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from jobs.eval.answers import covers, words
from jobs.tokens import estimate_tokens


@dataclass
class CodingTally:
    """Counts for one group of questions (a data set, or a part of one)."""

    questions: int = 0
    evidence: int = 0
    coverable: int = 0
    covered: int = 0
    baseline_covered: int = 0
    tokens: list[int] = field(default_factory=list)
    word_share: list[float] = field(default_factory=list)  # of the answer's words, the share in the block
    baseline_word_share: list[float] = field(default_factory=list)

    def add(self, *, evidence: bool, answer_words: frozenset[str], block: str, baseline: str) -> None:
        self.questions += 1
        self.evidence += evidence
        self.coverable += bool(answer_words)
        self.covered += covers(block, answer_words)
        self.baseline_covered += covers(baseline, answer_words)
        self.tokens.append(estimate_tokens(block))
        if answer_words:  # a graded view beside all-or-nothing coverage (long sde-bench policies)
            self.word_share.append(len(answer_words & set(words(block))) / len(answer_words))
            self.baseline_word_share.append(len(answer_words & set(words(baseline))) / len(answer_words))

    def summary(self) -> dict[str, Any]:
        n, c = self.questions, self.coverable
        return {
            "questions": n,
            "evidence_recall": round(self.evidence / n, 4) if n else 0.0,
            "answer_coverage": round(self.covered / c, 4) if c else 0.0,
            "baseline_answer_coverage": round(self.baseline_covered / c, 4) if c else 0.0,
            "answer_coverage_ratio": round(self.covered / self.baseline_covered, 3) if self.baseline_covered else None,
            "mean_block_tokens": round(sum(self.tokens) / n, 1) if n else 0.0,
            "answer_word_share": round(sum(self.word_share) / c, 4) if c else 0.0,
            "baseline_answer_word_share": round(sum(self.baseline_word_share) / c, 4) if c else 0.0,
        }
