"""Calibrate recall's relevance floor on LoCoMo, leave one conversation out; prints figures, asserts nothing.

    python bench/calibrate_floor.py /work/shared/data/locomo/*.json                  # reference summaries
    python bench/calibrate_floor.py /work/shared/data/locomo/*.json --extractor offline

The floor (``RecallConfig``): an episode may be labelled relevant when its cosine similarity to the
opening message is >= ``relevant_similarity``, or >= ``relevant_similarity_with_text`` while its
text score (BM25 in units of the rarest match, jobs/recall/bm25.py) is >= ``relevant_text``.
For every rule of a grid this measures, per conversation, its own questions' all-evidence and strict
recall (real recalls, 1,500 tokens) and the share of *foreign* questions (those of the other
conversations, asked of this user) for which any episode clears the floor (from the scores of every
episode: with a few dozen episodes a user, every one is within the fused lists' depth). A recall
depends on the rule only through the set of episodes that clear it, so one recall is made per set. Then, for each
conversation held out, it picks the rule with the best all-evidence recall on the other four whose
foreign share there is <= --foreign-max, and reports that rule's figures on the held-out one.
"""

from __future__ import annotations

import argparse
import itertools
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

from jobs.config import load
from jobs.embeddings import embedder_for
from jobs.eval.locomo import (
    TENANT,
    Conversation,
    Question,
    build_extracted,
    build_oracle,
    load_conversation,
    scratch_database,
)
from jobs.recall import RecallConfig, Recaller
from jobs.recall.scoring import epoch_us

Rule = tuple[float, float, float]
Features = tuple[np.ndarray, np.ndarray, np.ndarray]  # episode ids, similarities, text scores
SIMILARITY = (0.45, 0.5, 0.55, 0.6, 0.65)
WITH_TEXT = (0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4)
TEXT = (0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 2.0, 2.5, 3.0, 4.0)


def session_number(session_id: str | None) -> int | None:
    return int(session_id.rsplit("-s", 1)[1]) if session_id and "-s" in session_id else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("paths", nargs="+", type=Path)
    parser.add_argument("--extractor", default="oracle", choices=("oracle", "offline"))
    parser.add_argument("--budget", type=int, default=1500)
    parser.add_argument("--foreign-max", type=float, default=0.10)
    args = parser.parse_args()
    settings = load()
    embedder = embedder_for(settings)
    convs = [load_conversation(p) for p in args.paths]
    qvecs = {c.user_id: embedder.embed([q.text for q in c.questions]) for c in convs}
    rules = list(itertools.product(SIMILARITY, WITH_TEXT, TEXT))
    own: dict[str, dict[Rule, tuple[float, float]]] = {c.user_id: {} for c in convs}
    foreign: dict[str, dict[Rule, float]] = {c.user_id: {} for c in convs}
    with scratch_database(settings, embedder) as db:
        if args.extractor == "oracle":
            build_oracle(db, convs, embedder)
        else:
            build_extracted(db, [c.path for c in convs], args.extractor)
        probe = Recaller(db, embedder)

        def features(conv: Conversation, questions: list[Question], vectors: np.ndarray) -> list[Features]:
            """Per question: the ids, similarities and text scores of the user's episodes."""
            found = []
            with db.tenant(TENANT) as conn:
                for q, vec in zip(questions, vectors):
                    with probe.index.user(conn, TENANT, conv.user_id, q.text) as (index, lexemes):
                        s = index.scores(vec, lexemes, epoch_us(conv.now), None)
                    found.append((s.ids, 1.0 - s.distance, np.nan_to_num(s.text, nan=-1.0)))
            return found

        def passing(f: Features, rule: Rule) -> frozenset[int]:
            ids, sim, text = f
            return frozenset(ids[(sim >= rule[0]) | ((sim >= rule[1]) & (text >= rule[2]))].tolist())

        for conv in convs:
            others = [(q, v) for o in convs if o is not conv for q, v in zip(o.questions, qvecs[o.user_id])]
            asked = features(conv, [q for q, _ in others], np.array([v for _, v in others]))
            for rule in rules:
                foreign[conv.user_id][rule] = float(np.mean([bool(passing(f, rule)) for f in asked]))
        # A recall depends on the rule only through which episodes clear the floor: one recall per set.
        recalled: dict[tuple[str, int, frozenset[int]], tuple[bool, bool]] = {}
        for conv in convs:
            mine = features(conv, conv.questions, qvecs[conv.user_id])
            for rule in rules:
                cfg = replace(RecallConfig(), relevant_similarity=rule[0], relevant_similarity_with_text=rule[1],
                              relevant_text=rule[2])
                recaller = Recaller(db, embedder, cfg, index=probe.index)
                all_hits = strict = 0
                for k, (q, vec) in enumerate(zip(conv.questions, qvecs[conv.user_id])):
                    key = (conv.user_id, k, passing(mine[k], rule))
                    if key not in recalled:
                        result = recaller.recall_vector(TENANT, conv.user_id, q.text, vec, budget_tokens=args.budget,
                                                        now=conv.now)
                        shown = {session_number(ep.session_id) for ep in result.episodes}
                        full = {session_number(ep.session_id) for ep in result.episodes if not ep.compact}
                        recalled[key] = (q.sessions <= shown, q.sessions <= full)
                    all_hits += recalled[key][0]
                    strict += recalled[key][1]
                own[conv.user_id][rule] = (all_hits / len(conv.questions), strict / len(conv.questions))
            print(f"  {conv.user_id}: {len(recalled)} recalls so far", file=sys.stderr)
    weights = {c.user_id: len(c.questions) for c in convs}

    def pooled(users: list[str], rule: Rule) -> tuple[float, float, float]:
        n = sum(weights[u] for u in users)
        return (sum(own[u][rule][0] * weights[u] for u in users) / n,
                sum(own[u][rule][1] * weights[u] for u in users) / n,
                float(np.mean([foreign[u][rule] for u in users])))

    def best(users: list[str]) -> Rule:
        allowed = [r for r in rules if pooled(users, r)[2] <= args.foreign_max] or rules
        return max(allowed, key=lambda r: (pooled(users, r)[0], pooled(users, r)[1], -pooled(users, r)[2]))

    users = [c.user_id for c in convs]
    print(f"extractor {args.extractor}; {len(rules)} rules; foreign share <= {args.foreign_max}")
    print("held out        rule (sim, sim+text, text)  all-evidence  strict  foreign   (on the other four)")
    held = []
    for u in users:
        rule = best([v for v in users if v != u])
        a, s, f = pooled([u], rule)
        held.append((a * weights[u], s * weights[u], f))
        print(f"{u:15} {str(rule):27} {a:12.3f} {s:7.3f} {f:8.3f}   {pooled([v for v in users if v != u], rule)[0]:.3f}")
    n = sum(weights.values())
    print(f"leave-one-out pooled:                       {sum(h[0] for h in held) / n:12.3f} "
          f"{sum(h[1] for h in held) / n:7.3f} {np.mean([h[2] for h in held]):8.3f}")
    rule = best(users)
    a, s, f = pooled(users, rule)
    print(f"chosen on all five: {rule}: all-evidence {a:.3f}, strict {s:.3f}, foreign {f:.3f}")
    print("the trade-off on all five (best all-evidence at each foreign share):")
    for cap in (0.02, 0.05, 0.08, 0.10, 0.15, 0.25, 1.0):
        allowed = [r for r in rules if pooled(users, r)[2] <= cap]
        if allowed:
            r = max(allowed, key=lambda r: pooled(users, r)[0])
            print(f"  foreign <= {cap:4.2f}: {r}  all-evidence {pooled(users, r)[0]:.3f}  strict {pooled(users, r)[1]:.3f}")


if __name__ == "__main__":
    main()
