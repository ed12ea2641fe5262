"""Fitting the chosen episodes and open items into the block's token budget.

Near-duplicates are dropped first (same summary, or stored embeddings with cosine similarity >=
``dedup_similarity``). Room for the recent episodes, shown compactly (one query-biased sentence),
is reserved; relevant episodes (those above the relevance floor; when there are none the block says so
in one line), then the "possibly related" ones (the best below the floor) are placed best first (those
that fall in a month the opening message names first, :mod:`jobs.recall.time_cues`), in full
while full summaries stay within ``full_share`` of the budget, then compactly; the rest of the reserved
recent ones and the open items' episodes follow.

Tokens are estimated as characters / 4 (:func:`jobs.tokens.estimate_tokens`), the estimator used
for every budget in episodes; the whole rendered block counts, so ``estimate_tokens(block) <= budget``.
Lines are measured as the template prints them, after :func:`jobs.prompts.inert` has quoted their text.
A budget below :func:`minimum_budget` may hold no line at all; the block then says how many earlier
sessions there are and what budget to ask for (:meth:`jobs.recall.result.Recall.render`).
"""

from __future__ import annotations

import datetime as dt
import math
import re
from collections.abc import Sequence
from dataclasses import fields, replace
from functools import cache
from typing import Any

import numpy as np

from jobs.recall.config import RecallConfig
from jobs.recall.relative_dates import resolve_relative_dates
from jobs.recall.result import (
    RecalledEpisode,
    RecalledLine,
    RecalledOpenItem,
    line_macros,
    nothing_relevant_chars,
    render_block,
    skeleton_chars,
)
from jobs.recall.time_cues import Cue, falls_in, named_months
from jobs.tokens import estimate_tokens


def select(
    rows: Sequence[dict[str, Any]],
    vectors: dict[int, np.ndarray],
    open_items: Sequence[RecalledOpenItem],
    cfg: RecallConfig,
    budget_tokens: int,
    opening_message: str,
    now: dt.datetime,
    lines: Sequence[RecalledLine] = (),
) -> tuple[list[RecalledEpisode], list[RecalledOpenItem]]:
    """Deduplicate, prioritise and fit to the budget; return episodes oldest first and open items.

    ``rows`` come ordered by relevance rank, then recency rank; ``vectors`` are unit embeddings by id;
    ``lines`` are the chosen episodes' lines best first (``recall_lines``).
    """
    episodes = _line_supported([_episode(row) for row in rows], lines, cfg.relevant_line_similarity)
    unique = _dedup(episodes, vectors, cfg.dedup_similarity)
    relevant = [ep for ep in unique if ep.relevance_rank is not None]
    related = sorted((ep for ep in unique if ep.related_rank is not None), key=lambda ep: ep.related_rank or 0)
    recent = sorted((ep for ep in unique if ep.recency_rank is not None), key=lambda ep: ep.recency_rank or 0)
    cues = named_months(opening_message) if cfg.time_cues else frozenset()
    relevant, related = _named_months_first(relevant, cues), _named_months_first(related, cues)
    by_id = {ep.id: ep for ep in unique}
    quotable = [
        replace(
            line, text=resolve_relative_dates(line.text, (line.said_at or by_id[line.episode_id].started_at).date())
        )
        for line in lines
        if line.episode_id in by_id and max(line.similarity, line.score) >= cfg.line_similarity
    ]
    has_lines = {line.episode_id for line in lines if line.episode_id in by_id}

    macros = line_macros()
    query_terms = _terms(opening_message)
    weights = _term_weights(query_terms, unique)
    budget = 4 * budget_tokens  # estimate_tokens(text) <= budget_tokens  <=>  len(text) <= 4 * budget_tokens
    used = skeleton_chars() + (0 if relevant else nothing_relevant_chars())
    items: list[RecalledOpenItem] = []
    # Open items are shown when they are recent or related to the opening message (their session is recent,
    # relevant, or at least open_item_similarity similar to it), within open_items_share of the budget.
    near = (
        {ep.id for ep in recent}
        | {ep.id for ep in relevant}
        | {ep.id for ep in unique if (ep.similarity or 0.0) >= cfg.open_item_similarity}
    )
    for item in open_items:
        if item.episode_id not in near:
            continue
        cost = len(macros.open_item_line(item)) + 1
        if used + cost <= min(budget, skeleton_chars() + cfg.open_items_share * budget):
            items.append(item)
            used += cost
    holders = {item.episode_id for item in items}

    snippets: dict[tuple[int, int], str] = {}
    costs: dict[tuple[int, bool, int], int] = {}

    def cost_of(ep: RecalledEpisode, compact: bool, limit: int = cfg.compact_chars) -> int:
        """Characters the episode's line adds to the block (and sets how it will be shown)."""
        ep.reasons = _reasons(ep, items)
        ep.compact = compact
        if compact and (ep.id, limit) not in snippets:
            snippets[ep.id, limit] = _snippet(ep, weights, limit)
        ep.compact_text = snippets[ep.id, limit] if compact else ""
        key = (ep.id, compact, limit if compact else 0)
        if key not in costs:
            costs[key] = len(macros.episode_line(ep)) + 1
        return costs[key]

    chosen: dict[int, RecalledEpisode] = {}
    quotes: dict[int, list[RecalledLine]] = {}
    # Recent episodes are shown compactly; their room is reserved before relevant ones are placed.
    recent_mode = {ep.id: not cfg.recent_full for ep in recent}
    reserved = {ep.id: cost_of(ep, recent_mode[ep.id]) for ep in recent}
    full_room = cfg.full_share * budget  # summaries and quotes stop here; the rest is for compact lines
    # 1. Relevant (then possibly related) episodes without lines of their own (super-summaries, episodes
    #    stored before lines were kept): in full while within full_room, then compactly.
    for ep in relevant + related:
        if ep.id in has_lines:
            continue
        if ep.id in reserved:  # recent and relevant (or possibly related): shown in full when it fits
            full = cost_of(ep, False)
            if used + sum(reserved.values()) - reserved[ep.id] + full <= full_room:
                del reserved[ep.id]
                chosen[ep.id] = ep
                used += full
            continue
        for compact in (False, True):  # a relevant episode that no longer fits in full is shown compactly
            cost = cost_of(ep, compact)
            if used + sum(reserved.values()) + cost <= (budget if compact else full_room):
                chosen[ep.id] = ep
                used += cost
                break

    # 1b. Where a shown episode's decision was replaced, the later one holds: the episode holding the replacing
    #    decision is shown in full (its summary states the decision), and its lines rank as if it were as
    #    similar to the message as the episode it replaced.
    later = _replacing(unique, vectors)
    for ep in unique:
        if ep.id in later and ep.id not in chosen:
            full = cost_of(ep, False)
            if used + sum(reserved.values()) - reserved.get(ep.id, 0) + full <= full_room:
                reserved.pop(ep.id, None)
                chosen[ep.id] = ep
                used += full

    # 2. The lines that best match the opening message, best first, each under its episode's compact line
    #    (paid with the episode's first line), within full_room. A line of a month the message names
    #    counts as a little closer.
    def line_rank(line: RecalledLine) -> float:
        ep = by_id[line.episode_id]
        return (
            max(line.similarity, line.score)
            + cfg.line_episode_weight * max(ep.similarity or 0.0, later.get(ep.id, 0.0))
            + (0.05 if cues and falls_in(*_dates(ep), cues) else 0.0)
        )

    leading = {ep.id for ep in (relevant + related)[: cfg.full_headers]}  # their quotes under their full summary
    ranked = sorted(quotable, key=lambda line: -line_rank(line))
    for line in ranked:
        ep = by_id[line.episode_id]
        cost = len(macros.quote_line(line)) + 1
        header = 0 if ep.id in chosen else cost_of(ep, ep.id not in leading, cfg.header_chars)
        if used + sum(reserved.values()) - reserved.get(ep.id, 0) + header + cost > full_room:
            continue
        if ep.id not in chosen:
            reserved.pop(ep.id, None)
            chosen[ep.id] = ep
            used += header
        quotes.setdefault(ep.id, []).append(line)
        used += cost
    # 3. The rest of the relevant and possibly related episodes compactly, the reserved recent ones and
    #    the open items' episodes.
    tail = (
        [ep for ep in relevant + related if ep.id in has_lines]
        + [ep for ep in recent if ep.id in reserved]
        + [ep for ep in unique if ep.id in holders]
    )
    for ep in tail:
        if ep.id in chosen:
            continue
        cost = cost_of(ep, recent_mode.get(ep.id, True))
        reserved.pop(ep.id, None)
        if used + sum(reserved.values()) + cost <= budget:
            chosen[ep.id] = ep
            used += cost
    for ep_id, quoted in quotes.items():
        chosen[ep_id].lines = sorted(quoted, key=lambda line: line.ordinal)
    picked = sorted(chosen.values(), key=lambda ep: (ep.ended_at, ep.id))
    # The arithmetic above is exact up to the skeleton; re-render to be sure and trim if ever needed:
    # the least similar quote first, then the least relevant compact line, then open items.
    while picked or items:
        # The block says nothing relates when no relevant episode is shown (Recall.nothing_relevant).
        nothing = not any(ep.relevance_rank is not None for ep in picked)
        if estimate_tokens(render_block(now, picked, items, nothing)) <= budget_tokens:
            break
        quoted_eps = [ep for ep in picked if ep.lines]
        if quoted_eps:
            ep = min(quoted_eps, key=lambda e: min(max(line.similarity, line.score) for line in e.lines))
            ep.lines.remove(min(ep.lines, key=lambda line: max(line.similarity, line.score)))
        elif picked:
            picked.remove(min(picked, key=lambda ep: (not ep.compact, -(ep.relevance_rank or 1 << 30))))
        else:
            items.pop()
    return picked, items


def _replacing(episodes: Sequence[RecalledEpisode], vectors: dict[int, np.ndarray]) -> dict[int, float]:
    """The episodes holding a decision that replaced one of another offered episode's, each with the best
    similarity (to the opening message) of the episodes it replaced. ``replaced_on`` gives only the day of the
    replacement, so of the later sessions that span that day, the one whose stored embedding is closest to the
    replaced episode's (the same matter) is taken; without embeddings, the latest of them."""
    out: dict[int, float] = {}
    for old in episodes:
        if old.replaced_on is None or old.kind != "session":
            continue
        day = old.replaced_on
        later = [
            ep
            for ep in episodes
            if ep.id != old.id
            and ep.kind == "session"
            and ep.ended_at > old.ended_at
            and ep.started_at.date() <= day <= ep.ended_at.date()
        ]
        if not later:
            continue
        base = vectors.get(old.id)

        def closeness(ep: RecalledEpisode, base: np.ndarray | None = base) -> tuple[float, dt.datetime]:
            vec = vectors.get(ep.id)
            return (float(vec @ base) if vec is not None and base is not None else 0.0), ep.ended_at

        holder = max(later, key=closeness)
        out[holder.id] = max(out.get(holder.id, 0.0), old.similarity or 0.0)
    return out


def _line_supported(
    episodes: list[RecalledEpisode], lines: Sequence[RecalledLine], floor: float
) -> list[RecalledEpisode]:
    """An episode above the relevance floor whose session has lines, none of them at least ``floor`` similar
    to the opening message, is only possibly related: its summary resembles the message, nothing said in it
    does. Such episodes go after the possibly related ones."""
    best: dict[int, float] = {}
    for line in lines:
        best[line.episode_id] = max(best.get(line.episode_id, -1.0), line.similarity)
    last = max((ep.related_rank or 0 for ep in episodes), default=0)
    for ep in episodes:
        if ep.relevance_rank is not None and ep.id in best and best[ep.id] < floor:
            last += 1
            ep.relevance_rank, ep.related_rank = None, last
    return episodes


@cache
def minimum_budget(cfg: RecallConfig) -> int:
    """The smallest useful budget: the block's skeleton, the "nothing relevant" line and one compact
    episode line of ``compact_chars`` characters (its text as long as a compact line gets). Any
    smaller budget may show no line; at this one the last recent episode fits."""
    when = dt.datetime(2000, 1, 1, tzinfo=dt.UTC)
    ep = RecalledEpisode(
        0,
        "session",
        "s",
        "general",
        "",
        [],
        0.5,
        when,
        when,
        None,
        None,
        0.0,
        None,
        None,
        None,
        None,
        1,
        None,
        ["possibly related", "recent"],
        True,
        "x" * cfg.compact_chars,
    )
    chars = skeleton_chars() + nothing_relevant_chars() + len(line_macros().episode_line(ep)) + 1
    return math.ceil(chars / 4)


def _named_months_first(episodes: list[RecalledEpisode], cues: frozenset[Cue]) -> list[RecalledEpisode]:
    """The episodes that fall in a month the opening message names first; rank order kept otherwise."""
    if not cues:
        return episodes
    return sorted(episodes, key=lambda ep: not falls_in(*_dates(ep), cues))  # sorted() is stable


def _dates(ep: RecalledEpisode) -> tuple[dt.date, dt.date]:
    """The days an episode covers: its compressed period, or its session's start to end."""
    if ep.kind == "super" and ep.period_start and ep.period_end:
        return ep.period_start, ep.period_end
    return ep.started_at.date(), ep.ended_at.date()


def _reasons(ep: RecalledEpisode, items: list[RecalledOpenItem]) -> list[str]:
    return [
        reason
        for reason, yes in (
            ("relevant", ep.relevance_rank is not None),
            ("possibly related", ep.related_rank is not None),
            ("recent", ep.recency_rank is not None),
            ("open item", any(item.episode_id == ep.id for item in items)),
        )
        if yes
    ]


def _dedup(episodes: list[RecalledEpisode], vectors: dict[int, np.ndarray], threshold: float) -> list[RecalledEpisode]:
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
