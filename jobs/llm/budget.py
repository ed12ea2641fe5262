"""Token budgets: pack consecutive pieces into requests that fit, and reduce many partial results
to one, level by level, so no request grows with the length of the input.

Shared by extraction (a transcript longer than the budget is split into parts whose episodes are
merged) and compression (a period's episodes are packed into requests whose partial summaries are
merged). Sizes and room are in one unit of the caller's choice: estimated tokens
(:func:`jobs.tokens.estimate_tokens`) for extraction, characters of the rendered blocks for
compression (which measures each block through its template macro).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

T = TypeVar("T")


def pack(sizes: Sequence[int], room: int) -> list[list[int]]:
    """Consecutive chunks of indexes whose sizes add up to at most ``room``.

    An item larger than ``room`` alone gets a chunk of its own (the caller shrinks or splits such
    items first when it must). Every index appears exactly once, in order.
    """
    chunks: list[list[int]] = [[]]
    used = 0
    for i, size in enumerate(sizes):
        if chunks[-1] and used + size > room:
            chunks.append([])
            used = 0
        chunks[-1].append(i)
        used += size
    return chunks if chunks[0] else []


def reduce_levels(items: list[T], size: Callable[[T], int], room: int, merge: Callable[[list[T]], T]) -> T:
    """Merge ``items`` to one: pack them into groups that fit ``room``, merge every group of two or
    more with ``merge``, and repeat on the results. When every item fills the room alone, they are
    merged in pairs, so each level at least halves the count and the loop ends."""
    if not items:
        raise ValueError("nothing to reduce")
    while len(items) > 1:
        groups = pack([size(item) for item in items], room)
        if len(groups) == len(items):
            groups = [list(range(i, min(i + 2, len(items)))) for i in range(0, len(items), 2)]
        items = [items[g[0]] if len(g) == 1 else merge([items[i] for i in g]) for g in groups]
    return items[0]
