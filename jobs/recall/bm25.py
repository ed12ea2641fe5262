"""The text score of recall: BM25 over the user's own episodes, computed in the recalling process.

Why not PostgreSQL's ``ts_rank``: it has no idea how common a word is, so "Caroline" in a user's
every episode counts as much as "adoption" in one of them, and an opening message's commonest
words decide the text ranking. BM25 (Robertson and Zaragoza, "The Probabilistic Relevance
Framework: BM25 and Beyond", 2009) weights each matched term by its inverse document frequency among
the *user's* live episodes (other users' rows never enter: the copy holds one user), saturates
repeated occurrences and normalises by the episode's length:

    score(d) = sum over the message's distinct lexemes t found in d of
               idf(t) * tf(t, d) * (k1 + 1) / (tf(t, d) + k1 * (1 - b + b * len(d) / avglen))
    idf(t)   = ln(1 + (N - df(t) + 0.5) / (df(t) + 0.5))         (always > 0, as in Lucene)

divided by idf of a term found in one episode (``idf(1, N)``), so the score is in units of "the
rarest possible match": a per-user constant that leaves the ranking as it is but lets one threshold
of the relevance floor (``RecallConfig.relevant_text``) mean the same for a user of 20 episodes as
for one of 10,000 (raw idf grows with ln N). N is the number of the user's live episodes, df(t) how many of them hold t, len(d) the number of
positions of d's search_tsv (a lexeme stored without positions counts 1), avglen their mean over the
live episodes. The lexemes are those of ``to_tsvector('english', ...)`` on both sides (stemmed, stop
words dropped), so text matching is still PostgreSQL's; only the weighting is ours. Every term is
added in one fixed order (the lexemes sorted), so a score depends only on the user's live episodes,
never on the order they were read in: a copy kept up to date change by change scores exactly as a
fresh read.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

K1 = 1.2  # how quickly repeated occurrences saturate (the usual 1.2)
B = 0.75  # how much an episode's length normalises its score (the usual 0.75)

Posting = tuple[np.ndarray, np.ndarray]  # (slots, term frequencies) of one lexeme


def idf(df: int, n: int) -> float:
    """The inverse document frequency of a term found in ``df`` of ``n`` episodes."""
    return float(np.log1p((n - df + 0.5) / (df + 0.5)))


def scores(postings: Sequence[Posting], alive: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """BM25 of every slot for the given terms' postings (in the order they are added); NaN where none matches.

    ``alive`` marks the live slots (others are replaced versions: they neither score nor count in
    N, df or avglen); ``lengths`` is each slot's number of positions.
    """
    out = np.full(len(alive), np.nan)
    n = int(np.count_nonzero(alive))
    if n == 0:
        return out
    avglen = float(np.sum(lengths[alive])) / n
    unit = idf(1, n)
    for slots, tf in postings:
        keep = alive[slots]
        slots, freq = slots[keep], tf[keep].astype(np.float64)
        if not len(slots):
            continue
        norm = K1 * (1.0 - B + B * lengths[slots] / avglen)
        term = idf(len(slots), n) / unit * freq * (K1 + 1.0) / (freq + norm)
        out[slots] = np.where(np.isnan(out[slots]), 0.0, out[slots]) + term
    return out
