"""PostgreSQL's ``ts_rank(search_tsv, 'l1' | 'l2' | ..., 1)``, bit for bit, from each lexeme's number of positions.

Why ts_rank and not BM25: on LoCoMo (docs/benchmarks.md: each text score at its own best fusion
and relevance floor, chosen leaving one conversation out) BM25 over the user's own episodes ranked
about as well without a floor but recalled less with it (all-evidence 0.734, or 0.757 scaled to the
message's idf mass, against 0.787 for ts_rank): the floor needs a text score that separates a
user's own questions from unrelated ones, and ts_rank's length-normalised match does that better.

Why bit for bit: recall scores in-process from a per-user copy (:mod:`jobs.recall.index`), and
equal scores must tie exactly as the server's ``ts_rank`` would, so every rounding step of
``calc_rank_or`` / ``calc_rank`` (src/backend/utils/adt/tsrank.c) is reproduced. ``search_tsv`` is
always ``to_tsvector(...)`` (never ``setweight``), so every position has weight D (0.1) and a
lexeme's term depends only on its number of positions ``n`` (1 for a lexeme stored without any):

* ``resj = sum_{j<n} 0.1f / (j+1)^2`` in float32 added left to right; its term is the double
  ``(float)(0.1f + resj - 0.1f) / 1.64493406685`` (:data:`TERMS`, indexed by ``n - 1``);
* ``res`` (float32) accumulates the terms of the query's unique lexemes in ``SortAndUniqItems``
  order (bytes compared as by memcmp, :func:`query_order`), each sum in double rounded to float32;
  then ``res / size`` in float32 (``size`` = unique query lexemes), a floor of ``1e-20f`` below
  zero, and ``res / (log(len + 1) / log(2))`` in double rounded to float32, ``len`` being the
  document's number of positions (:func:`length_divisors`, :func:`rank`).

An empty tsvector or an empty query ranks 0; every matching document ranks > 0.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np

WEIGHT_D = np.float32(0.1)
PI2_6 = 1.64493406685  # the C double constant of calc_rank_or
MAX_POSITIONS = 256  # a tsvector keeps at most 256 positions a lexeme (MAXNUMPOS)


def _terms() -> np.ndarray:
    """calc_rank_or's term for a lexeme of 1 .. 256 weight-D positions (index n - 1)."""
    out = np.zeros(MAX_POSITIONS)
    resj = np.float32(0)
    for j in range(MAX_POSITIONS):
        resj = np.float32(resj + WEIGHT_D / np.float32((j + 1) * (j + 1)))
        out[j] = float(np.float32(np.float32(WEIGHT_D + resj) - WEIGHT_D)) / PI2_6
    return out


TERMS = _terms()


def length_divisors(lengths: np.ndarray) -> np.ndarray:
    """Normalisation 1's divisor per document of ``lengths`` positions (0 for an empty vector, ranked 0).

    ``log(len + 1) / log(2.0)`` with the C library's ``log`` (``math.log``, as the server's), once per
    distinct length.
    """
    values, inverse = np.unique(lengths, return_inverse=True)
    table = np.array([math.log(float(v + 1)) / math.log(2.0) if v else 0.0 for v in values.tolist()])
    return table[inverse].reshape(np.shape(lengths))


def query_order(lexemes: Iterable[bytes]) -> list[bytes]:
    """The unique lexemes in SortAndUniqItems order: bytes compared as by memcmp, shorter first."""
    return sorted(set(lexemes))


def rank(contrib: np.ndarray, norms: np.ndarray, size: int) -> np.ndarray:
    """``ts_rank(tsv, query, 1)`` of many documents as float32, equal bit for bit to PostgreSQL's.

    contrib: ``docs × items`` float64 of :data:`TERMS` values, its columns in :func:`query_order`
    order, NaN (or 0) where the document lacks the item; columns of items no document has may be
    left out. norms: per document, from :func:`length_divisors`. size: the number of unique lexemes
    in the query, present in some document or not (0 for an empty query: everything ranks 0).
    """
    contrib = np.asarray(contrib, dtype=np.float64).reshape(len(norms), -1)
    norms = np.asarray(norms, dtype=np.float64)
    res = np.zeros(len(norms), dtype=np.float32)
    if size == 0:
        return res
    for column in np.nan_to_num(contrib, nan=0.0).T:  # res + 0.0 leaves res unchanged
        res = (res.astype(np.float64) + column).astype(np.float32)
    res = res / np.float32(size)
    res = np.where(res < 0, np.float32(1e-20), res)
    with np.errstate(divide="ignore", invalid="ignore"):
        normalised = (res.astype(np.float64) / norms).astype(np.float32)
    return np.where(norms > 0, normalised, np.float32(0))
