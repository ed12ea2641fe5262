"""Compare recall's text scores (BM25 vs ts_rank) on LoCoMo, each at its own best fusion and floor; prints figures.

    python bench/tune_fusion.py /work/shared/data/locomo/*.json

Quality is deterministic, so machine load does not matter. The conversations are loaded with the
reference summaries (``oracle``) into a scratch database; for every question (own and foreign) the
user's episodes are scored once: cosine similarity and ``ts_rank`` (production's, from the
in-process copy), and BM25 (k1 1.2, b 0.75, idf over the user's own episodes, computed here from
``unnest(search_tsv)``) in two scales: ``bm25`` in units of the rarest match (idf(1, N)) and
``bm25q`` as a share of the message's idf mass (lexemes absent from the user's episodes count with
df 0), which rank alike but give the floor different thresholds. Then every
combination of a text score, a fusion and a relevance floor is *replayed* in-process: the picks
come from :func:`jobs.recall.scoring.fuse` (or the candidate fusion below), and the block from
:func:`jobs.recall.fitting.select` on the episodes read once, exactly what ``Recaller`` does
(the oracle build has no unsummarised sessions; open items are read per question). A replay
depends on the configuration only through the picks, so each distinct pick list is fitted once.

Fusions: ``rrf`` (the production one: w / (rrf_k + rank) summed over the vector and text lists) on a
grid of (w_text, rrf_k), and ``sum`` (cosine similarity + w_text * text score / the best text score
of the message; min-max free, one knob). Stage 1 ranks the fusions with no floor, by all-evidence
recall on all five; stage 2 takes the best three fusions of each text score and grid-searches the
floor jointly with them, leave one conversation out: for each conversation held out, the
(fusion, floor) with the best all-evidence recall on the other four whose foreign share there is
<= --foreign-max, reported on the held-out one.
"""

from __future__ import annotations

import argparse
import itertools
import sys
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
    _sessions,
    build_oracle,
    load_conversation,
    scratch_database,
)
from jobs.recall import RecallConfig, Recaller
from jobs.recall.fitting import select
from jobs.recall.index import Scores
from jobs.recall.open_items import open_items, send_open_items
from jobs.recall.result import Recall, RecalledOpenItem
from jobs.recall.scoring import epoch_us, fuse
from jobs.sql import query

TERMS = """SELECT e.id, (SELECT coalesce(jsonb_object_agg(u.lexeme, coalesce(cardinality(u.positions), 1)), '{}')
                        FROM unnest(e.search_tsv) u) AS tf
FROM episodes e WHERE e.tenant_id = %(t)s AND e.user_id = %(u)s AND e.status = 'current' AND e.compressed_into IS NULL"""
K1, B = 1.2, 0.75


def idf(df: int, n: int) -> float:
    return float(np.log1p((n - df + 0.5) / (df + 0.5)))


def bm25(ids: np.ndarray, tf: dict[int, dict[str, int]], lexemes: set[str]) -> tuple[np.ndarray, np.ndarray]:
    """BM25 per id in units of idf(1, N) and as a share of the message's idf mass; NaN where nothing matches."""
    n = len(tf)
    avglen = sum(sum(d.values()) for d in tf.values()) / n
    df = {lex: sum(lex in d for d in tf.values()) for lex in lexemes}
    out = np.full(len(ids), np.nan)
    for k, i in enumerate(ids.tolist()):
        d = tf[i]
        length = sum(d.values())
        terms = [idf(df[x], n) * d[x] * (K1 + 1) / (d[x] + K1 * (1 - B + B * length / avglen))
                 for x in sorted(lexemes) if x in d]
        if terms:
            out[k] = sum(terms)
    mass = sum(idf(df[x], n) for x in lexemes)
    return out / idf(1, n), out / mass if mass else out


Fusion = tuple[str, float, float]  # (kind, w_text, rrf_k)
Floor = tuple[float, float, float]  # (relevant_similarity, ... _with_text, relevant_text)
CHECKED = 40  # questions a user replayed and also recalled for real, to check the replay
FUSIONS: list[Fusion] = ([("rrf", w, k) for w in (0.5, 0.75, 1.0, 1.5, 2.0, 3.0) for k in (1.0, 3.0, 5.0, 10.0, 20.0, 60.0)]
                         + [("sum", w, 0.0) for w in (0.02, 0.05, 0.1, 0.15, 0.2, 0.3, 0.5)])
SIMILARITY = (0.4, 0.45, 0.5, 0.55, 0.6, 0.65)
WITH_TEXT = (0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4)
TEXT_GRID = {"bm25": (0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 2.0, 2.5, 3.0, 4.0),
             "bm25q": (0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.5, 0.6),
             "ts_rank": (0.0005, 0.001, 0.002, 0.003, 0.004, 0.006, 0.008, 0.012, 0.016, 0.03)}


@dataclass
class Asked:
    """One question asked of one user: its scores under both text scores."""

    scores: Scores
    text: dict[str, np.ndarray]  # "bm25" / "ts_rank" -> per candidate, NaN when no lexeme matches
    items: list[dict[str, Any]]
    q: Any = None


def fused(s: Scores, text: np.ndarray, cfg: RecallConfig, fusion: Fusion, now_us: int, extra: set[int]
          ) -> dict[int, dict[str, Any]]:
    """The picks of one recall under ``fusion`` (``rrf`` is production's :func:`fuse`, unchanged)."""
    s = replace(s, text=text)
    kind, w, k = fusion
    if kind == "rrf":
        return fuse(s, replace(cfg, w_text=w, rrf_k=k), now_us, extra)
    # "sum": replay fuse with the fused part replaced by similarity + w * text / best text.
    best = np.nanmax(text) if np.any(~np.isnan(text)) else 1.0
    shim = replace(s, distance=s.distance, text=text)
    picked = fuse(shim, replace(cfg, w_text=0.0, w_vector=1.0, rrf_k=0.0, rank_depth=len(s.ids) + 1), now_us, extra)
    # recompute the top K with the summed score, keeping fuse's floor and decay/importance factors
    sim = 1.0 - s.distance
    base = np.nan_to_num(sim, nan=0.0) + w * np.nan_to_num(text, nan=0.0) / best
    age_s = np.maximum((now_us - s.ended_us) / 1e6, 0.0)
    from jobs.recall.scoring import decay
    score = base * decay(age_s, cfg) * (1 + cfg.w_importance * (s.importance - 0.5))
    with np.errstate(invalid="ignore"):
        floor = (sim >= cfg.relevant_similarity) | ((sim >= cfg.relevant_similarity_with_text)
                                                     & (text >= cfg.relevant_text))
    among = np.flatnonzero(floor & ~np.isnan(sim))
    top = among[np.lexsort((s.ids[among], -score[among]))][: cfg.top_k]
    for v in picked.values():
        v["relevance_rank"] = None
    for number, p in enumerate(top, 1):
        i = int(s.ids[p])
        if i not in picked:
            picked[i] = {"distance": float(s.distance[p]), "text_score": None, "vector_rank": None,
                         "text_rank": None, "score": float(score[p]), "relevance_rank": None, "recency_rank": None}
        picked[i]["relevance_rank"] = number
    return {i: v for i, v in picked.items() if v["relevance_rank"] or v["recency_rank"] or i in extra}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("paths", nargs="+", type=Path)
    parser.add_argument("--budget", type=int, default=1500)
    parser.add_argument("--foreign-max", type=float, default=0.10)
    parser.add_argument("--modes", nargs="+", default=["ts_rank", "bm25", "bm25q"], choices=["ts_rank", "bm25", "bm25q"])
    args = parser.parse_args()
    settings = load()
    embedder = embedder_for(settings)
    convs = [load_conversation(p) for p in args.paths]
    qvecs = {c.user_id: embedder.embed([q.text for q in c.questions]) for c in convs}
    base = RecallConfig()
    own: dict[str, list[Asked]] = {}
    foreign: dict[str, list[Asked]] = {}
    rows: dict[str, dict[int, dict[str, Any]]] = {}
    with scratch_database(settings, embedder) as db:
        build_oracle(db, convs, embedder)
        probe = Recaller(db, embedder)

        def ask(conv: Conversation, qs: list[Any], vecs: np.ndarray) -> list[Asked]:
            out = []
            with db.tenant(TENANT) as conn:
                tf = {r["id"]: r["tf"] for r in conn.execute(TERMS, {"t": TENANT, "u": conv.user_id})}
                for q, vec in zip(qs, vecs):
                    with probe.index.user(conn, TENANT, conv.user_id, q.text) as (index, lexemes):
                        s = index.scores(vec, lexemes, epoch_us(conv.now), None)
                        params = {"tenant_id": TENANT, "user_id": conv.user_id, "now": conv.now, "query_text": q.text,
                                  "grace_seconds": settings.stale_grace_seconds, "age_seconds": settings.stale_age_seconds}
                        items = open_items(conn, send_open_items(conn, params, base.max_open_items), index, params,
                                           base.max_open_items, epoch_us(conv.now), None)
                    unit, share = bm25(s.ids, tf, {x.decode() for x in lexemes})
                    out.append(Asked(s, {"ts_rank": s.text, "bm25": unit, "bm25q": share}, items, q))
            return out

        for conv in convs:
            own[conv.user_id] = ask(conv, conv.questions, qvecs[conv.user_id])
            others = [(q, v) for o in convs if o is not conv for q, v in zip(o.questions, qvecs[o.user_id])]
            foreign[conv.user_id] = ask(conv, [q for q, _ in others], np.array([v for _, v in others]))
            with db.tenant(TENANT) as conn:
                ids = sorted(int(i) for i in own[conv.user_id][0].scores.ids)
                rows[conv.user_id] = {r["id"]: r for r in conn.execute(query("recall_rows"), {
                    "tenant_id": TENANT, "user_id": conv.user_id, "now": conv.now, "ids": ids}).fetchall() if r["candidate"]}
                with probe.index.user(conn, TENANT, conv.user_id, "") as (index, _):
                    vectors = {i: v.copy() for i in ids if (v := index.vector(i)) is not None}
                rows[conv.user_id]["vectors"] = vectors  # type: ignore[assignment]
            print(f"  {conv.user_id}: scored", file=sys.stderr)
        real = {(c.user_id, k): (q.sessions <= _sessions(res.episodes), q.sessions <= _sessions(
            [ep for ep in res.episodes if not ep.compact])) for c in convs for k, (q, vec) in
            enumerate(zip(c.questions[:CHECKED], qvecs[c.user_id]))
            if (res := probe.recall_vector(TENANT, c.user_id, q.text, vec, budget_tokens=args.budget, now=c.now))}
    by_user = {c.user_id: c for c in convs}
    cache: dict[tuple[Any, ...], tuple[bool, bool, bool]] = {}

    def replay(user: str, k: int, mode: str, fusion: Fusion, cfg: RecallConfig) -> tuple[bool, bool, bool]:
        a, conv = own[user][k], by_user[user]
        now_us = epoch_us(conv.now)
        picked = fused(a.scores, a.text[mode], cfg, fusion, now_us, {r["episode_id"] for r in a.items})
        key = (user, k, tuple(sorted((i, v["relevance_rank"] or 0, v["recency_rank"] or 0) for i, v in picked.items())))
        if key not in cache:
            table = rows[user]
            chosen = sorted(({**table[i], **v} for i, v in picked.items()), key=lambda r: (
                r["relevance_rank"] or 1 << 62, r["recency_rank"] or 1 << 62, r["id"]))
            episodes, items = select(chosen, table["vectors"], [RecalledOpenItem(**r) for r in a.items],  # type: ignore[arg-type]
                                     cfg, args.budget, a.q.text, conv.now)
            block = Recall(TENANT, user, a.q.text, None, None, args.budget, conv.now, len(a.scores.ids), episodes, items,
                           nothing_relevant=not any(v["relevance_rank"] for v in picked.values())).render()
            shown, full = _sessions(episodes), _sessions([ep for ep in episodes if not ep.compact])
            cache[key] = (a.q.sessions <= shown, a.q.sessions <= full, covers(block, a.q.answer_words))
        return cache[key]

    by_set: dict[tuple[Any, ...], tuple[bool, bool, bool]] = {}
    measured: dict[tuple[Any, ...], tuple[float, float, float, float]] = {}

    def measure(user: str, mode: str, fusion: Fusion, floor: Floor) -> tuple[float, float, float, float]:
        """A replay depends on the floor only through the set of episodes clearing it."""
        if (user, mode, fusion, floor) in measured:
            return measured[(user, mode, fusion, floor)]
        cfg = replace(base, relevant_similarity=floor[0], relevant_similarity_with_text=floor[1], relevant_text=floor[2])
        got = []
        for k, a in enumerate(own[user]):
            sim, text = 1.0 - a.scores.distance, np.nan_to_num(a.text[mode], nan=-1.0)
            passing = np.flatnonzero((sim >= floor[0]) | ((sim >= floor[1]) & (text >= floor[2]))).tobytes()
            key = (user, k, mode, fusion, passing)
            if key not in by_set:
                by_set[key] = replay(user, k, mode, fusion, cfg)
            got.append(by_set[key])
        arr = np.array(got, dtype=float)
        measured[(user, mode, fusion, floor)] = (float(arr[:, 0].mean()), float(arr[:, 1].mean()),
                                                 float(arr[:, 2].mean()), foreign_share(user, mode, floor))
        return measured[(user, mode, fusion, floor)]

    fcache: dict[tuple[str, str, Floor], float] = {}

    def foreign_share(user: str, mode: str, floor: Floor) -> float:
        if (user, mode, floor) not in fcache:
            hits = 0
            for a in foreign[user]:
                sim, text = 1.0 - a.scores.distance, np.nan_to_num(a.text[mode], nan=-1.0)
                hits += bool(np.any((sim >= floor[0]) | ((sim >= floor[1]) & (text >= floor[2]))))
            fcache[(user, mode, floor)] = hits / len(foreign[user])
        return fcache[(user, mode, floor)]

    users = [c.user_id for c in convs]
    weights = {u: len(own[u]) for u in users}
    n_all = sum(weights.values())

    def pooled(us: list[str], mode: str, fusion: Fusion, floor: Floor) -> tuple[float, float, float, float]:
        per = [measure(u, mode, fusion, floor) for u in us]
        n = sum(weights[u] for u in us)
        return (sum(p[0] * weights[u] for p, u in zip(per, us)) / n, sum(p[1] * weights[u] for p, u in zip(per, us)) / n,
                sum(p[2] * weights[u] for p, u in zip(per, us)) / n, float(np.mean([p[3] for p in per])))

    no_floor: Floor = (-1.0, -1.0, 0.0)
    differ = sum(real[(u, k)] != replay(u, k, "ts_rank", ("rrf", base.w_text, base.rrf_k), base)[:2] for u, k in real)
    print(f"replay check: {differ} of {len(real)} recalls differ from Recaller's (production defaults, ts_rank)")
    for mode in args.modes:
        print(f"\n== {mode}: stage 1, no floor (all five): all-ev strict answer")
        ranked = sorted(FUSIONS, key=lambda f: pooled(users, mode, f, no_floor)[:2], reverse=True)
        for f in ranked[:8]:
            a, s, c, _ = pooled(users, mode, f, no_floor)
            print(f"  {f}: {a:.3f} {s:.3f} {c:.3f}")
        prod = ("rrf", base.w_text, base.rrf_k)
        a, s, c, _ = pooled(users, mode, prod, no_floor)
        print(f"  production {prod}: {a:.3f} {s:.3f} {c:.3f}")
        floors = list(itertools.product(SIMILARITY, WITH_TEXT, TEXT_GRID[mode]))
        combos = [(f, fl) for f in ranked[:3] for fl in floors]

        def best(us: list[str]) -> tuple[Fusion, Floor]:
            allowed = [c for c in combos if pooled(us, mode, *c)[3] <= args.foreign_max] or combos
            return max(allowed, key=lambda c: pooled(us, mode, *c)[:2])

        print(f"== {mode}: stage 2, fusion x floor, leave one conversation out (foreign <= {args.foreign_max})")
        print("  held out        fusion / floor                                      all-ev strict answer foreign")
        held = []
        for u in users:
            choice = best([v for v in users if v != u])
            r = pooled([u], mode, *choice)
            held.append((r, weights[u]))
            print(f"  {u:15} {str(choice):52} {r[0]:.3f} {r[1]:.3f} {r[2]:.3f} {r[3]:.3f}")
        print(f"  LOO pooled: all-ev {sum(r[0] * w for r, w in held) / n_all:.3f} strict "
              f"{sum(r[1] * w for r, w in held) / n_all:.3f} answer {sum(r[2] * w for r, w in held) / n_all:.3f} "
              f"foreign {np.mean([r[3] for r, _ in held]):.3f}")
        choice = best(users)
        r = pooled(users, mode, *choice)
        print(f"  chosen on all five: {choice}: all-ev {r[0]:.3f} strict {r[1]:.3f} answer {r[2]:.3f} foreign {r[3]:.3f}")
        cur = (prod, (base.relevant_similarity, base.relevant_similarity_with_text, base.relevant_text))
        r = pooled(users, mode, *cur)
        print(f"  production defaults {cur}: all-ev {r[0]:.3f} strict {r[1]:.3f} answer {r[2]:.3f} foreign {r[3]:.3f}")
        print(f"  ({len(cache)} distinct blocks fitted so far)", file=sys.stderr)


if __name__ == "__main__":
    main()
