"""Scoring: every candidate of the user scored in PostgreSQL (``recall_scores``), fused here.

Every candidate is scored exactly (no approximate index), so the top K is exact within the user's
rows: a rank by cosine distance to the opening message (pgvector's ``<=>``) and a rank by full text
(PostgreSQL's ``ts_rank`` of the message's lexemes OR-ed over ``search_tsv``), fused by reciprocal rank
fusion, times a soft time decay and an importance factor. Only episodes above the relevance floor
(:class:`~jobs.recall.config.RecallConfig`) can be among the top K, so an opening message unrelated to
the user's history gets no "relevant" episode at all; the best below it (``related_k``, above
``related_similarity``) are picked as "possibly related". The last ``recent_n`` come along, and so do
the episodes that hold open items.

PostgreSQL scores every candidate and returns only those fusion can pick (the first ``rank_depth`` of
each list, the most recent, the episodes of open items): a few dozen rows whoever the user is. The
statement is kept simple so that it plans in a fraction of a millisecond and its prepared generic plan
walks the user's rows by index; the fusion, a handful of array operations on those rows, runs here
(:func:`fuse`). Nothing of any user is kept between recalls.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from jobs.db import Conn, Cursor
from jobs.embeddings.recorded import Recorded
from jobs.recall.config import RecallConfig


@dataclass
class Scores:
    """Scores of the candidate episodes fusion can pick (those ended by ``now`` and of an allowed purpose)."""

    ids: np.ndarray  # int64
    ended_us: np.ndarray  # int64, microseconds since the epoch
    importance: np.ndarray  # float64
    distance: np.ndarray  # float64, NaN without an embedding
    text: np.ndarray  # float64, ts_rank(search_tsv, q, 1) (a float32 value); NaN when no lexeme of the message occurs
    pinned: np.ndarray  # bool: pinned episodes do not decay (jobs.lifecycle.pins)
    # The mean and spread of every candidate's cosine similarity to the opening message (NaN: none scored by vector)
    sim_mean: float = float("nan")
    sim_sd: float = float("nan")

    def subset(self, keep: np.ndarray) -> Scores:
        """The rows where ``keep`` (a boolean mask) is true; the background as it is."""
        return Scores(
            self.ids[keep],
            self.ended_us[keep],
            self.importance[keep],
            self.distance[keep],
            self.text[keep],
            self.pinned[keep],
            self.sim_mean,
            self.sim_sd,
        )


class Scored(NamedTuple):
    """What ``recall_scores`` returned."""

    scores: Scores  # the rows fusion can pick
    candidates: int  # the user's candidate episodes scored
    recorded: Recorded | None  # the embedder the database records (None: a database without one)
    # The session episodes whose lines the line search may read (:func:`line_episodes`): the candidates' and those of
    # the sessions a super-summary holds, whose lines are quoted under it (:func:`under_supers`); never a super's own.
    lines: Scores
    super_of: dict[int, int]  # a compressed session's episode id -> its super-summary's


def epoch_us(when: dt.datetime) -> int:
    """Microseconds since the epoch, exactly."""
    delta = when - dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def send_scores(
    conn: Conn | Cursor,
    sql: Callable[[str], str],
    params: dict[str, Any],
    vector: np.ndarray,
    cfg: RecallConfig,
    extra_ids: Collection[int],
) -> Cursor:
    """Send ``recall_scores`` (``conn`` may be in pipeline mode: read it with :func:`read_scores`).

    ``params``: tenant_id, user_id, now, purposes, query_text."""
    return conn.execute(
        sql("recall_scores"),
        {
            **params,
            "vector": vector,
            "dim": len(vector),
            "has_vector": bool(np.any(vector)),  # a zero vector has no direction: no distance, as no embedding
            "depth": max(cfg.rank_depth, cfg.top_k, cfg.line_episodes if cfg.max_lines > 0 else 0),
            "line_n": cfg.line_episodes if cfg.max_lines > 0 else 0,
            "recent_n": cfg.recent_n,
            "extra_ids": sorted(extra_ids),
        },
    )


def line_episodes(s: Scores, cfg: RecallConfig) -> list[int]:
    """Whose lines ``recall_lines`` searches: the ``line_episodes`` candidates closest to the opening message
    (those without a distance last, ties by id) and the ``line_episodes`` best by its words, among the rows
    ``recall_scores`` returned (which hold the first ``line_episodes`` of both lists: :func:`send_scores`).
    A user with fewer candidates has every one of them searched. The candidates are scored once."""
    everyone = np.arange(len(s.ids))
    closest = _smallest(np.where(np.isnan(s.distance), np.inf, s.distance), s.ids, everyone, cfg.line_episodes)
    wordiest = _smallest(-s.text, s.ids, np.flatnonzero(~np.isnan(s.text)), cfg.line_episodes)
    return sorted({int(i) for i in s.ids[np.concatenate((closest, wordiest))]})


def send_lines(
    conn: Conn | Cursor,
    sql: Callable[[str], str],
    params: dict[str, Any],
    vector: np.ndarray,
    cfg: RecallConfig,
    episode_ids: list[int],
) -> Cursor:
    """Send ``recall_lines``: every line of ``episode_ids`` (:func:`line_episodes`) ranked by dense score and
    full text, fused by reciprocal rank, the ``max_lines`` best (``params`` as for :func:`send_scores`)."""
    return conn.execute(
        sql("recall_lines"),
        {
            **params,
            "episode_ids": episode_ids,
            "vector": vector,
            "dim": len(vector),
            "limit": cfg.max_lines,
            "neighbour": cfg.line_neighbour,
            "depth": cfg.line_depth,
            "rrf_k": cfg.line_rrf_k,
            "w_vector": cfg.w_vector,
            "w_text": cfg.line_w_text,
        },
    )


def unranked() -> dict[str, Any]:
    """The ranks of an episode fusion did not pick but one of its lines did (no score of its own)."""
    return {
        "distance": None,
        "text_score": None,
        "vector_rank": None,
        "text_rank": None,
        "score": 0.0,
        "relevance_rank": None,
        "recency_rank": None,
        "related_rank": None,
    }


def read_scores(cursor: Cursor) -> Scored:
    rows = cursor.fetchall()
    last = rows.pop()  # the counts' row comes last (UNION ALL after the UNIONs)
    recorded = Recorded(last["embedder"], last["embedding_dim"]) if last["embedder"] else None
    nan = float("nan")
    every = Scores(
        ids=np.array([r["id"] for r in rows], np.int64),
        ended_us=np.array([epoch_us(r["ended_at"]) for r in rows], np.int64),
        importance=np.array([r["importance"] for r in rows], np.float64),
        distance=np.array([nan if r["distance"] is None else r["distance"] for r in rows], np.float64),
        text=np.array([nan if r["text_score"] is None else r["text_score"] for r in rows], np.float64),
        pinned=np.array([r["pinned"] for r in rows], bool),
        sim_mean=nan if last["sim_mean"] is None else float(last["sim_mean"]),
        sim_sd=nan if last["sim_sd"] is None else float(last["sim_sd"]),
    )
    super_of = {r["id"]: r["compressed_into"] for r in rows if r["compressed_into"] is not None}
    if not super_of and not any(r["is_super"] for r in rows):  # nothing compressed: one set of rows for both
        return Scored(every, int(last["candidates"]), recorded, every, {})
    candidate = np.array([r["compressed_into"] is None for r in rows], bool)
    session = np.array([not r["is_super"] for r in rows], bool)
    return Scored(every.subset(candidate), int(last["candidates"]), recorded, every.subset(session), super_of)


def under_supers(rows: list[dict[str, Any]], scored: Scored) -> list[dict[str, Any]]:
    """``recall_lines``' rows with a compressed session's lines put under its super-summary, in place: the super's
    id, an ordinal that keeps its sessions in time order (the session's place among its sessions here x 10^6 + the
    line's own), and an undated line dated by its session's end, so it is quoted with its own day, not the period's."""
    if not scored.super_of:
        return rows
    s = scored.lines
    ended = dict(zip(s.ids.tolist(), s.ended_us.tolist(), strict=True))
    place = {i: n for n, i in enumerate(sorted(scored.super_of, key=lambda i: (scored.super_of[i], ended[i], i)))}
    for row in rows:
        if (source := row["episode_id"]) in scored.super_of:
            row["episode_id"] = scored.super_of[source]
            row["ordinal"] = place[source] * 1_000_000 + row["ordinal"]
            if row["said_at"] is None:
                row["said_at"] = dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(microseconds=ended[source])
    return rows


def unit_vectors(rows: list[dict[str, Any]]) -> dict[int, np.ndarray]:
    """The unit embeddings of ``recall_rows``' rows by id, from vector_send's bytes (popped from the rows)."""
    vectors: dict[int, np.ndarray] = {}
    for row in rows:
        if (raw := row.pop("embedding")) is not None:
            vector = np.frombuffer(raw, ">f4", offset=4).astype(np.float32)  # int16 dim, int16 unused, then floats
            norm = float(np.linalg.norm(vector))
            vectors[row["id"]] = vector / norm if norm > 0 else vector
    return vectors


def line_unit_vectors(rows: list[dict[str, Any]]) -> dict[tuple[int, int], np.ndarray]:
    """The unit embeddings of ``recall_lines``' rows by (episode_id, ordinal), popped from the rows."""
    vectors: dict[tuple[int, int], np.ndarray] = {}
    for row in rows:
        if (raw := row.pop("embedding", None)) is not None:
            vector = np.frombuffer(raw, ">f4", offset=4).astype(np.float32)
            norm = float(np.linalg.norm(vector))
            vectors[row["episode_id"], row["ordinal"]] = vector / norm if norm > 0 else vector
    return vectors


def _smallest(key: np.ndarray, tiebreak: np.ndarray, among: np.ndarray, k: int) -> np.ndarray:
    """The positions in ``among`` of the k smallest (key, tiebreak), in order.

    A partition finds the k-th key first, so only the few rows at or below it are sorted (every row
    tied with the k-th comes along, so the order among ties is still decided by ``tiebreak``).
    """
    if k <= 0 or not len(among):
        return among[:0]
    keys = key[among]
    if len(among) > k:
        kth = np.partition(keys, k - 1)[k - 1]
        among, keys = among[keys <= kth], keys[keys <= kth]
    return among[np.lexsort((tiebreak[among], keys))][:k]


def decay(age_s: np.ndarray, cfg: RecallConfig) -> np.ndarray:
    """The soft time decay: floor + (1 - floor) * 0.5 ^ (age_days / half_life), never below the floor."""
    return cfg.decay_floor + (1 - cfg.decay_floor) * np.power(0.5, age_s / 86400.0 / cfg.half_life_days)


def fuse(s: Scores, cfg: RecallConfig, now_us: int, extra_ids: set[int]) -> dict[int, dict[str, Any]]:
    """Ranks and the fused score; returns the picked episodes (top_k, related_k, recent_n, extra_ids) by id.

    vector_rank: by cosine distance (ties by id); text_rank: by ts_rank descending (ties by id), only
    episodes with a lexeme of the message; each list cut at rank_depth. score: the sum of
    w / (rrf_k + rank) over the lists an episode is in, times :func:`decay` of its age and
    1 + w_importance * (importance - 0.5); only episodes in a list have one. The top K are the best
    scores among the episodes that clear the relevance floor: similar enough, or nearly so with a text match or
    standing ``relevant_z`` standard deviations above the user's other candidates (``Scores.sim_mean``, ``sim_sd``).
    """
    depth = max(cfg.rank_depth, cfg.top_k)
    n = len(s.ids)
    vector_rank = np.zeros(n, np.int64)
    text_rank = np.zeros(n, np.int64)
    for ranks, key, present in (
        (vector_rank, s.distance, ~np.isnan(s.distance)),
        (text_rank, -s.text, ~np.isnan(s.text)),
    ):
        order = _smallest(key, s.ids, np.flatnonzero(present), depth)
        ranks[order] = np.arange(1, len(order) + 1)
    ranked = np.flatnonzero((vector_rank > 0) | (text_rank > 0))
    score = np.zeros(n)
    vr, tr = vector_rank[ranked], text_rank[ranked]
    fused = np.where(vr > 0, cfg.w_vector / (cfg.rrf_k + np.maximum(vr, 1)), 0.0) + np.where(
        tr > 0, cfg.w_text / (cfg.rrf_k + np.maximum(tr, 1)), 0.0
    )
    age_s = np.maximum((now_us - s.ended_us[ranked]) / 1e6, 0.0)
    decayed = np.where(s.pinned[ranked], 1.0, decay(age_s, cfg))  # a pinned episode does not decay
    score[ranked] = fused * decayed * (1 + cfg.w_importance * (s.importance[ranked] - 0.5))
    similarity = 1.0 - s.distance[ranked]
    with np.errstate(invalid="ignore", divide="ignore"):  # NaN (no embedding, no text match) compares False
        stands_out = (
            (similarity - s.sim_mean) / s.sim_sd >= cfg.relevant_z
            if cfg.relevant_z is not None
            else np.zeros(len(ranked), bool)
        )
        floor = (similarity >= cfg.relevant_similarity) | (
            (similarity >= cfg.relevant_similarity_with_text) & ((s.text[ranked] >= cfg.relevant_text) | stands_out)
        )
    top = _smallest(-score, s.ids, ranked[floor], cfg.top_k)
    with np.errstate(invalid="ignore"):
        loose = ~floor & (similarity >= cfg.related_similarity)
    related = _smallest(-score, s.ids, ranked[loose], cfg.related_k)
    recent = _smallest(-s.ended_us, -s.ids, np.arange(n), cfg.recent_n)
    extra = np.flatnonzero(np.isin(s.ids, np.fromiter(extra_ids, np.int64, len(extra_ids))))
    picked: dict[int, dict[str, Any]] = {}
    for p in (*top, *related, *recent, *extra):
        i = int(s.ids[p])
        if i not in picked:
            picked[i] = {
                "distance": None if np.isnan(s.distance[p]) else float(s.distance[p]),
                "text_score": None if np.isnan(s.text[p]) else float(s.text[p]),
                "vector_rank": int(vector_rank[p]) or None,
                "text_rank": int(text_rank[p]) or None,
                "score": float(score[p]),
                "relevance_rank": None,
                "recency_rank": None,
                "related_rank": None,
            }
    for number, p in enumerate(top, 1):
        picked[int(s.ids[p])]["relevance_rank"] = number
    for number, p in enumerate(related, 1):
        picked[int(s.ids[p])]["related_rank"] = number
    for number, p in enumerate(recent, 1):
        picked[int(s.ids[p])]["recency_rank"] = number
    return picked
