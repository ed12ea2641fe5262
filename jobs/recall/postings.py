"""The text postings of many episodes at once, built from ``recall_changes``' columns as a whole.

A user's first recall in a process reads all the user's episodes (10,000 and ~180,000 lexemes for a
heavy user of the benchmark). The lexemes arrive NUL-separated in one bytea, their numbers of
positions as one byte each (``search_tf``, migration 0013: positions minus one), so the work per lexeme is a few C-level steps (a
split, a dict lookup through ``map``) and the rest is numpy: the postings are grouped by sorting
lexeme codes, and no Python object is made per lexeme until a message asks for it.

Lexemes stay bytes in the connection's encoding; a message's lexemes are encoded to look them up.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import count

import numpy as np

Posting = tuple[np.ndarray, np.ndarray]  # (slots, positions - 1 as uint8) of one lexeme


def split_lexemes(lexeme_bytes: bytes) -> list[bytes]:
    """The lexemes of tsvectorsend(strip(tsv)) without its count (of one row or many joined): each ends in three NULs."""
    return lexeme_bytes.split(b"\0\0\0")[:-1]


class Postings:
    """Per lexeme, the slots it occurs in and its number of positions there, for a run of consecutive slots.

    Held as one array of slots and one of counts (minus one, as stored) sorted by lexeme, with where
    each lexeme's run starts (``bounds``). ``lengths`` is each slot's number of positions (ts_rank's
    document length).
    """

    def __init__(
        self, codes: dict[bytes, int], bounds: np.ndarray, slots: np.ndarray, tf: np.ndarray, lengths: np.ndarray
    ) -> None:
        self.codes = codes  # lexeme -> its position in bounds
        self.bounds = bounds
        self.slots = slots
        self.tf = tf
        self.lengths = lengths

    @classmethod
    def read(cls, start: int, lexeme_counts: np.ndarray, lexeme_bytes: bytes, tf: bytes) -> Postings:
        """The postings of slots ``start``, ``start + 1``, ... (one per entry of ``lexeme_counts``)."""
        n = len(lexeme_counts)
        total = int(lexeme_counts.sum())
        lexemes = split_lexemes(lexeme_bytes)
        freq = np.frombuffer(tf, np.uint8)
        if len(lexemes) != total or len(freq) != total:
            raise RuntimeError(
                f"recall_changes gave {len(lexemes)} lexemes and {len(freq)} position counts "
                f"for {total} lexemes of search_tsv"
            )
        slots = np.repeat(np.arange(start, start + n), lexeme_counts)
        lengths = np.bincount(slots - start, weights=freq.astype(np.int64) + 1, minlength=n).astype(np.int64)
        # Each lexeme's code: the number of distinct lexemes seen before its first occurrence.
        first_seen: dict[bytes, int] = {}
        first = np.fromiter(map(first_seen.setdefault, lexemes, count()), np.int64, total)
        codes = (np.cumsum(first == np.arange(total)) - 1)[first]
        order = np.argsort(codes.astype(np.uint16) if len(first_seen) <= 1 << 16 else codes, kind="stable")  # radix
        bounds = np.zeros(len(first_seen) + 1, np.int64)
        np.cumsum(np.bincount(codes, minlength=len(first_seen)), out=bounds[1:])
        return cls(dict(zip(first_seen, range(len(first_seen)))), bounds, slots[order], freq[order], lengths)

    def pop(self, lexeme: bytes) -> Posting | None:
        """The lexeme's (slots, positions - 1), removed from here; None when it occurs nowhere here."""
        code = self.codes.pop(lexeme, None)
        if code is None:
            return None
        lo, hi = int(self.bounds[code]), int(self.bounds[code + 1])
        return self.slots[lo:hi], self.tf[lo:hi]

    def items(self) -> Iterator[tuple[bytes, Posting]]:
        """Every lexeme with its (slots, positions - 1)."""
        bounds = self.bounds.tolist()
        for lexeme, code in self.codes.items():
            lo, hi = bounds[code], bounds[code + 1]
            yield lexeme, (self.slots[lo:hi], self.tf[lo:hi])
