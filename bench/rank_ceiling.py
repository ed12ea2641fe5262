"""How well variants of recall's ranking could do for strict all-evidence recall on LoCoMo; prints figures.

    python bench/rank_ceiling.py /work/shared/data/locomo/*.json [--extractor offline]

Strict all-evidence recall (every evidence session shown with its full summary) is bounded by the
ranking: this prints, per ranking of a user's episodes, the share of questions whose evidence
sessions all fit when the 1,500-token budget is filled with full summaries in that order (a
summary costs its characters plus a line's ~30; ~600 characters are left for the block's frame).
No floor, no labels: it ranks ranking signals, cheaply, before any is wired into recall (which then
is measured with ``bench/tune_fitting.py``). The users are read as ``bench/tune_fitting.py`` reads
them (scores from the in-process copy, as ``Recaller`` does).

Variants: the production fusion (reference) and vector order; Rocchio pseudo-relevance feedback
(the query vector plus beta times the mean unit vector of the m best by fused score, then fused
again); the question with its question words stripped ("When did ... ?"), alone and as a second
query vector (max of the two similarities); an idf-weighted word overlap (idf over the user's
episodes, so names in every summary count for nothing) added to the fusion or fused by rank in
place of ``ts_rank``; a boost of the episodes of a month the question names (or the month after).
"""

from __future__ import annotations

import argparse
import math
import re
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import numpy as np
from tune_fitting import Asked, User, load_users

from jobs.config import load
from jobs.embeddings import embedder_for
from jobs.recall import RecallConfig
from jobs.recall.fitting import _terms, _words
from jobs.recall.scoring import epoch_us, fuse
from jobs.recall.time_cues import falls_in, named_months

ROOM = 4 * 1500 - 600  # characters for full summaries
Ranking = Callable[[User, Asked], np.ndarray]  # a score per candidate of a.scores, higher first
WH = re.compile(r"^(what|when|where|who|which|why|how( long| many| much| often)?)( (is|are|was|were|did|does|do|"
                r"has|have|had|would|could|can|will|might))?\b\s*", re.I)


def fused(cfg: RecallConfig = RecallConfig()) -> Ranking:
    """Production's fused score of every candidate (no floor, no cut)."""
    def score(u: User, a: Asked) -> np.ndarray:
        s = a.scores
        c = replace(cfg, rank_depth=len(s.ids), top_k=len(s.ids), relevant_similarity=-1.0)
        picked = fuse(s, c, epoch_us(u.conv.now), set())
        return np.array([picked[int(i)]["score"] if int(i) in picked else 0.0 for i in s.ids])
    return score


def ceiling(users: list[User], rank: Ranking) -> float:
    hits = []
    for u in users:
        for a in u.own:
            ids = a.scores.ids
            used, shown = 0, set()
            for i in ids[np.lexsort((ids, -rank(u, a)))].tolist():
                used += len(u.rows[i]["summary"]) + 30
                if used > ROOM:
                    break
                shown.add(u.session_of.get(i))
            hits.append(a.q.sessions <= shown)
    return float(np.mean(hits))


def matrix(u: User, a: Asked) -> np.ndarray:
    return np.stack([u.vectors[int(i)] for i in a.scores.ids])


def with_similarity(sim: Callable[[User, Asked], np.ndarray]) -> Ranking:
    """Fused again with the vector list ranked by another similarity."""
    base = fused()
    return lambda u, a: base(u, replace(a, scores=replace(a.scores, distance=1.0 - sim(u, a).astype(np.float64))))


def rocchio(beta: float, m: int) -> Ranking:
    base = fused()

    def sim(u: User, a: Asked) -> np.ndarray:
        vectors = matrix(u, a)
        centre = vectors[np.argsort(-base(u, a), kind="stable")[:m]].mean(0)
        return (1.0 - a.scores.distance + beta * (vectors @ centre)) / (1 + beta)
    return with_similarity(sim)


def query_vectors(texts: Callable[[str], list[str]]) -> Ranking:
    embedder = embedder_for(load())
    cache: dict[str, np.ndarray] = {}

    def sim(u: User, a: Asked) -> np.ndarray:
        for t in texts(a.q.text):
            if t not in cache:
                v = embedder.embed([t])[0]
                cache[t] = v / np.linalg.norm(v)
        return np.max(matrix(u, a) @ np.stack([cache[t] for t in texts(a.q.text)]).T, axis=1)
    return with_similarity(sim)


def idf_overlap(u: User, a: Asked) -> np.ndarray:
    """Share of the question's idf mass (over the user's episodes) that an episode's summary holds."""
    words = {i: _words(r["summary"]) for i, r in u.rows.items()}
    terms = _terms(a.q.text)
    idf = {t: math.log(1 + len(words) / (1 + sum(" " + t in w for w in words.values()))) for t in terms}
    mass = sum(idf.values()) or 1.0
    return np.array([sum(v for t, v in idf.items() if " " + t in words[int(i)]) for i in a.scores.ids]) / mass


def by_rank(x: np.ndarray) -> np.ndarray:
    ranks = np.empty(len(x))
    ranks[np.argsort(-x, kind="stable")] = np.arange(1, len(x) + 1)
    return ranks


def month_boost(g: float) -> Ranking:
    base = fused()

    def score(u: User, a: Asked) -> np.ndarray:
        cues = named_months(a.q.text)
        days = [(u.rows[int(i)]["started_at"].date(), u.rows[int(i)]["ended_at"].date()) for i in a.scores.ids]
        return base(u, a) * (1 + g * np.array([falls_in(s, e, cues) for s, e in days]))
    return score


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("paths", nargs="+", type=Path)
    parser.add_argument("--extractor", default="oracle", choices=["oracle", "offline"])
    args = parser.parse_args()
    users = load_users(args.paths, args.extractor)
    base = fused()
    variants: dict[str, Ranking] = {
        "fused (production)": base,
        "vector only": lambda u, a: 1.0 - a.scores.distance,
        **{f"rocchio beta={b} m={m}": rocchio(b, m) for m in (2, 3, 5, 8) for b in (0.2, 0.5, 1.0)},
        "question words stripped": query_vectors(lambda t: [WH.sub("", t)]),
        "max(question, stripped)": query_vectors(lambda t: [t, WH.sub("", t)]),
        **{f"fused + {g} idf overlap": (lambda g: lambda u, a: base(u, a) + g * idf_overlap(u, a))(g)
           for g in (0.1, 0.2, 0.4)},
        **{f"rrf(vector, idf overlap) w={w}": (lambda w: lambda u, a: 1 / (1 + by_rank(1.0 - a.scores.distance))
                                               + w / (1 + by_rank(idf_overlap(u, a))))(w) for w in (0.5, 1.0)},
        **{f"fused rrf_k={k} w_text={w} decay_floor={d}": fused(replace(RecallConfig(), rrf_k=k, w_text=w, decay_floor=d))
           for k in (1.0, 3.0, 10.0) for w in (0.75, 1.0, 1.5) for d in (0.85, 1.0)},
        **{f"named month x{1 + g}": month_boost(g) for g in (0.25, 1.0, 100.0)},
    }
    print(f"strict ceiling (full summaries in ranked order, {ROOM} characters):")
    for name, rank in variants.items():
        print(f"  {name:45} {ceiling(users, rank):.3f}", flush=True)


if __name__ == "__main__":
    main()
