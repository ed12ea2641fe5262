"""PostgreSQL's ``ts_rank(tsvector, tsquery, 1)`` for OR-queries of plain lexemes, bit for bit, in numpy.

Why: recall scores a heavy user's rows (thousands of episodes) in-process from a per-user cache and
must rank them exactly as ``sql/recall.sql`` would, whose text score is
``ts_rank(search_tsv, 'l1' | 'l2' | ..., 1)``. Equal scores must tie exactly as they do in
PostgreSQL, so every rounding step of ``calc_rank_or`` / ``calc_rank`` (src/backend/utils/adt/
tsrank.c, default weights {D 0.1, C 0.2, B 0.4, A 1.0}) is reproduced:

* per matched lexeme, in float32: ``resj = sum_j w[j] / ((j+1)^2)`` over its positions in stored
  (ascending) order (a lexeme without positions counts as one position of weight D), ``wjm`` the
  first maximal weight at index ``jm``; its contribution is the double
  ``(float)(wjm + resj - wjm / ((jm+1)^2)) / 1.64493406685`` (:func:`term_contributions`);
* ``res`` (float32) accumulates the contributions of the query's unique lexemes in the order of
  ``SortAndUniqItems`` (byte order, :func:`query_order`), each sum computed in double and rounded
  to float32; then ``res / size`` in float32 (``size`` = number of unique query lexemes), a floor of
  ``1e-20f`` below zero, and ``res / (log(len + 1) / log(2))`` computed in double and rounded to
  float32, ``len`` being the number of positions (1 for a lexeme without any) (:func:`rank`).

An empty tsvector or an empty query ranks 0. Every matching document ranks > 0, so ``rank > 0`` is
the same test as ``tsv @@ query`` for these queries. Only ``ts_rank`` with normalisation 1 and OR
(or single-lexeme) queries without prefix or weight restrictions is covered: AND and phrase
queries take another path in PostgreSQL (``calc_rank_and``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from functools import lru_cache

import numpy as np

WEIGHTS = np.array([0.1, 0.2, 0.4, 1.0], dtype=np.float32)  # D, C, B, A as float32 (0.1f, ...)
PI2_6 = 1.64493406685  # the C double constant of calc_rank_or
_WEIGHT_INDEX = {"D": 0, "C": 1, "B": 2, "A": 3}  # WEP_GETWEIGHT
_LEXEME = re.compile(r"'((?:[^'\\]|''|\\.)*)'(?::(\d+[A-D]?(?:,\d+[A-D]?)*))?(?: |$)", re.DOTALL)
_UNESCAPE = re.compile(r"''|\\(.)", re.DOTALL)

TsVector = dict[str, list[tuple[int, int]]]


def parse_tsvector(text: str) -> TsVector:
    """Parse PostgreSQL's tsvector output (``'lex':1A,5,9B 'it''s':3 'back\\\\slash'``).

    Returns ``{lexeme: [(position, weight index), ...]}`` with weight indexes D=0, C=1, B=2, A=3
    (D is not printed); a lexeme stored without positions maps to ``[]``. Lexemes are quoted with
    ``''`` for a quote and ``\\\\`` for a backslash. Raises ValueError on anything else.
    """
    result: TsVector = {}
    pos = 0
    while pos < len(text):
        m = _LEXEME.match(text, pos)
        if m is None:
            raise ValueError(f"not tsvector output at offset {pos}: {text[pos:pos + 40]!r}")
        lexeme, positions = m.groups()
        if "'" in lexeme or "\\" in lexeme:
            lexeme = _UNESCAPE.sub(lambda e: e.group(1) or "'", lexeme)
        result[lexeme] = [(int(p), 0) if p[-1] <= "9" else (int(p[:-1]), _WEIGHT_INDEX[p[-1]])
                          for p in positions.split(",")] if positions else []
        pos = m.end()
    return result


@lru_cache(maxsize=1 << 16)
def _contribution(weights: tuple[int, ...]) -> float:
    """calc_rank_or's term for one lexeme whose positions have these weight indexes, in stored order."""
    w = WEIGHTS[list(weights)]
    squares = np.arange(1, len(w) + 1, dtype=np.float32) ** 2  # (j+1)*(j+1), exact in float32
    resj = np.cumsum(w / squares, dtype=np.float32)[-1]  # float32, added left to right
    jm = int(np.argmax(w))  # the first maximum, as the strict `>` in C
    term = (w[jm] + resj) - w[jm] / squares[jm]  # float32, evaluated as C evaluates it
    return float(term) / PI2_6  # promoted to double for the double constant


def term_contributions(tsv: TsVector) -> tuple[dict[str, float], float]:
    """Per lexeme, its term of calc_rank_or's sum (a double); and the document's length divisor.

    The divisor is ``log(len + 1) / log(2.0)`` in double (``math.log`` is the C library's ``log``,
    as the server's), ``len`` counting a lexeme without positions as 1 (one position of weight D).
    An empty tsvector gets ``({}, 0.0)``; :func:`rank` ranks a document with divisor 0 as 0, as
    PostgreSQL ranks an empty tsvector. Terms depend only on the weight sequence, so they are cached.
    """
    if not tsv:
        return {}, 0.0
    contrib = {lex: _contribution(tuple(w for _, w in positions) or (0,)) for lex, positions in tsv.items()}
    return contrib, length_divisor(sum(len(positions) or 1 for positions in tsv.values()))


def length_divisor(length: int) -> float:
    """Normalisation 1's divisor for a vector of ``length`` positions (0: an empty vector, ranked 0)."""
    return math.log(float(length + 1)) / math.log(2.0) if length else 0.0


@lru_cache(maxsize=1 << 16)
def _positions_term(positions: str) -> tuple[float, int]:
    """A lexeme's term and position count from its printed positions ('1A,5,9B'; '' = none)."""
    if not positions:
        return _contribution((0,)), 1
    weights = tuple(_WEIGHT_INDEX[p[-1]] if p[-1] in "ABC" else 0 for p in positions.split(","))
    return _contribution(weights), len(weights)


def tsvector_terms(text: str) -> tuple[list[str], list[float], float]:
    """Lexemes, their terms and the length divisor straight from tsvector output text.

    The same values as :func:`term_contributions` of :func:`parse_tsvector`, several times faster
    for plain lexemes (a split, terms cached by the printed positions): what a recall's full read of
    a user's 10,000 search vectors spends its time on. Anything else goes through the general parser.
    """
    if not text:
        return [], [], 0.0
    tokens = text.split(" ")
    if "''" in text or "\\" in text or text.count("'") != 2 * len(tokens):
        terms, divisor = term_contributions(parse_tsvector(text))  # escapes, or a space inside a lexeme
        return list(terms), list(terms.values()), divisor
    split = [token.partition("':") for token in tokens]  # quotes only delimit: one token per lexeme
    values, counts = zip(*(_positions_term(pos) for _, _, pos in split), strict=True)
    return [head[1:] if sep else head[1:-1] for head, sep, _ in split], list(values), length_divisor(sum(counts))


def query_order(lexemes: Iterable[str]) -> list[str]:
    """The unique lexemes in SortAndUniqItems order: UTF-8 bytes compared as by memcmp, shorter first."""
    return sorted(set(lexemes), key=lambda lex: lex.encode())


def rank(contrib: np.ndarray, norms: np.ndarray, size: int) -> np.ndarray:
    """``ts_rank(tsv, query, 1)`` of many documents as float32, equal bit for bit to PostgreSQL's.

    contrib: ``docs × items`` float64, its columns in :func:`query_order` order, NaN (or 0) where the
    document lacks the item; columns of items no document has may be left out.
    norms: per document, the divisor from :func:`term_contributions` (0 for an empty tsvector).
    size: the number of unique lexemes in the query, present in some document or not (0 for an
    empty query: everything ranks 0).
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
