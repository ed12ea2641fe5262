"""Replay recall's selection and fitting on LoCoMo under variants of RecallConfig; prints figures.

    python bench/tune_fitting.py /work/shared/data/locomo/*.json [--extractor offline] [--misses]

Quality is deterministic, so machine load does not matter. The conversations are loaded into a
scratch database (``oracle``: the reference summaries, or ``offline``: summarised end to end) and
every question, own and foreign, is scored once (the user's in-process copy, as ``Recaller``
does) with its open items read; then each variant's block is *replayed* in-process with
:func:`jobs.recall.scoring.fuse` and :func:`jobs.recall.fitting.select`, exactly what
``Recaller.recall_vector`` does (the eval has no unsummarised sessions). A check recalls some
questions for real and counts replays that differ.

Each variant prints the eval's figures (all-evidence, strict, any-evidence, answer coverage,
foreign share). A numeric knob is chosen leaving one conversation out, as ``bench/tune_fusion.py``
does: for each conversation held out, the value with the best all-evidence recall (then strict)
on the other four whose foreign share there is <= --foreign-max, reported on the held-out one.
``--misses`` explains the production defaults' misses: for each evidence session not in the block,
whether it cleared the floor, was picked but not fitted, or was never picked.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from jobs.config import load
from jobs.embeddings import embedder_for
from jobs.eval.answers import covers
from jobs.eval.locomo import (
    TENANT,
    Conversation,
    Question,
    _sessions,
    build_extracted,
    build_oracle,
    load_conversation,
    scratch_database,
)
from jobs.recall import RecallConfig, Recaller
from jobs.recall.fitting import select
from jobs.recall.index import Scores
from jobs.recall.open_items import open_items, send_open_items
from jobs.recall.result import Recall, RecalledEpisode, RecalledOpenItem
from jobs.recall.scoring import epoch_us, fuse
from jobs.sql import query

CHECKED = 30  # questions per user recalled for real too, to check the replay


@dataclass
class Asked:
    """One question asked of one user: its scores and open items, read once."""

    q: Question
    scores: Scores
    items: list[dict[str, Any]]


@dataclass
class User:
    conv: Conversation
    own: list[Asked]
    foreign: list[Asked]
    rows: dict[int, dict[str, Any]]
    vectors: dict[int, np.ndarray]
    session_of: dict[int, int]  # episode id -> LoCoMo session number


def replay(user: User, a: Asked, cfg: RecallConfig, budget: int) -> Recall:
    """The Recall that Recaller.recall_vector would return for this question under ``cfg``."""
    now = user.conv.now
    picked = fuse(a.scores, cfg, epoch_us(now), {r["episode_id"] for r in a.items})
    rows = sorted(({**user.rows[i], **v} for i, v in picked.items()), key=lambda r: (
        r["relevance_rank"] or 1 << 62, r["recency_rank"] or 1 << 62, r["id"]))
    episodes, items = select(rows, user.vectors, [RecalledOpenItem(**r) for r in a.items], cfg, budget,
                             a.q.text, now)
    return Recall(TENANT, user.conv.user_id, a.q.text, None, None, budget, now, len(a.scores.ids), episodes, items,
                  nothing_relevant=not any(row["relevance_rank"] for row in rows))


Figures = tuple[float, float, float, float, float]  # all-ev, strict, any-ev, answer coverage, foreign share


def measure(user: User, cfg: RecallConfig, budget: int) -> tuple[np.ndarray, float, float]:
    """Per own question (all, strict, any, covered, coverable); the foreign share; foreign mean block tokens."""
    own = []
    for a in user.own:
        r = replay(user, a, cfg, budget)
        shown, full = _sessions(r.episodes), _sessions([ep for ep in r.episodes if not ep.compact])
        own.append((a.q.sessions <= shown, a.q.sessions <= full, bool(a.q.sessions & shown),
                    covers(r.render(), a.q.answer_words), bool(a.q.answer_words)))
    labelled, tokens = 0, 0
    for a in user.foreign:
        r = replay(user, a, cfg, budget)
        labelled += any("relevant" in ep.reasons for ep in r.episodes)
        tokens += r.tokens
    return np.array(own, dtype=float), labelled / len(user.foreign), tokens / len(user.foreign)


def pooled(per: Sequence[tuple[np.ndarray, float, float]]) -> tuple[float, float, float, float, float, float]:
    own = np.concatenate([p[0] for p in per])
    return (own[:, 0].mean(), own[:, 1].mean(), own[:, 2].mean(), own[:, 3].sum() / own[:, 4].sum(),
            float(np.mean([p[1] for p in per])), float(np.mean([p[2] for p in per])))


def fmt(f: Sequence[float]) -> str:
    return (f"all-ev {f[0]:.3f} strict {f[1]:.3f} any {f[2]:.3f} answer {f[3]:.3f} foreign {f[4]:.3f} "
            f"(foreign block {f[5]:.0f} tok)")


def misses(users: list[User], cfg: RecallConfig, budget: int) -> None:
    """Why the evidence sessions of missed questions are not in the block."""
    why: Counter[str] = Counter()
    for user in users:
        for a in user.own:
            picked = fuse(a.scores, cfg, epoch_us(user.conv.now), {r["episode_id"] for r in a.items})
            shown = _sessions(replay(user, a, cfg, budget).episodes)
            for n in a.q.sessions - shown:
                ids = [i for i, s in user.session_of.items() if s == n]
                p = next((picked[i] for i in ids if i in picked), None)
                k = int(np.flatnonzero(a.scores.ids == ids[0])[0]) if ids else -1
                sim = 1 - a.scores.distance[k] if k >= 0 else float("nan")
                if p is None:
                    why["not picked, similarity " + ("< 0.35" if sim < 0.35 else "0.35-0.5" if sim < 0.5 else ">= 0.5")] += 1
                else:
                    why["picked (" + ("relevant" if p["relevance_rank"] else "recent/open") + "), not fitted"] += 1
    total = sum(why.values())
    print(f"missing evidence sessions: {total}")
    for reason, n in why.most_common():
        print(f"  {n:5} {n / total:.0%}  {reason}")


def load_users(paths: list[Path], extractor: str) -> list[User]:
    settings = load()
    embedder = embedder_for(settings)
    convs = [load_conversation(p) for p in paths]
    qvecs = {c.user_id: embedder.embed([q.text for q in c.questions]) for c in convs}
    users: list[User] = []
    with scratch_database(settings, embedder) as db:
        if extractor == "oracle":
            build_oracle(db, convs, embedder)
        else:
            build_extracted(db, [c.path for c in convs], extractor)
        probe = Recaller(db, embedder)
        base = probe.config

        def ask(conv: Conversation, qs: Sequence[Question], vecs: np.ndarray) -> list[Asked]:
            out = []
            with db.tenant(TENANT) as conn:
                for q, vec in zip(qs, vecs):
                    with probe.index.user(conn, TENANT, conv.user_id, q.text) as (index, lexemes):
                        s = index.scores(vec, lexemes, epoch_us(conv.now), None)
                        params = {"tenant_id": TENANT, "user_id": conv.user_id, "now": conv.now, "query_text": q.text,
                                  "grace_seconds": settings.stale_grace_seconds, "age_seconds": settings.stale_age_seconds}
                        items = open_items(conn, send_open_items(conn, params, base.max_open_items), index, params,
                                           base.max_open_items, epoch_us(conv.now), None)
                    out.append(Asked(q, s, items))
            return out

        for conv in convs:
            own = ask(conv, conv.questions, qvecs[conv.user_id])
            others = [(q, v) for o in convs if o is not conv for q, v in zip(o.questions, qvecs[o.user_id])]
            foreign = ask(conv, [q for q, _ in others], np.array([v for _, v in others]))
            ids = sorted(int(i) for i in own[0].scores.ids)
            with db.tenant(TENANT) as conn:
                rows = {r["id"]: r for r in conn.execute(query("recall_rows"), {
                    "tenant_id": TENANT, "user_id": conv.user_id, "now": conv.now, "ids": ids}).fetchall() if r["candidate"]}
                with probe.index.user(conn, TENANT, conv.user_id, "") as (index, _):
                    vectors = {i: v.copy() for i in ids if (v := index.vector(i)) is not None}
            eps = [RecalledEpisode(i, "session", r["session_id"], "general", "", [], 0.5, conv.now, conv.now, None,
                                   None, 0, None, None, None, None, None, None) for i, r in rows.items()]
            session_of = {ep.id: next(iter(_sessions([ep]))) for ep in eps if _sessions([ep])}
            users.append(User(conv, own, foreign, rows, vectors, session_of))
            print(f"  {conv.user_id}: scored", file=sys.stderr)
        differ = 0
        for user in users:
            for a in user.own[:CHECKED]:
                vec = qvecs[user.conv.user_id][user.own.index(a)]
                real = probe.recall_vector(TENANT, user.conv.user_id, a.q.text, vec, now=user.conv.now)
                differ += real.render() != replay(user, a, base, 1500).render()
        print(f"replay check: {differ} of {CHECKED * len(users)} blocks differ from Recaller's")
    return users


def choose(users: list[User], variants: dict[str, RecallConfig], budget: int, foreign_max: float,
           criterion: str = "answer") -> None:
    """Every variant on all five, then the choice among them leaving one conversation out."""
    per = {name: [measure(u, cfg, budget) for u in users] for name, cfg in variants.items()}
    for name in variants:
        print(f"  {name:40} {fmt(pooled(per[name]))}")
    if len(variants) < 2:
        return
    held = []
    for k, user in enumerate(users):
        rest = [i for i in range(len(users)) if i != k]
        allowed = [n for n in variants if pooled([per[n][i] for i in rest])[4] <= foreign_max] or list(variants)
        name = max(allowed, key=lambda n: _criterion(pooled([per[n][i] for i in rest]), criterion))
        held.append(per[name][k])
        print(f"    held out {user.conv.user_id:14} chose {name:32} {fmt(pooled([per[name][k]]))}")
    print(f"    leave-one-out pooled: {fmt(pooled(held))}")


def _criterion(f: Sequence[float], criterion: str) -> tuple[float, ...]:
    """What a choice maximises: answer coverage (then all-evidence), all-evidence (then strict), or strict."""
    return {"answer": (f[3], f[0]), "all": (f[0], f[1]), "strict": (f[1], f[0])}[criterion]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("paths", nargs="+", type=Path)
    parser.add_argument("--extractor", default="oracle", choices=["oracle", "offline"])
    parser.add_argument("--budget", type=int, default=1500)
    parser.add_argument("--foreign-max", type=float, default=0.10)
    parser.add_argument("--grids", nargs="*", default=list(GRIDS), choices=list(GRIDS))
    parser.add_argument("--criterion", default="answer", choices=["answer", "all", "strict"],
                        help="what leave-one-out maximises: answer coverage, all-evidence or strict recall")
    parser.add_argument("--misses", action="store_true", help="explain the production defaults' misses")
    args = parser.parse_args()
    users = load_users(args.paths, args.extractor)
    base = RecallConfig()
    if args.misses:
        misses(users, base, args.budget)
    print("production defaults")
    choose(users, {"defaults": base}, args.budget, args.foreign_max)
    for title in args.grids:
        variants = GRIDS[title]
        print(title)
        choose(users, {name: replace(base, **kw) for name, kw in variants.items()}, args.budget, args.foreign_max,
               args.criterion)


GRIDS: dict[str, dict[str, dict[str, Any]]] = {
    "recent_n": {f"recent_n={n}": {"recent_n": n} for n in (0, 1, 2, 3, 5)},
    "top_k": {f"top_k={k}": {"top_k": k} for k in (8, 12, 16, 24)},
    "related": {f"related_k={k} sim>={t}": {"related_k": k, "related_similarity": t}
                for k in (4, 8, 12) for t in (-1.0, 0.2, 0.25, 0.3, 0.35)},
    "time_cues": {f"time_cues={on} full_share={f}": {"time_cues": on, "full_share": f}
                  for on in (False, True) for f in (0.8, 0.9, 1.0)},
    "full": {f"related_k={k} full_share={f}": {"related_k": k, "related_similarity": 0.25, "full_share": f}
             for k in (12, 20, 30) for f in (0.6, 0.7, 0.8, 0.9, 1.0)},
}

if __name__ == "__main__":
    main()
