"""In-process copies of each user's scoring columns, refreshed from PostgreSQL by what changed.

Recall scores every candidate episode of a user exactly: cosine distance to the opening message
and PostgreSQL's ``ts_rank`` of its lexemes. Inside PostgreSQL that costs ~2.5 us a row on a
2-core machine (45 ms for a user with 10,000 episodes); with the scoring columns held here as numpy
arrays it is one matrix-vector product and a few array operations.

Freshness is exact, not a TTL. Every insert or update of an episode stamps ``changed_xid`` (its
top-level transaction, migration 0006), and a copy remembers the xmin horizon of the snapshot it
was read with: every transaction below that horizon had finished, so its effects were already in
the copy, and the rows to read next time are exactly those with ``changed_xid >= horizon``. A
deletion of any episode of the tenant (``episode_deletions``, an append-only log kept for a week;
deletions are rare: forget, purge, compression rebuilds) makes the next read a full one, and so
does a copy's age past a day.
Each recall reads the changes inside its own tenant-scoped transaction (row-level security
applies), so a recall always sees what a plain SQL query would have seen at that moment.

What is held per episode: id, ended_at (microseconds), importance, pinned, purpose, the unit-normalised
embedding and the per-lexeme ts_rank contributions of ``search_tsv`` (jobs.recall.text_rank). Summaries
and the rest of the chosen episodes are read fresh from the table. Memory is bounded by
``EPISODES_RECALL_CACHE_ROWS`` (least recently used users are dropped; default 300,000 rows,
~0.6 GB with 384-dimension embeddings).
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np

from jobs.db import Conn
from jobs.recall.text_rank import query_order, rank, tsvector_terms
from jobs.sql import query

FULL_READ_EVERY_S = 86_400.0


@dataclass
class Scores:
    """Scores of a user's candidate episodes (those ended by ``now`` and of an allowed purpose)."""

    ids: np.ndarray  # int64
    ended_us: np.ndarray  # int64, microseconds since the epoch
    importance: np.ndarray  # float64
    distance: np.ndarray  # float64, NaN without an embedding
    text: np.ndarray  # float64, NaN when no lexeme of the message occurs
    pinned: np.ndarray  # bool: pinned episodes do not decay (jobs.lifecycle.pins)


class UserIndex:
    """One user's candidate episodes (current, not compressed) as arrays, with text postings."""

    def __init__(self, dim: int) -> None:
        self.dim = dim
        self.horizon = 0
        self.read_at = time.monotonic()  # when it was read whole
        self.slot_of: dict[int, int] = {}
        self.size = 0  # slots used (live and dead)
        self.dead = 0
        cap = 16
        self.ids = np.zeros(cap, np.int64)
        self.ended_us = np.zeros(cap, np.int64)
        self.importance = np.zeros(cap, np.float64)
        self.pinned = np.zeros(cap, bool)
        self.purpose = np.zeros(cap, np.int32)
        self.alive = np.zeros(cap, bool)
        self.has_vec = np.zeros(cap, bool)
        self.norm = np.zeros(cap, np.float64)  # ts_rank's length normalisation divisor
        self.vectors = np.zeros((cap, dim), np.float32)  # unit length
        self.purposes: dict[str, int] = {}
        self.postings: dict[str, list[tuple[np.ndarray, np.ndarray]]] = {}  # lexeme -> chunks of (slots, terms)

    @property
    def live(self) -> int:
        return self.size - self.dead

    def _grow(self) -> None:
        cap = 2 * len(self.ids)
        for name in ("ids", "ended_us", "importance", "pinned", "purpose", "alive", "has_vec", "norm"):
            old = getattr(self, name)
            new = np.zeros(cap, old.dtype)
            new[: self.size] = old[: self.size]
            setattr(self, name, new)
        vectors = np.zeros((cap, self.dim), np.float32)
        vectors[: self.size] = self.vectors[: self.size]
        self.vectors = vectors

    def apply(self, rows: Sequence[dict[str, Any]]) -> None:
        """Take changed rows: drop any older version of each; keep those still candidates."""
        for row in rows:
            old = self.slot_of.pop(row["id"], None)
            if old is not None:
                self.alive[old] = False
                self.dead += 1
        live = [row for row in rows if row["live"]]
        while self.size + len(live) > len(self.ids):
            self._grow()
        start = self.size
        stop = start + len(live)
        self.size = stop
        parsed = [tsvector_terms(row["tsv"]) for row in live]
        for slot, row in enumerate(live, start):
            self.slot_of[row["id"]] = slot
            self.purpose[slot] = self.purposes.setdefault(row["purpose"], len(self.purposes))
        self.norm[start:stop] = [divisor for _, _, divisor in parsed]
        self._add_postings(start, parsed)
        self.ids[start:stop] = [row["id"] for row in live]
        self.ended_us[start:stop] = [row["ended_us"] for row in live]
        self.importance[start:stop] = [row["importance"] for row in live]
        self.pinned[start:stop] = [row["pinned"] for row in live]
        self.alive[start:stop] = True
        with_vec = np.array([row["embedding"] is not None for row in live], dtype=bool)
        if with_vec.any():  # vector_send: a 4-byte header, then big-endian float4s
            raw = np.frombuffer(b"".join(row["embedding"] for row in live if row["embedding"] is not None), ">f4")
            vectors = raw.reshape(-1, self.dim + 1)[:, 1:].astype(np.float32)
            lengths = np.linalg.norm(vectors.astype(np.float64), axis=1)
            usable = lengths > 0
            vectors[usable] = (vectors[usable] / lengths[usable, None]).astype(np.float32)
            self.vectors[start:stop][with_vec] = vectors
            self.has_vec[start:stop][with_vec] = usable

    def _add_postings(self, start: int, parsed: Sequence[tuple[list[str], list[float], float]]) -> None:
        """Append the new slots' lexemes to the postings: one chunk per lexeme, grouped with numpy."""
        lexemes = [lexeme for lex, _, _ in parsed for lexeme in lex]
        if not lexemes:
            return
        vocab: dict[str, int] = {}
        codes = np.fromiter((vocab.setdefault(lex, len(vocab)) for lex in lexemes), np.int64, len(lexemes))
        terms = np.fromiter((t for _, ts, _ in parsed for t in ts), np.float64, len(lexemes))
        slots = np.repeat(np.arange(start, start + len(parsed)), [len(lex) for lex, _, _ in parsed])
        order = np.argsort(codes, kind="stable")
        groups = np.split(order, np.flatnonzero(np.diff(codes[order])) + 1)
        for lexeme, group in zip(vocab, groups, strict=True):  # vocab keeps first-seen order = code order
            self.postings.setdefault(lexeme, []).append((slots[group], terms[group]))

    def _posting(self, lexeme: str) -> tuple[np.ndarray, np.ndarray] | None:
        """A lexeme's (slots, terms), its chunks merged on first use."""
        chunks = self.postings.get(lexeme)
        if not chunks:
            return None
        if len(chunks) > 1:
            chunks[:] = [(np.concatenate([c[0] for c in chunks]), np.concatenate([c[1] for c in chunks]))]
        return chunks[0]

    def scores(self, query_vector: np.ndarray, lexemes: Sequence[str], now_us: int,
               purposes: Iterable[str] | None) -> Scores:
        """Exact scores of every candidate: cosine distance and ts_rank(search_tsv, q, 1)."""
        n = self.size
        mask = self.alive[:n] & (self.ended_us[:n] <= now_us)
        if purposes is not None:
            codes = [self.purposes[p] for p in purposes if p in self.purposes]
            mask &= np.isin(self.purpose[:n], codes)
        slots = np.flatnonzero(mask)
        q = np.asarray(query_vector, dtype=np.float32)
        q_len = float(np.linalg.norm(q.astype(np.float64)))
        distance = np.full(len(slots), np.nan)
        if q_len > 0 and len(slots):
            # Every slot (cheaper than gathering the candidates first). einsum, not matmul: BLAS rounds a
            # row's dot product differently depending on where the row sits, so equal vectors would not tie.
            dots = np.einsum("ij,j->i", self.vectors[:n], q / q_len)
            distance = np.where(self.has_vec[slots], 1.0 - dots[slots].astype(np.float64), np.nan)
        text = np.full(len(slots), np.nan)
        ordered = query_order(lexemes)
        if ordered and len(slots):
            columns = np.full((n, len(ordered)), np.nan)
            for k, lexeme in enumerate(ordered):
                posting = self._posting(lexeme)
                if posting is not None:
                    columns[posting[0], k] = posting[1]
            columns = columns[slots]
            matched = ~np.isnan(columns).all(axis=1)
            if matched.any():
                text[matched] = rank(columns[matched], self.norm[slots][matched], len(ordered))
        return Scores(ids=self.ids[slots], ended_us=self.ended_us[slots], importance=self.importance[slots],
                      distance=distance, text=text, pinned=self.pinned[slots])

    def vector(self, episode_id: int) -> np.ndarray | None:
        slot = self.slot_of.get(episode_id)
        return self.vectors[slot] if slot is not None and self.has_vec[slot] else None


class RecallIndex:
    """One database's UserIndex copies, least recently used dropped past ``max_rows`` (thread-safe).

    recall() keeps one per database for the whole process (:mod:`jobs.recall.shared`).
    """

    def __init__(self, dim: int, max_rows: int = 300_000) -> None:
        self.dim = dim
        self.max_rows = max_rows
        self._users: OrderedDict[tuple[str, str], UserIndex] = OrderedDict()
        self._locks: dict[tuple[str, str], threading.Lock] = {}
        self._counted: dict[tuple[str, str], int] = {}  # slots of each copy as last counted in _rows
        self._rows = 0  # slots held over all users
        self._lock = threading.Lock()
        self.full_reads = 0  # refreshes that read a user's rows whole (first use, after a deletion)

    @property
    def users(self) -> int:
        """Users whose copy is held."""
        with self._lock:
            return len(self._users)

    @property
    def rows(self) -> int:
        """Slots held over all users' copies (live rows and replaced versions not yet compacted)."""
        with self._lock:
            return self._rows

    @contextmanager
    def user(self, conn: Conn, tenant_id: str, user_id: str, query_text: str
             ) -> Iterator[tuple[UserIndex, list[str]]]:
        """The user's copy, brought up to date in ``conn``'s tenant transaction, and the message's lexemes.

        The lexemes (to_tsvector('english', query_text)) come in the same round trip. The copy is
        held for the ``with`` block: recalls of one user take turns, others run in parallel.
        """
        key = (tenant_id, user_id)
        with self._lock:
            lock = self._locks.setdefault(key, threading.Lock())
        with lock:
            with self._lock:
                index = self._users.get(key)
            lexemes, index = self._read(conn, tenant_id, user_id, query_text, index)
            try:
                yield index, lexemes
            finally:
                with self._lock:
                    self._users[key] = index
                    self._users.move_to_end(key)
                    self._rows += index.size - self._counted.get(key, 0)
                    self._counted[key] = index.size
                    self._evict()

    def _read(self, conn: Conn, tenant_id: str, user_id: str, query_text: str,
              index: UserIndex | None) -> tuple[list[str], UserIndex]:
        if index is not None and time.monotonic() - index.read_at > FULL_READ_EVERY_S:
            index = None  # the deletion log keeps a week; a copy is read whole at least daily
        while True:
            since = index.horizon if index is not None else 0
            rows = conn.execute(query("recall_changes"), {
                "tenant_id": tenant_id, "user_id": user_id, "since": str(since), "query_text": query_text,
            }, binary=True).fetchall()
            head = rows[0]
            if index is not None and head["deleted"]:
                index = None  # an episode of the tenant was deleted since: read everything again
                continue
            if index is None:
                index = UserIndex(self.dim)
                with self._lock:  # recalls of different users read in parallel
                    self.full_reads += 1
            index.apply([row for row in rows if row["id"] is not None])
            index.horizon = int(head["horizon"])
            if index.dead > max(1024, index.live):  # mostly replaced versions: compact by reading anew
                index = None
                continue
            return list(head["lexemes"] or []), index

    def _evict(self) -> None:
        """Drop least recently used copies while over max_rows (the newest one always stays)."""
        while self._rows > self.max_rows and len(self._users) > 1:
            key, _ = self._users.popitem(last=False)
            self._rows -= self._counted.pop(key)
            self._locks.pop(key, None)

    def clear(self) -> None:
        with self._lock:
            self._users.clear()
            self._counted.clear()
            self._rows = 0
