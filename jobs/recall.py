"""Recall at session start: a user's recent and relevant episodes, as a prompt block within a token budget.

Selection (one tenant-scoped transaction, two queries from ``sql/recall.sql``):

1. **Candidates** are the user's episodes with ``status = 'current' AND compressed_into IS NULL``
   (so a super-summary stands in for the sessions it compressed), ended by ``now``, of an allowed
   purpose. Every candidate is scored in SQL — no approximate index — so the top K is exact within
   the user's rows: a rank by pgvector cosine distance to the opening message and a rank by full
   text (the message's lexemes OR-ed, ``ts_rank`` over ``search_tsv``), fused by reciprocal rank
   fusion, times a soft time decay and an importance factor. The last ``recent_n`` come along.
2. **Open items**: the user's still-open questions and commitments from candidate episodes.
3. **Fitting** (here): near-duplicates are dropped (same summary, or stored embeddings with cosine
   similarity >= ``dedup_similarity``). Room for the recent episodes, shown compactly (one
   query-biased sentence), is reserved; relevant episodes are placed best first, in full while they
   fit, then compactly; the rest of the reserved recent ones and the open items' episodes follow.

Tokens are estimated as characters / 4 (:func:`jobs.extract.estimate_tokens`), the estimator used
for every budget in episodes; the whole rendered block counts, so ``estimate_tokens(block) <= budget``.

Purposes: with ``purpose=None`` every purpose is recalled. A requested purpose sees its own
episodes and ``general`` ones, unless ``EPISODES_PURPOSE_MAP`` (Settings.purpose_map) says otherwise,
e.g. ``marketing=marketing,general;support=support,billing,general``.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from functools import cache
from typing import Any

import numpy as np

from jobs import config as config_module
from jobs.db import Database
from jobs.embeddings import Embedder, get_embedder
from jobs.errors import ConfigError
from jobs.models import estimate_tokens
from jobs.prompts import environment, render
from jobs.recall_index import RecallIndex, Scores
from jobs.sql import query

TEMPLATE = "previous_episodes.j2"
_PURPOSE = re.compile(r"^[a-z0-9_-]{1,64}$")


@dataclass(frozen=True)
class RecallConfig:
    """Selection knobs. The defaults are the production defaults (and what `eval locomo` measures).

    rrf_k, w_text and the decay were chosen coarsely on the five LoCoMo conversations, the only data
    there is; with no held-out set, treat the eval's figures as somewhat optimistic.
    """

    recent_n: int = 3  # the last N episodes are always offered ("recent"), compactly
    recent_full: bool = False  # render recent episodes in full instead of compactly
    top_k: int = 12  # relevant episodes offered, best first (exact within the user's rows)
    rank_depth: int = 50  # RRF fuses each list's first rank_depth ranks (at least top_k)
    compact_tail: bool = True  # a relevant episode that no longer fits in full is shown compactly
    rrf_k: float = 10.0  # reciprocal rank fusion: w / (rrf_k + rank); small k as per-user lists are short
    w_vector: float = 1.0
    w_text: float = 1.5  # exact word matches (names, places) beat paraphrase similarity more often than not
    half_life_days: float = 180.0  # soft decay: the decaying part halves every half-life
    decay_floor: float = 0.85  # ... and never below this factor, so old but relevant episodes survive
    w_importance: float = 0.4  # score factor 1 + w * (importance - 0.5): 0.8 .. 1.2
    dedup_similarity: float = 0.97
    max_open_items: int = 8
    open_items_share: float = 0.25  # at most this share of the budget for open items
    compact_chars: int = 200  # length of a compact line's text


@dataclass
class RecalledEpisode:
    """One chosen episode, with every score that put it there and why it was chosen."""

    id: int
    kind: str
    session_id: str | None
    purpose: str
    summary: str
    topic_tags: list[str]
    importance: float
    started_at: dt.datetime
    ended_at: dt.datetime
    period_start: dt.date | None
    period_end: dt.date | None
    score: float
    distance: float | None
    text_score: float | None
    vector_rank: int | None
    text_rank: int | None
    recency_rank: int | None  # 1 = the latest; None when not among the last recent_n
    relevance_rank: int | None  # 1 = the best fused score; None when not in the top_k
    reasons: list[str] = field(default_factory=list)
    compact: bool = False
    compact_text: str = ""

    @property
    def when(self) -> str:
        if self.kind == "super" and self.period_start and self.period_end:
            return f"{self.period_start.isoformat()} to {self.period_end.isoformat()}"
        return self.ended_at.date().isoformat()

    @property
    def similarity(self) -> float | None:
        return None if self.distance is None else 1.0 - self.distance

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "when": self.when, "similarity": self.similarity}


@dataclass(frozen=True)
class RecalledOpenItem:
    """A still-open question or commitment, shown in the block's "Still open" section."""

    id: int
    episode_id: int
    type: str
    what: str
    who: str | None
    due: dt.date | None
    occurred_at: dt.datetime

    @property
    def since(self) -> str:
        return self.occurred_at.date().isoformat()

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Recall:
    """The result of a recall: chosen episodes (oldest first), open items, and the block."""

    tenant_id: str
    user_id: str
    opening_message: str
    purpose: str | None
    purposes: list[str] | None
    budget_tokens: int
    now: dt.datetime
    candidates: int
    episodes: list[RecalledEpisode]
    open_items: list[RecalledOpenItem]

    def render(self) -> str:
        """The ``<previous_episodes>`` block; "" if the budget cannot hold even an empty block."""
        block = render(TEMPLATE, as_of=self.now.date().isoformat(), episodes=self.episodes,
                       open_items=self.open_items)
        return block if estimate_tokens(block) <= self.budget_tokens else ""

    @property
    def tokens(self) -> int:
        return estimate_tokens(self.render())

    def to_dict(self) -> dict[str, Any]:
        return {
            "tenant_id": self.tenant_id, "user_id": self.user_id, "opening_message": self.opening_message,
            "purpose": self.purpose, "purposes": self.purposes, "budget_tokens": self.budget_tokens,
            "now": self.now.isoformat(), "candidates": self.candidates, "tokens": self.tokens,
            "episodes": [ep.to_dict() for ep in self.episodes],
            "open_items": [item.to_dict() for item in self.open_items],
            "block": self.render(),
        }


def purpose_filter(purpose: str | None, purpose_map: Mapping[str, Sequence[str]] | None = None) -> list[str] | None:
    """Purposes a recall for ``purpose`` may see (None: all): its own and ``general``, unless
    ``purpose_map`` (Settings.purpose_map, from EPISODES_PURPOSE_MAP) says otherwise."""
    if purpose is None:
        return None
    if not _PURPOSE.match(purpose):
        raise ConfigError(f"purpose {purpose!r} is invalid; use 1-64 lowercase letters, digits, _ and -.")
    return sorted(set((purpose_map or {}).get(purpose, [purpose, "general"])))


class Recaller:
    """Holds the database and the embedder (loaded once per process) for repeated recalls."""

    def __init__(self, db: Database, embedder: Embedder | None = None, config: RecallConfig | None = None) -> None:
        self.db = db
        self.embedder = embedder or get_embedder(db.settings.embedder)
        self.config = config or RecallConfig()
        self.index = RecallIndex(self.embedder.dim, db.settings.recall_cache_rows)

    def embed(self, opening_message: str) -> np.ndarray:
        """The query vector of an opening message (what :meth:`recall_vector` takes)."""
        return self.embedder.embed([opening_message])[0]

    def recall(
        self, tenant_id: str, user_id: str, opening_message: str, *, purpose: str | None = None,
        budget_tokens: int = 1500, now: dt.datetime | None = None,
    ) -> Recall:
        """Recent and relevant episodes of one user, fitted to ``budget_tokens``."""
        return self.recall_vector(tenant_id, user_id, opening_message, self.embed(opening_message),
                                  purpose=purpose, budget_tokens=budget_tokens, now=now)

    def recall_vector(
        self, tenant_id: str, user_id: str, opening_message: str, query_vector: np.ndarray | Sequence[float], *,
        purpose: str | None = None, budget_tokens: int = 1500, now: dt.datetime | None = None,
    ) -> Recall:
        """Like :meth:`recall` with a precomputed query vector (benchmarks, batch callers)."""
        if budget_tokens < 0:
            raise ValueError("budget_tokens must be >= 0")
        now = now or dt.datetime.now(dt.UTC)
        now = now if now.tzinfo else now.replace(tzinfo=dt.UTC)  # naive means UTC, as everywhere
        purposes = purpose_filter(purpose, self.db.settings.purpose_map)
        cfg = self.config
        vector = np.asarray(query_vector, dtype=np.float32)
        now_us = _epoch_us(now)
        with self.db.tenant(tenant_id) as conn:
            open_rows = conn.execute(query("recall_open_items"), {
                "tenant_id": tenant_id, "user_id": user_id, "now": now, "purposes": purposes,
                "limit": cfg.max_open_items}).fetchall() if cfg.max_open_items > 0 else []
            with self.index.user(conn, tenant_id, user_id, opening_message) as (index, lexemes):
                scores = index.scores(vector, lexemes, now_us, purposes)
                picked = fuse(scores, cfg, now_us, {r["episode_id"] for r in open_rows})
                vectors = {i: v.copy() for i in picked if (v := index.vector(i)) is not None}
            rows = conn.execute(query("recall_rows"), {
                "tenant_id": tenant_id, "user_id": user_id, "now": now, "ids": sorted(picked)}).fetchall()
        rows = sorted(({**row, **picked[row["id"]]} for row in rows), key=lambda r: (
            r["relevance_rank"] or 1 << 62, r["recency_rank"] or 1 << 62, r["id"]))
        episodes, items = select(rows, vectors, [RecalledOpenItem(**r) for r in open_rows], cfg, budget_tokens,
                                 opening_message, now)
        return Recall(tenant_id=tenant_id, user_id=user_id, opening_message=opening_message, purpose=purpose,
                      purposes=purposes, budget_tokens=budget_tokens, now=now, candidates=len(scores.ids),
                      episodes=episodes, open_items=items)


def _epoch_us(when: dt.datetime) -> int:
    """Microseconds since the epoch, exactly (as the index holds ended_at)."""
    delta = when - dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


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


def fuse(s: Scores, cfg: RecallConfig, now_us: int, extra_ids: set[int]) -> dict[int, dict[str, Any]]:
    """Ranks and the fused score; returns the picked episodes (top_k, recent_n, extra_ids) by id.

    vector_rank: by cosine distance (ties by id); text_rank: by ts_rank descending (ties by id), only
    episodes with a lexeme of the message; each list cut at rank_depth. score: the sum of
    w / (rrf_k + rank) over the lists an episode is in, times floor + (1 - floor) * 0.5 ^ (age_days /
    half_life) and 1 + w_importance * (importance - 0.5); only episodes in a list have one.
    """
    depth = max(cfg.rank_depth, cfg.top_k)
    n = len(s.ids)
    vector_rank = np.zeros(n, np.int64)
    text_rank = np.zeros(n, np.int64)
    for ranks, key, present in ((vector_rank, s.distance, ~np.isnan(s.distance)),
                                (text_rank, -s.text, ~np.isnan(s.text))):
        order = _smallest(key, s.ids, np.flatnonzero(present), depth)
        ranks[order] = np.arange(1, len(order) + 1)
    ranked = np.flatnonzero((vector_rank > 0) | (text_rank > 0))
    score = np.zeros(n)
    vr, tr = vector_rank[ranked], text_rank[ranked]
    fused = (np.where(vr > 0, cfg.w_vector / (cfg.rrf_k + np.maximum(vr, 1)), 0.0)
             + np.where(tr > 0, cfg.w_text / (cfg.rrf_k + np.maximum(tr, 1)), 0.0))
    age_s = np.maximum((now_us - s.ended_us[ranked]) / 1e6, 0.0)
    decay = cfg.decay_floor + (1 - cfg.decay_floor) * np.power(0.5, age_s / 86400.0 / cfg.half_life_days)
    score[ranked] = fused * decay * (1 + cfg.w_importance * (s.importance[ranked] - 0.5))
    top = _smallest(-score, s.ids, ranked, cfg.top_k)
    recent = _smallest(-s.ended_us, -s.ids, np.arange(n), cfg.recent_n)
    extra = np.flatnonzero(np.isin(s.ids, np.fromiter(extra_ids, np.int64, len(extra_ids))))
    picked: dict[int, dict[str, Any]] = {}
    for p in (*top, *recent, *extra):
        i = int(s.ids[p])
        if i not in picked:
            picked[i] = {
                "distance": None if np.isnan(s.distance[p]) else float(s.distance[p]),
                "text_score": None if np.isnan(s.text[p]) else float(s.text[p]),
                "vector_rank": int(vector_rank[p]) or None, "text_rank": int(text_rank[p]) or None,
                "score": float(score[p]), "relevance_rank": None, "recency_rank": None,
            }
    for number, p in enumerate(top, 1):
        picked[int(s.ids[p])]["relevance_rank"] = number
    for number, p in enumerate(recent, 1):
        picked[int(s.ids[p])]["recency_rank"] = number
    return picked


def recall(
    tenant_id: str, user_id: str, opening_message: str, *, purpose: str | None = None, budget_tokens: int = 1500,
    now: dt.datetime | None = None, db: Database | None = None,
) -> Recall:
    """Convenience wrapper: one recall; with ``db`` None, a Database from the environment (closed after)."""
    own = db is None
    database = db or Database(config_module.load())
    try:
        return Recaller(database).recall(tenant_id, user_id, opening_message, purpose=purpose,
                                         budget_tokens=budget_tokens, now=now)
    finally:
        if own:
            database.close()


# ------------------------------------------------------------------------------------------------
# Fitting the block
# ------------------------------------------------------------------------------------------------


def select(
    rows: Sequence[dict[str, Any]], vectors: dict[int, np.ndarray], open_items: Sequence[RecalledOpenItem],
    cfg: RecallConfig, budget_tokens: int, opening_message: str, now: dt.datetime,
) -> tuple[list[RecalledEpisode], list[RecalledOpenItem]]:
    """Deduplicate, prioritise and fit to the budget; return episodes oldest first and open items.

    ``rows`` come ordered by relevance rank, then recency rank; ``vectors`` are unit embeddings by id.
    """
    episodes = [_episode(row) for row in rows]
    unique = _dedup(episodes, vectors, cfg.dedup_similarity)
    relevant = [ep for ep in unique if ep.relevance_rank is not None]
    recent = sorted((ep for ep in unique if ep.recency_rank is not None), key=lambda ep: ep.recency_rank or 0)

    macros = _macros()
    weights = _term_weights(_terms(opening_message), unique)
    budget = 4 * budget_tokens  # estimate_tokens(text) <= budget_tokens  <=>  len(text) <= 4 * budget_tokens
    used = _overhead()
    items: list[RecalledOpenItem] = []
    for item in open_items:  # at most open_items_share of the budget
        cost = len(macros.open_item_line(item)) + 1
        if used + cost <= min(budget, _overhead() + cfg.open_items_share * budget):
            items.append(item)
            used += cost
    holders = {item.episode_id for item in items}

    snippets: dict[int, str] = {}
    costs: dict[tuple[int, bool], int] = {}

    def cost_of(ep: RecalledEpisode, compact: bool) -> int:
        """Characters the episode's line adds to the block (and sets how it will be shown)."""
        ep.reasons = _reasons(ep, items)
        ep.compact = compact
        if compact and ep.id not in snippets:
            snippets[ep.id] = _snippet(ep, weights, cfg.compact_chars)
        ep.compact_text = snippets[ep.id] if compact else ""
        if (ep.id, compact) not in costs:
            costs[ep.id, compact] = len(macros.episode_line(ep)) + 1
        return costs[ep.id, compact]

    chosen: dict[int, RecalledEpisode] = {}
    # Recent episodes are shown compactly; their room is reserved before relevant ones are placed.
    recent_mode = {ep.id: not cfg.recent_full for ep in recent}
    reserved = {ep.id: cost_of(ep, recent_mode[ep.id]) for ep in recent}
    for ep in relevant:
        if ep.id in reserved:  # recent and relevant: shown in full when it fits
            full = cost_of(ep, False)
            if used + sum(reserved.values()) - reserved[ep.id] + full <= budget:
                del reserved[ep.id]
                chosen[ep.id] = ep
                used += full
            continue
        for compact in (False, True) if cfg.compact_tail else (False,):
            cost = cost_of(ep, compact)
            if used + sum(reserved.values()) + cost <= budget:
                chosen[ep.id] = ep
                used += cost
                break
    tail = [ep for ep in recent if ep.id in reserved] + [ep for ep in unique if ep.id in holders]
    for ep in tail:
        if ep.id in chosen:
            continue
        cost = cost_of(ep, recent_mode.get(ep.id, True))
        reserved.pop(ep.id, None)
        if used + sum(reserved.values()) + cost <= budget:
            chosen[ep.id] = ep
            used += cost
    picked = sorted(chosen.values(), key=lambda ep: (ep.ended_at, ep.id))
    # The arithmetic above is exact up to the skeleton; re-render to be sure and trim if ever needed.
    while picked or items:
        block = render(TEMPLATE, as_of=now.date().isoformat(), episodes=picked, open_items=items)
        if estimate_tokens(block) <= budget_tokens:
            break
        if picked:
            picked.remove(min(picked, key=lambda ep: (not ep.compact, -(ep.relevance_rank or 1 << 30))))
        else:
            items.pop()
    return picked, items


def _reasons(ep: RecalledEpisode, items: list[RecalledOpenItem]) -> list[str]:
    return [reason for reason, yes in (("relevant", ep.relevance_rank is not None),
                                       ("recent", ep.recency_rank is not None),
                                       ("open item", any(item.episode_id == ep.id for item in items))) if yes]


def _dedup(episodes: list[RecalledEpisode], vectors: dict[int, np.ndarray], threshold: float
           ) -> list[RecalledEpisode]:
    """Drop an episode that repeats a better-ranked one (same summary, or near-identical embedding)."""
    kept: list[RecalledEpisode] = []
    seen_text: set[str] = set()
    for ep in episodes:
        text = " ".join(ep.summary.lower().split())
        vec = vectors.get(ep.id)
        if text in seen_text:
            continue
        if vec is not None and any(
            (other := vectors.get(k.id)) is not None and float(vec @ other) >= threshold for k in kept
        ):
            continue
        kept.append(ep)
        seen_text.add(text)
    return kept


def _episode(row: dict[str, Any]) -> RecalledEpisode:
    return RecalledEpisode(**{f.name: row[f.name] for f in fields(RecalledEpisode) if f.name in row})


@cache
def _macros() -> Any:
    """The template's line macros, to measure each line exactly as the block will show it."""
    return environment().get_template(TEMPLATE).make_module({"as_of": "", "episodes": [], "open_items": []})


@cache
def _overhead() -> int:
    """Characters of the block's skeleton (both sections present), measured with one dummy line each."""
    when = dt.datetime(2000, 1, 1, tzinfo=dt.UTC)
    ep = RecalledEpisode(0, "session", "s", "general", "x", [], 0.5, when, when, None, None, 0.0, None, None,
                         None, None, 1, None, ["recent"])
    item = RecalledOpenItem(0, 0, "commitment", "x", None, None, when)
    macros = _macros()
    block = render(TEMPLATE, as_of=when.date().isoformat(), episodes=[ep], open_items=[item])
    return len(block) - len(macros.episode_line(ep)) - len(macros.open_item_line(item)) - 2


# Compact lines show the summary's sentence that best matches the opening message.
_NON_WORD = re.compile(r"[\W_]+")
_SENTENCE = re.compile(r"(?<=[.!?])\s+")


def _terms(text: str) -> set[str]:
    """Words of 3+ letters cut to 6 (a crude stem); common words are discounted by _term_weights."""
    return {w[:6] for w in _words(text).split() if len(w) >= 3}


def _term_weights(terms: set[str], episodes: Sequence[RecalledEpisode]) -> dict[str, float]:
    """Inverse document frequency of the query's words among the offered episodes.

    A word in every summary (the user's own name, say) should not decide which sentence is shown.
    """
    texts = [_words(ep.summary) for ep in episodes]
    return {t: math.log(1 + len(texts) / (1 + sum(" " + t in text for text in texts))) for t in terms}


def _words(text: str) -> str:
    """' word word ... ': lets `" " + stem in _words(text)` test for a word starting with stem."""
    return " " + _NON_WORD.sub(" ", text.lower()) + " "


def _snippet(ep: RecalledEpisode, weights: dict[str, float], limit: int) -> str:
    """A compact line: the summary's sentence that best matches the opening message's rarer words."""
    sentences = [s.strip() for s in _SENTENCE.split(ep.summary.strip()) if s.strip()] or [ep.summary.strip()]
    best, best_score = 0, 0.0
    if weights and len(sentences) > 1:
        for i, sentence in enumerate(sentences):
            words = _words(sentence)
            score = sum(w for t, w in weights.items() if " " + t in words)
            if score > best_score:
                best, best_score = i, score
    text = sentences[best]
    if ep.topic_tags:
        text = f"{', '.join(ep.topic_tags[:3])}: {text}"
    if len(text) > limit:
        text = text[: limit - 3].rsplit(" ", 1)[0].rstrip(" ,;:") + "..."
    return text


__all__ = ["Recall", "RecallConfig", "RecalledEpisode", "RecalledOpenItem", "Recaller", "purpose_filter", "recall"]
