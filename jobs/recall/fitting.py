"""Fitting the chosen episodes, their quoted lines and the open items into the block's token budget.

Near-duplicates are dropped first (same summary, or stored embeddings with cosine similarity >=
``dedup_similarity``); episodes are labelled by the evidence of their lines too (:func:`jobs.recall.quotes.line_labels`).
Then, in :func:`select`'s steps: open items of recent or related episodes (of another purpose only when related);
room for the recent episodes, shown compactly, is reserved; relevant and possibly related episodes without lines
of their own (super-summaries) in full while within ``full_share`` of the budget; the episode holding a decision
that replaced one shown; then the **quotes**: the lines of the user's whole history that best match the opening
message (``recall_lines``: dense and full text fused by rank), by priority (:func:`jobs.recall.quotes.priorities`:
a later session's value before an older one's), each under its session's one-line, dated header; the rest
compactly. Episodes are shown oldest first, their quotes in session order.

Tokens are estimated as characters / 4 (:func:`jobs.tokens.estimate_tokens`), the estimator used
for every budget in episodes; the whole rendered block counts, so ``estimate_tokens(block) <= budget``.
Lines are measured as the template prints them, after :func:`jobs.prompts.inert` has quoted their text.
A budget below :func:`minimum_budget` may hold no line at all; the block then says how many earlier
sessions there are and what budget to ask for (:meth:`jobs.recall.result.Recall.render`).
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Mapping, Sequence
from dataclasses import fields, replace
from functools import cache
from typing import Any

import numpy as np

from jobs.recall.config import RecallConfig
from jobs.recall.quotes import LineKey, key, later_values, line_labels, priorities
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
from jobs.recall.snippets import holds_any, snippet, term_weights, terms
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
    *,
    purpose: str | None = None,
    line_vectors: Mapping[LineKey, np.ndarray] | None = None,
) -> tuple[list[RecalledEpisode], list[RecalledOpenItem]]:
    """Deduplicate, prioritise and fit to the budget; return episodes oldest first and open items.

    ``rows`` come ordered by relevance rank, then recency rank; ``vectors`` are unit embeddings by id;
    ``lines`` are the user's lines that best match, best first (``recall_lines``), with their unit embeddings in
    ``line_vectors``; ``purpose`` is the purpose recalled for (open items of another only when related).
    """
    fit = _Fit(rows, vectors, cfg, budget_tokens, opening_message, lines, line_vectors or {})
    fit.place_open_items(open_items, purpose)
    fit.place_summaries()
    fit.place_replacing()
    fit.place_quotes()
    fit.place_tail()
    return fit.trimmed(now)


class _Fit:
    """The block being fitted: what is chosen so far and the characters it takes (select's steps)."""

    def __init__(
        self,
        rows: Sequence[dict[str, Any]],
        vectors: dict[int, np.ndarray],
        cfg: RecallConfig,
        budget_tokens: int,
        opening_message: str,
        lines: Sequence[RecalledLine],
        line_vectors: Mapping[LineKey, np.ndarray],
    ) -> None:
        self.cfg, self.budget_tokens = cfg, budget_tokens
        self.unique = _dedup(line_labels([_episode(row) for row in rows], lines, cfg), vectors, cfg.dedup_similarity)
        unique = self.unique
        self.by_id = {ep.id: ep for ep in unique}
        self.relevant = [ep for ep in unique if ep.relevance_rank is not None]
        self.related = sorted((ep for ep in unique if ep.related_rank is not None), key=lambda ep: ep.related_rank or 0)
        self.recent = sorted((ep for ep in unique if ep.recency_rank is not None), key=lambda ep: ep.recency_rank or 0)
        cues = named_months(opening_message) if cfg.time_cues else frozenset()
        self.relevant, self.related = _named_months_first(self.relevant, cues), _named_months_first(self.related, cues)
        self.in_month = {ep.id for ep in unique if cues and falls_in(*_dates(ep), cues)}
        self.quotable = [
            replace(
                line,
                text=_quote_text(line, self.by_id[line.episode_id]),
            )
            for line in lines
            if line.episode_id in self.by_id
            and (max(line.similarity, line.score) >= cfg.line_similarity or line.text_score is not None)
        ]
        # Episodes that keep lines (recall_quoted_episodes, or a line of theirs was found): shown by a header above
        # their quotes, never by their full summary alone.
        self.has_lines = {line.episode_id for line in lines if line.episode_id in self.by_id} | {
            row["id"] for row in rows if row.get("has_lines") and row["id"] in self.by_id
        }
        # Which episodes hold the events that replaced a decision of each chosen one (recall_replaced's replaced_by).
        self.replaced_by: dict[int, frozenset[int]] = {
            row["id"]: frozenset(row.get("replaced_by") or ()) for row in rows if row["id"] in self.by_id
        }
        self.later = _replacing(unique, self.replaced_by)
        self._label_replacing()
        self.priority = priorities(self.quotable, self.by_id, self.later, self.in_month, cfg)
        self.later_value = later_values(
            self.priority, self.quotable, self.by_id, line_vectors, cfg.newer_similarity, cfg.newer_share
        )
        # Trimming drops the lowest first: a later value goes no sooner than the older line it came with.
        self.keep = dict(self.priority)
        for older, newer in self.later_value.items():
            self.keep[key(newer)] = max(self.keep[key(newer)], self.priority[older] + 1e-6)
        self.macros = line_macros()
        self.weights = term_weights(terms(opening_message), unique)
        self.budget = 4 * budget_tokens  # estimate_tokens(text) <= budget_tokens  <=>  len(text) <= 4 * budget_tokens
        self.used = skeleton_chars() + (0 if self.relevant else nothing_relevant_chars())
        self.items: list[RecalledOpenItem] = []
        self.chosen: dict[int, RecalledEpisode] = {}
        self.quotes: dict[int, list[RecalledLine]] = {}
        self._snippets: dict[tuple[int, int], str] = {}
        self._costs: dict[tuple[int, bool, int], int] = {}
        # Recent episodes are shown compactly; their room is reserved before relevant ones are placed.
        self.recent_mode = {ep.id: not cfg.recent_full for ep in self.recent}
        self.reserved = (
            {ep.id: self.cost_of(ep, self.recent_mode[ep.id]) for ep in self.recent} if cfg.reserve_recent else {}
        )
        self.full_room = cfg.full_share * self.budget  # full summaries stop here; the rest: compact lines
        self.quote_room = cfg.quote_share * self.budget  # quotes stop here

    def cost_of(self, ep: RecalledEpisode, compact: bool, limit: int | None = None) -> int:
        """Characters the episode's line adds to the block (and sets how it will be shown)."""
        limit = self.cfg.compact_chars if limit is None else limit
        ep.reasons = _reasons(ep, self.items)
        ep.compact = compact
        if compact and (ep.id, limit) not in self._snippets:
            self._snippets[ep.id, limit] = snippet(ep, self.weights, limit)
        ep.compact_text = self._snippets[ep.id, limit] if compact else ""
        key_ = (ep.id, compact, limit if compact else 0)
        if key_ not in self._costs:
            self._costs[key_] = len(self.macros.episode_line(ep)) + 1
        return self._costs[key_]

    def _room(self, ep_id: int | None = None) -> int:
        """Characters used, counting the reserved recent lines (but not ``ep_id``'s own reservation)."""
        return self.used + sum(self.reserved.values()) - (self.reserved.get(ep_id, 0) if ep_id is not None else 0)

    def _take(self, ep: RecalledEpisode, cost: int) -> None:
        self.reserved.pop(ep.id, None)
        self.chosen[ep.id] = ep
        self.used += cost

    def place_open_items(self, open_items: Sequence[RecalledOpenItem], purpose: str | None) -> None:
        """Open items only when recent or related, within open_items_share of the budget: of a recent episode, or
        related to the opening message: of a relevant episode (or one at least open_item_similarity close) AND
        holding one of the message's rarer words (one in at most half of the offered summaries, so not the user's
        own name). The episode's being relevant is not enough: a session about the dance studio holds "I'll watch
        your routine!" too, and every such line costs a quote (issue 47: LoCoMo offline, 750 tokens, 0.34 -> 0.36,
        tuning data). Nor is a shared word: a 90-word bug report shares one with most of a developer's items
        (sde-bench: 4.2 items a block, 3.9 of other chats, with the word alone). An item of another purpose than
        the one recalled for (a ``general`` session's, in a coding block) only when related: being recent is not
        enough (issue 46 #21)."""
        cfg = self.cfg
        close = {ep.id for ep in self.relevant} | {
            ep.id for ep in self.unique if (ep.similarity or 0.0) >= cfg.open_item_similarity
        }
        recent = {ep.id for ep in self.recent}
        n = len(self.unique)  # term_weights: log(1 + n / (1 + k)) for a word in k of the n summaries; k <= n / 2:
        rare = {t for t, w in self.weights.items() if w >= math.log(1 + n / (1 + n / 2))}
        for item in open_items:
            ep = self.by_id.get(item.episode_id)
            related = item.episode_id in close and holds_any(item.what, rare)
            if not (related or item.episode_id in recent) or (
                purpose is not None and ep is not None and ep.purpose != purpose and not related
            ):
                continue
            cost = len(self.macros.open_item_line(item)) + 1
            if self.used + cost <= min(self.budget, skeleton_chars() + cfg.open_items_share * self.budget):
                self.items.append(item)
                self.used += cost

    def place_summaries(self) -> None:
        """Relevant (then possibly related) episodes without lines of their own (super-summaries, episodes stored
        before lines were kept): in full while within full_room, then compactly."""
        for ep in self.relevant + self.related:
            if ep.id in self.has_lines:
                continue
            if ep.id in self.reserved:  # recent and relevant (or possibly related): in full when it fits
                full = self.cost_of(ep, False)
                if self._room(ep.id) + full <= self.full_room:
                    self._take(ep, full)
                continue
            for compact in (False, True):  # one that no longer fits in full is shown compactly
                cost = self.cost_of(ep, compact)
                if self._room() + cost <= (self.budget if compact else self.full_room):
                    self._take(ep, cost)
                    break

    def place_replacing(self) -> None:
        """Where a shown episode's decision was replaced, the later one holds: the episode holding the replacing
        decision is shown in full (its summary states the decision that holds)."""
        for ep in self.unique:
            if ep.id in self.later and ep.id not in self.chosen and self._replaces_relevant(ep):
                full = self.cost_of(ep, False)
                if self._room(ep.id) + full <= self.full_room:
                    self._take(ep, full)

    def _label_replacing(self) -> None:
        """The episode holding the decision that replaced a relevant episode's is relevant too: it states what holds
        on the same matter (issue 47: one developer's history, the amending chat was only "possibly related" while
        the rule it amended was "relevant")."""
        last = max((ep.relevance_rank or 0 for ep in self.unique), default=0)
        for ep in self.unique:
            if ep.id in self.later and ep.relevance_rank is None and self._replaces_relevant(ep):
                last += 1
                ep.relevance_rank, ep.related_rank = last, None
                self.relevant.append(ep)
                self.related = [other for other in self.related if other.id != ep.id]

    def _replaces_relevant(self, ep: RecalledEpisode) -> bool:
        """Whether ``ep`` is relevant, or holds a decision that replaced one of a relevant episode: a replacement of
        something unrelated to the opening message takes no room of its own. The link is the events' own
        (``replaced_by``), not the day: in one developer's history six amending chats of one day each replaced
        a different rule, and a day's match labelled all six relevant to every bug report (issue 47)."""
        return ep.relevance_rank is not None or any(ep.id in self.replaced_by.get(old.id, ()) for old in self.relevant)

    def _leading(self) -> set[int]:
        """The episodes whose quotes go under their full summary: the best relevant (else possibly related) sessions;
        where a later session replaced a decision of one, the later one instead (its summary states what holds)."""
        # A super-summary's summary covers a whole period and its quotes carry their own days: it never leads
        # (issue 47: LoCoMo compressed, 750 tokens, a super leading in full cost 0.456 -> 0.402, tuning data).
        leading = [ep for ep in self.relevant + self.related if ep.kind != "super"][: self.cfg.full_headers]
        out: set[int] = set()
        for ep in leading:
            holders = [h for h in self.unique if h.id in self.replaced_by.get(ep.id, ())]
            out.add(max(holders, key=lambda h: h.ended_at).id if holders else ep.id)
        return out

    def place_quotes(self) -> None:
        """The lines by priority (jobs.recall.quotes), each under its episode's line (a header of header_chars,
        or the full summary for the leading ones), within quote_room. A line whose value a later session changed
        comes with that later line (:func:`jobs.recall.quotes.later_values`), or not at all."""
        leading = self._leading()
        placed: set[LineKey] = set()
        for line in sorted(self.quotable, key=lambda line: -self.priority[key(line)]):
            if key(line) in placed:
                continue
            newer = self.later_value.get(key(line))
            group = [newer, line] if newer is not None and key(newer) not in placed else [line]
            cost, headers = 0, {}
            for quoted in group:
                ep = self.by_id[quoted.episode_id]
                cost += len(self.macros.quote_line(quoted)) + 1
                if ep.id not in self.chosen and ep.id not in headers:
                    headers[ep.id] = self.cost_of(ep, ep.id not in leading, self.cfg.header_chars)
            if self._room() - sum(self.reserved.get(i, 0) for i in headers) + sum(headers.values()) + cost > (
                self.quote_room
            ):
                continue
            for ep_id, header in headers.items():
                self._take(self.by_id[ep_id], header)
            for quoted in group:
                self.quotes.setdefault(quoted.episode_id, []).append(quoted)
                placed.add(key(quoted))
            self.used += cost

    def place_tail(self) -> None:
        """The rest of the relevant and possibly related episodes compactly, the reserved recent ones and the open
        items' episodes."""
        holders = {item.episode_id for item in self.items}
        tail = (
            [ep for ep in self.relevant + self.related if ep.id in self.has_lines]
            + [ep for ep in self.recent if ep.id in self.reserved or not self.cfg.reserve_recent]
            + [ep for ep in self.unique if ep.id in holders]
        )
        for ep in tail:
            if ep.id in self.chosen:
                continue
            cost = self.cost_of(ep, self.recent_mode.get(ep.id, True))
            self.reserved.pop(ep.id, None)
            if self._room() + cost <= self.budget:
                self._take(ep, cost)

    def trimmed(self, now: dt.datetime) -> tuple[list[RecalledEpisode], list[RecalledOpenItem]]:
        """The chosen episodes oldest first, their quotes in session order. The arithmetic is exact up to the
        skeleton; the block is rendered to be sure and trimmed if ever needed: the lowest-priority quote first,
        then the least relevant compact line, then open items."""
        for ep_id, quoted in self.quotes.items():
            self.chosen[ep_id].lines = sorted(quoted, key=lambda line: line.ordinal)
        picked = sorted(self.chosen.values(), key=lambda ep: (ep.ended_at, ep.id))
        items = self.items
        while picked or items:
            # The block says nothing relates when no relevant episode is shown (Recall.nothing_relevant).
            nothing = not any(ep.relevance_rank is not None for ep in picked)
            if estimate_tokens(render_block(now, picked, items, nothing)) <= self.budget_tokens:
                break
            quoted_eps = [ep for ep in picked if ep.lines]
            if quoted_eps:
                worst = min((line for ep in quoted_eps for line in ep.lines), key=lambda ln: self.keep[key(ln)])
                self.by_id[worst.episode_id].lines.remove(worst)
            elif picked:
                picked.remove(min(picked, key=lambda ep: (not ep.compact, -(ep.relevance_rank or 1 << 30))))
            else:
                items.pop()
        return picked, items


def _replacing(episodes: Sequence[RecalledEpisode], replaced_by: Mapping[int, frozenset[int]]) -> dict[int, float]:
    """The offered episodes holding a decision that replaced one of another offered episode's (``replaced_by``:
    the episodes holding the replacing events, recall_replaced), each with the best similarity (to the opening
    message) of the episodes it replaced."""
    out: dict[int, float] = {}
    offered = {ep.id for ep in episodes if ep.kind == "session"}
    for old in (ep for ep in episodes if ep.kind == "session"):
        for holder in replaced_by.get(old.id, frozenset()) & offered - {old.id}:
            out[holder] = max(out.get(holder, 0.0), old.similarity or 0.0)
    return out


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


def _quote_text(line: RecalledLine, ep: RecalledEpisode) -> str:
    """A quote as shown: relative dates resolved to its day; under a super-summary, whose header gives the
    whole period, led by the day of its own session ("[8 May 2023] ...")."""
    day = (line.said_at or ep.started_at).date()
    text = resolve_relative_dates(line.text, day)
    return f"[{day.day} {day:%B %Y}] {text}" if ep.kind == "super" else text


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
    # The kept vectors, one row each, filled as they are kept (stacking them anew for every episode cost a heavy
    # user's recall ~5 ms); all of one dimension, the query's (recall_rows).
    dim = next((len(v) for v in vectors.values()), 0)
    kept_vectors = np.empty((len(episodes), dim), np.float32)
    n_kept = 0
    seen_text: set[str] = set()
    for ep in episodes:
        text = " ".join(ep.summary.lower().split())
        vec = vectors.get(ep.id)
        if text in seen_text:
            continue
        if vec is not None and n_kept and float(np.max(kept_vectors[:n_kept] @ vec)) >= threshold:
            continue
        kept.append(ep)
        seen_text.add(text)
        if vec is not None:
            kept_vectors[n_kept] = vec
            n_kept += 1
    return kept


def _episode(row: dict[str, Any]) -> RecalledEpisode:
    return RecalledEpisode(**{f.name: row[f.name] for f in fields(RecalledEpisode) if f.name in row})
