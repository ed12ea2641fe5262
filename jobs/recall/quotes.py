"""Which lines the block quotes, in which order: lines are the unit of retrieval (issue 47).

``recall_lines`` (``sql/recall.sql``) searches every line of the user's candidate episodes, by the cosine
similarity of its embedding (or its neighbour's: the answer follows the question) and by full text, fused by
reciprocal rank. Here each line gets the priority fitting places it by:

* its dense score and its fused rank score (:func:`base_priority`);
* a share of its episode's similarity, or of the similarity of the episode whose decision it replaced;
* a little more when its session falls in a month the opening message names (:mod:`jobs.recall.time_cues`);
* **newest wins** (:func:`later_values`): when a later session's line says something about the same thing as an
  older session's line (their embeddings are at least ``newer_similarity`` alike), the later one is quoted with
  it, so at any budget it is never left out while the older is quoted.

The episodes a line comes from are chosen by that evidence: :func:`line_labels` makes an episode "relevant" when
one of its lines clears the line floor, so "nothing relates" is never printed above a quote that is among the
best matches.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from jobs.recall.config import RecallConfig
from jobs.recall.result import RecalledEpisode, RecalledLine

LineKey = tuple[int, int]  # (episode_id, ordinal)


def key(line: RecalledLine) -> LineKey:
    return line.episode_id, line.ordinal


def base_priority(line: RecalledLine, cfg: RecallConfig) -> float:
    """What the search alone says of a line: its dense score, plus its fused (dense and lexical) rank score."""
    return max(line.similarity, line.score) + cfg.line_fused_weight * line.fused


def priorities(
    lines: Sequence[RecalledLine],
    by_id: Mapping[int, RecalledEpisode],
    later: Mapping[int, float],
    in_named_month: set[int],
    cfg: RecallConfig,
) -> dict[LineKey, float]:
    """Each line's own priority (module docstring); the lines of episodes not in
    ``by_id`` are left out."""
    out: dict[LineKey, float] = {}
    for line in lines:
        ep = by_id.get(line.episode_id)
        if ep is None:
            continue
        out[key(line)] = (
            base_priority(line, cfg)
            + cfg.line_episode_weight * max(ep.similarity or 0.0, later.get(ep.id, 0.0))
            + (0.05 if ep.id in in_named_month else 0.0)
        )
    return out


def later_values(
    priority: Mapping[LineKey, float],
    lines: Sequence[RecalledLine],
    by_id: Mapping[int, RecalledEpisode],
    line_vectors: Mapping[LineKey, np.ndarray],
    threshold: float,
    share: float,
) -> dict[LineKey, RecalledLine]:
    """For each line, the line of the latest later session about the same thing (embeddings at least
    ``threshold`` alike) that answers the opening message nearly as well (its similarity to it at least ``share``
    of the line's): the value that holds. Fitting quotes it whenever it quotes the line, and the line only if it
    fits too, so the later value is never cut while the older is quoted (newest wins at every budget).

    Until issue 47 the later line was instead raised above the older one in priority, and so was every line alike
    to a raised one: on LoCoMo chains of alike small talk ("Keep going, Jon!") jumped ahead of the answers (answer
    coverage at 1,500 tokens, offline, tuning data: 0.505 raised, 0.567 with no rule at all). Here the rule costs
    a line only where an older line is quoted anyway."""
    shown = [line for line in lines if key(line) in priority and key(line) in line_vectors]
    if len(shown) < 2:
        return {}
    shown.sort(key=lambda line: (by_id[line.episode_id].ended_at, line.episode_id, line.ordinal))
    matrix = np.stack([line_vectors[key(line)] for line in shown])
    episode = np.array([line.episode_id for line in shown])
    ended = np.array([by_id[line.episode_id].ended_at.timestamp() for line in shown])
    asked = np.array([line.similarity for line in shown])
    # later[i, j]: line j is of a later session than line i, about the same thing, and nearly as apt
    later = (
        (matrix @ matrix.T >= threshold)
        & (ended[None, :] > ended[:, None])
        & (episode[None, :] != episode[:, None])
        & (asked[None, :] >= share * asked[:, None])
    )
    out: dict[LineKey, RecalledLine] = {}
    for i in np.flatnonzero(later.any(axis=1)):
        out[key(shown[i])] = shown[int(np.flatnonzero(later[i])[-1])]  # the latest (shown is in session order)
    return out


def line_labels(
    episodes: list[RecalledEpisode], lines: Sequence[RecalledLine], cfg: RecallConfig
) -> list[RecalledEpisode]:
    """Episodes labelled by the evidence of their lines.

    * An episode above the relevance floor whose session has lines, none at least ``relevant_line_similarity``
      similar to the opening message, is only possibly related: its summary resembles the message, nothing said
      in it does.
    * An episode with a line at least ``line_relevant`` similar to the message (or ``line_relevant_with_text``
      with a lexical match) is relevant whatever its summary: one of the best matches is said in it.
    * Any other episode a searched line brought in is possibly related.
    """
    best: dict[int, float] = {}
    strong: set[int] = set()
    for line in lines:
        best[line.episode_id] = max(best.get(line.episode_id, -1.0), line.similarity)
        if line.similarity >= cfg.line_relevant or (
            line.text_score is not None and line.similarity >= cfg.line_relevant_with_text
        ):
            strong.add(line.episode_id)
    last_related = max((ep.related_rank or 0 for ep in episodes), default=0)
    last_relevant = max((ep.relevance_rank or 0 for ep in episodes), default=0)
    for ep in episodes:
        if ep.id in strong and ep.relevance_rank is None:
            last_relevant += 1
            ep.relevance_rank, ep.related_rank = last_relevant, None
        elif ep.relevance_rank is not None and ep.id in best and best[ep.id] < cfg.relevant_line_similarity:
            last_related += 1
            ep.relevance_rank, ep.related_rank = None, last_related
        elif ep.id in best and ep.relevance_rank is None and ep.related_rank is None and ep.recency_rank is None:
            last_related += 1
            ep.related_rank = last_related
    return episodes
