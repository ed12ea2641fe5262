"""In-process copies of each user's scoring columns, refreshed from PostgreSQL by what changed.

Recall scores every candidate episode of a user exactly: cosine distance to the opening message
and PostgreSQL's ``ts_rank`` of its lexemes, reproduced bit for bit (:mod:`jobs.recall.text_rank`). Inside PostgreSQL that costs ~2.5 us a row on a
2-core machine (45 ms for a user with 10,000 episodes); with the scoring columns held here as numpy
arrays it is one matrix-vector product and a few array operations.

Freshness is exact, not a TTL. Every transaction that inserts, updates or deletes one of a user's
episodes bumps the user's change counter (``recall_versions``, migration 0016) and stamps the rows it
writes with the new value (``changed_version``). The counter's row lock makes a user's writers take
turns, so their counters commit in order: a copy remembers the counter it was read at, and the rows
to read next time are exactly those with ``changed_version`` above it. A deletion (``deleted_version``
above the copy's) makes the next read a full one, and so does a counter that is gone or another one
(its ``epoch``, migration 0019: ``episodes forget`` deletes the counter, and a user who comes back starts
a new one at 1). The counter is data beside the user's rows, not a transaction id, so it holds on a
Citus cluster, where each node counts its own transactions and a moved shard keeps the ids of the node
it left; the counter and the rows are read by one statement that names the tenant, so on a cluster it
runs whole on the node holding them, from one snapshot.
Each recall reads the changes inside its own tenant-scoped transaction (row-level security
applies), so a recall always sees what a plain SQL query would have seen at that moment.

What is held per episode: id, ended_at (microseconds), importance, pinned, purpose, the unit-normalised
embedding, the number of positions of ``search_tsv`` and per lexeme the episodes holding it with
its number of positions there. Summaries and the rest of the chosen episodes are read fresh from the table.

A read, whole or of what changed, is one statement returning one row: each column (ids, times,
vectors, lexemes, position counts of every changed row) is one bytea that one numpy call converts,
so a user's first recall in a process parses no row on its own in Python (``recall_changes``,
migration 0013, :mod:`jobs.recall.postings`). A heavy user's copy can start from its pack instead (the
copy as held here after a full read, stored by :mod:`jobs.recall.packs`, migration 0021): one more
statement reads its arrays, then the changes since its version are read as for a warm copy. Memory is bounded by
``EPISODES_RECALL_CACHE_ROWS`` (least recently used users are dropped; default 300,000 rows,
~0.6 GB with 384-dimension embeddings). An erasure committed in this process drops the copies of the
users concerned from every index at once (:mod:`jobs.recall.erasures`).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import repeat
from typing import Any, NamedTuple
from uuid import UUID

import numpy as np

from jobs.db import Conn, one
from jobs.embeddings.recorded import Recorded
from jobs.recall.erasures import follow_erasures
from jobs.recall.packs import PackWriter, read_pack
from jobs.recall.postings import Posting, Postings
from jobs.recall.text_rank import TERMS, length_divisors, query_order, rank
from jobs.recall.turns import Turns
from jobs.sql import query


@dataclass
class Scores:
    """Scores of a user's candidate episodes (those ended by ``now`` and of an allowed purpose)."""

    ids: np.ndarray  # int64
    ended_us: np.ndarray  # int64, microseconds since the epoch
    importance: np.ndarray  # float64
    distance: np.ndarray  # float64, NaN without an embedding
    text: np.ndarray  # float64, ts_rank(search_tsv, q, 1) (a float32 value); NaN when no lexeme of the message occurs
    pinned: np.ndarray  # bool: pinned episodes do not decay (jobs.lifecycle.pins)


# A whole read (or a pack) is one row of about 1.6 KB per episode: 8 MB for 5,000. On a Citus node the
# executor holds a statement's result in a tuplestore, which spills to a temporary file past work_mem
# (4 MB by default): a 5,000-episode read took 90 ms against 64 ms with this (bench/README). Set for
# the recall's transaction only (SET LOCAL travels with it to a worker); one node does not spill, so
# it costs a utility statement there and changes nothing else.
WHOLE_READ_MEMORY = "SET LOCAL work_mem = '64MB'"


class Read(NamedTuple):
    """A user's copy, brought up to date in a recall's transaction, and the opening message's terms."""

    copy: UserIndex
    lexemes: list[bytes]  # to_tsvector('english', message), encoded: what the text score looks up


class UserIndex:
    """One user's candidate episodes (current, not compressed) as arrays, with text postings."""

    def __init__(self, dim: int) -> None:
        self.dim = dim
        self.version = 0  # the user's change counter this copy holds every change up to
        self.epoch: UUID | None = None  # which counter that is (recall_versions.epoch, migration 0019)
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
        self.norm = np.zeros(cap, np.float64)  # ts_rank's length divisor of search_tsv's positions
        self.vectors = np.zeros((cap, dim), np.float32)  # unit length
        self.purposes: dict[str, int] = {}
        # lexeme -> chunks of (slots, positions - 1). Tuples of arrays, never lists: the cyclic garbage
        # collector stops tracking a tuple (and then the dict) that holds only arrays, while every list
        # stays tracked, and a service holding 1M episodes' copies paid for scanning them in every full
        # collection (pauses of 0.1-0.6 s under load, measured).
        self.postings: dict[bytes, tuple[Posting, ...]] = {}
        self.first_read: Postings | None = None  # the first read's postings, moved to `postings` as asked for

    @property
    def live(self) -> int:
        return self.size - self.dead

    def _reserve(self, slots: int) -> None:
        cap = max(len(self.ids), 16)
        while cap < slots:
            cap *= 2
        if cap == len(self.ids):
            return
        for name in ("ids", "ended_us", "importance", "pinned", "purpose", "alive", "has_vec", "norm"):
            old = getattr(self, name)
            new = np.zeros(cap, old.dtype)
            new[: self.size] = old[: self.size]
            setattr(self, name, new)
        vectors = np.zeros((cap, self.dim), np.float32)
        vectors[: self.size] = self.vectors[: self.size]
        self.vectors = vectors

    def apply(self, row: dict[str, Any]) -> None:
        """Take the changed rows (``recall_changes``' one row of columns): drop any older version of
        each; keep those still candidates. Each column is converted whole; no row is parsed on its own."""
        ids = np.frombuffer(row["ids"], ">i8").astype(np.int64)
        if self.slot_of:
            old = [slot for slot in map(self.slot_of.pop, ids.tolist(), repeat(None)) if slot is not None]
            self.alive[old] = False
            self.dead += len(old)
        ids = ids[np.frombuffer(row["live"], bool)]
        n = len(ids)
        if not n:
            return
        start, stop = self.size, self.size + n
        self._reserve(stop)
        self.size = stop
        self.slot_of.update(zip(ids.tolist(), range(start, stop)))
        self.ids[start:stop] = ids
        self.ended_us[start:stop] = np.frombuffer(row["ended_us"], ">i8")
        self.importance[start:stop] = np.frombuffer(row["importance"], ">f8")
        self.pinned[start:stop] = np.frombuffer(row["pinned"], bool)
        for purpose in dict.fromkeys(row["purposes"]):
            self.purposes.setdefault(purpose, len(self.purposes))
        self.purpose[start:stop] = np.fromiter(map(self.purposes.__getitem__, row["purposes"]), np.int32, n)
        self.alive[start:stop] = True
        self._add_vectors(start, np.frombuffer(row["has_vec"], bool), row["vectors"])
        counts = np.frombuffer(row["lexeme_counts"], ">i4").astype(np.int64)
        postings = Postings.read(start, counts, row["lexemes"] or b"", row["tf"] or b"")
        self.norm[start:stop] = length_divisors(postings.lengths)
        if start == 0 and self.first_read is None:
            self.first_read = postings  # the whole user at once: no Python object per lexeme until asked for
        else:
            held = self.postings
            for lexeme, chunk in postings.items():
                held[lexeme] = (*held.get(lexeme, ()), chunk)

    def _add_vectors(self, start: int, with_vec: np.ndarray, vectors: bytes | None) -> None:
        """The new slots' vectors, unit length, from vector_send's form: a 4-byte header, then big-endian float4s."""
        if vectors is None:
            return
        raw = np.frombuffer(vectors, ">f4").reshape(-1, self.dim + 1)[:, 1:].astype(np.float32)
        # Lengths in float32 and the division in place: a float64 copy of every vector cost a heavy
        # user's first recall ~20 ms; float32 rounding of a length moves a cosine by < 1e-6.
        lengths = np.sqrt(np.einsum("ij,ij->i", raw, raw))
        usable = lengths > 0
        np.divide(raw, lengths[:, None], out=raw, where=usable[:, None])
        slots = start + np.flatnonzero(with_vec)
        self.vectors[slots] = raw
        self.has_vec[slots] = usable

    def pack(self) -> dict[str, Any]:
        """This copy as ``recall_packs``' columns (migration 0021): each array's bytes, the postings grouped
        per lexeme as held here. Only of a copy just read whole (every slot live, the postings still the
        first read's), which is when :mod:`jobs.recall.packs` writes one."""
        first = self.first_read
        if self.dead or self.postings or first is None:
            raise ValueError("only a copy just read whole is packed")
        n = self.size
        lexemes = sorted(first.codes, key=first.codes.__getitem__)  # in bounds' order (codes are 0, 1, ...)

        def raw(values: np.ndarray, dtype: str) -> bytes:
            return np.ascontiguousarray(values, dtype).tobytes()

        return {
            "version": self.version,
            "epoch": self.epoch,
            "dim": self.dim,
            "rows": n,
            "ids": raw(self.ids[:n], "<i8"),
            "ended_us": raw(self.ended_us[:n], "<i8"),
            "importance": raw(self.importance[:n], "<f8"),
            "pinned": raw(self.pinned[:n], "?"),
            "purpose": raw(self.purpose[:n], "<i4"),
            "purposes": list(self.purposes),
            "has_vec": raw(self.has_vec[:n], "?"),
            "vectors": raw(self.vectors[:n], "<f4"),
            "lengths": raw(first.lengths, "<i8"),
            "lexemes": b"".join(x + b"\0" for x in lexemes),
            "bounds": raw(first.bounds, "<i8"),
            "slots": raw(first.slots, "<i4"),
            "tf": raw(first.tf, "u1"),
        }

    @classmethod
    def from_pack(cls, row: dict[str, Any]) -> UserIndex:
        """The copy :meth:`pack` wrote, as it was: one ``np.frombuffer`` a column, nothing per row.

        The arrays stay read-only views of the row's bytes, held at exactly ``rows`` slots: a change
        read later only writes slots beyond them, which _reserve first moves into new arrays, and
        ``alive`` (the one array changed in place, when a row is replaced) is made here."""
        index = cls(int(row["dim"]))
        n = int(row["rows"])
        index.version, index.epoch = int(row["version"]), row["epoch"]
        index.size = n
        index.ids = np.frombuffer(row["ids"], "<i8")
        index.ended_us = np.frombuffer(row["ended_us"], "<i8")
        index.importance = np.frombuffer(row["importance"], "<f8")
        index.pinned = np.frombuffer(row["pinned"], bool)
        index.purpose = np.frombuffer(row["purpose"], "<i4")
        index.purposes = dict(zip(row["purposes"], range(len(row["purposes"]))))
        index.alive = np.ones(n, bool)
        index.has_vec = np.frombuffer(row["has_vec"], bool)
        index.vectors = np.frombuffer(row["vectors"], "<f4").reshape(n, index.dim)
        index.slot_of = dict(zip(index.ids.tolist(), range(n)))
        lengths = np.frombuffer(row["lengths"], "<i8")
        index.norm = length_divisors(lengths)
        lexemes = row["lexemes"].split(b"\0")[:-1]
        index.first_read = Postings(
            dict(zip(lexemes, range(len(lexemes)))),
            np.frombuffer(row["bounds"], "<i8"),
            np.frombuffer(row["slots"], "<i4"),
            np.frombuffer(row["tf"], np.uint8),
            lengths,
        )
        return index

    def _posting(self, lexeme: bytes) -> Posting | None:
        """A lexeme's (slots, positions - 1), its chunks merged on first use."""
        if self.first_read is not None and (chunk := self.first_read.pop(lexeme)) is not None:
            self.postings[lexeme] = (chunk, *self.postings.get(lexeme, ()))
        chunks = self.postings.get(lexeme)
        if not chunks:
            return None
        if len(chunks) > 1:
            chunks = self.postings[lexeme] = (
                (np.concatenate([c[0] for c in chunks]), np.concatenate([c[1] for c in chunks])),
            )
        return chunks[0]

    def scores(
        self, query_vector: np.ndarray, lexemes: Iterable[bytes], now_us: int, purposes: Iterable[str] | None
    ) -> Scores:
        """Exact scores of every candidate: cosine distance and ts_rank(search_tsv, q, 1)."""
        n = self.size
        slots = np.flatnonzero(self._candidate(slice(0, n), now_us, purposes))
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
                    columns[posting[0], k] = TERMS[posting[1]]
            columns = columns[slots]
            matched = ~np.isnan(columns).all(axis=1)
            if matched.any():
                text[matched] = rank(columns[matched], self.norm[slots][matched], len(ordered))
        return Scores(
            ids=self.ids[slots],
            ended_us=self.ended_us[slots],
            importance=self.importance[slots],
            distance=distance,
            text=text,
            pinned=self.pinned[slots],
        )

    def candidates(self, episode_ids: Iterable[int], now_us: int, purposes: Iterable[str] | None) -> list[bool]:
        """Whether each episode is a candidate, as :meth:`scores` counts them (one not held is not)."""
        slots = np.fromiter((self.slot_of.get(i, -1) for i in episode_ids), np.int64)
        held = slots >= 0
        out = np.zeros(len(slots), bool)
        out[held] = self._candidate(slots[held], now_us, purposes)
        return out.tolist()

    def _candidate(self, slots: slice | np.ndarray, now_us: int, purposes: Iterable[str] | None) -> np.ndarray:
        """Of these slots, the candidates: live (current, not compressed), ended by ``now_us``, of an
        allowed purpose."""
        mask = self.alive[slots] & (self.ended_us[slots] <= now_us)
        if purposes is not None:
            mask &= np.isin(self.purpose[slots], [self.purposes[p] for p in purposes if p in self.purposes])
        return mask

    def vector(self, episode_id: int) -> np.ndarray | None:
        slot = self.slot_of.get(episode_id)
        return self.vectors[slot] if slot is not None and self.has_vec[slot] else None


class RecallIndex:
    """One database's UserIndex copies, least recently used dropped past ``max_rows`` (thread-safe).

    recall() keeps one per database for the whole process (:mod:`jobs.recall.shared`).
    """

    def __init__(self, dim: int, max_rows: int = 300_000, packs: PackWriter | None = None) -> None:
        self.dim = dim
        self.max_rows = max_rows
        self.packs = packs  # writes back the packs of heavy users' full reads; packs are read either way
        self._users: OrderedDict[tuple[str, str], UserIndex] = OrderedDict()
        self._turns = Turns()  # recalls of one user take turns, whatever happens to its copy meanwhile
        self._counted: dict[tuple[str, str], int] = {}  # slots of each copy as last counted in _rows
        self._rows = 0  # slots held over all users
        self._lock = threading.Lock()
        self.full_reads = 0  # refreshes that read a user's rows whole (first use, after a deletion)
        self.pack_reads = 0  # first uses that started from the user's pack (jobs.recall.packs)
        follow_erasures(self)

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
    def user(
        self,
        conn: Conn,
        tenant_id: str,
        user_id: str,
        query_text: str,
        accept: Callable[[Recorded], bool] = lambda recorded: True,
        sql: Callable[[str], str] = query,
    ) -> Iterator[Read | None]:
        """The user's copy, brought up to date in ``conn``'s tenant transaction, and the message's terms.

        The terms (to_tsvector('english', query_text)) come in the same round trip. The copy is
        held for the ``with`` block: recalls of one user take turns, others run in parallel.
        ``accept`` is asked whenever a copy is read from the start (whole, or from a pack), before the
        copy takes the read, with the embedder the database records in the read's snapshot (the vectors
        are of it). If it says no (the recaller follows a switch by `episodes reembed`), the copy is left
        as it was and the block gets None. A warm copy is not asked again: a switch resets every copy,
        so its next read is from the start. The copies are thus checked once for every caller, and
        callers that share an index must embed with one embedder (jobs.recall.shared keys it so).
        ``sql`` gives the texts of the statements (jobs.db.TenantRead.query: on a Citus worker, the
        tenant's shard tables).
        """
        key = (tenant_id, user_id)
        with self._turns.turn(key):
            with self._lock:
                index = self._users.get(key)
            read = self._read(conn, tenant_id, user_id, query_text, index, accept, sql)
            if read is None:
                yield None
                return
            index = read.copy
            try:
                yield read
            finally:
                with self._lock:
                    self._users[key] = index
                    self._users.move_to_end(key)
                    self._rows += index.size - self._counted.get(key, 0)
                    self._counted[key] = index.size
                    self._evict()

    def _read(
        self,
        conn: Conn,
        tenant_id: str,
        user_id: str,
        query_text: str,
        index: UserIndex | None,
        accept: Callable[[Recorded], bool],
        sql: Callable[[str], str],
    ) -> Read | None:
        roomy = index is None  # WHOLE_READ_MEMORY set in this transaction (a pack is as large as a whole read)
        if roomy:
            conn.execute(WHOLE_READ_MEMORY)
        from_pack = False
        if index is None and (pack := read_pack(conn, tenant_id, user_id, self.dim, sql)) is not None:
            index, from_pack = UserIndex.from_pack(pack), True
            with self._lock:
                self.pack_reads += 1  # then read like a warm copy: what changed since the pack's version
        read_whole = False
        while True:
            since, epoch = (index.version, index.epoch) if index is not None else (0, None)
            if index is None and not roomy:  # a reset or a compaction below: a whole read after all
                conn.execute(WHOLE_READ_MEMORY)
                roomy = True
            # A copy's first read (whole, or from a pack) brings the embedder its vectors are of, and
            # ``accept`` is asked. A warm copy was asked when it was first read, and a switch since then
            # (`episodes reembed`) would reset it below: its later reads leave the record out. (Every
            # later turn of this loop reads from the start: index is None then.)
            recorded = index is None or from_pack
            row = one(
                conn.execute(
                    sql("recall_changes_recorded" if recorded else "recall_changes"),
                    {
                        "tenant_id": tenant_id,
                        "user_id": user_id,
                        "since": since,
                        "epoch": epoch,
                        "query_text": query_text,
                    },
                    binary=True,
                )
            )
            if recorded and not accept(Recorded(str(row["embedder"]), int(row["embedding_dim"]))):
                return None
            if index is not None and row["reset"]:
                index = None  # an episode deleted since, or the user erased: read everything again
                continue
            if index is None:
                index = UserIndex(self.dim)
                read_whole = True
                with self._lock:  # recalls of different users read in parallel
                    self.full_reads += 1
            if row["changed"]:
                index.apply(row)
            index.version, index.epoch = int(row["version"]), row["epoch"]
            if index.dead > max(1024, index.live):  # mostly replaced versions: compact by reading anew
                index = None
                continue
            if read_whole and self.packs is not None and index.live >= self.packs.min_rows:
                self.packs.offer(tenant_id, user_id, index.pack())  # written later, on another connection
            encoding = conn.info.encoding
            return Read(index, [lexeme.encode(encoding) for lexeme in row["query_lexemes"] or []])

    def _evict(self) -> None:
        """Drop least recently used copies while over max_rows (the newest one always stays). A copy in
        use goes from the cache only: its recall goes on with it, and puts it back when done."""
        while self._rows > self.max_rows and len(self._users) > 1:
            key, _ = self._users.popitem(last=False)
            self._rows -= self._counted.pop(key)

    def holds(self, tenant_id: str, user_id: str) -> bool:
        """Whether a copy of the user is held."""
        with self._lock:
            return (tenant_id, user_id) in self._users

    def drop(self, tenant_id: str, user_id: str) -> bool:
        """Drop the user's copy (and a pack of it waiting to be written), e.g. once the user was erased.

        Waits for a recall at work on the copy: it puts the copy back when done, which would outlive a drop
        made meanwhile. A recall that comes after reads the user anew. Returns whether a copy was held."""
        key = (tenant_id, user_id)
        with self._turns.turn(key), self._lock:
            held = self._users.pop(key, None) is not None
            if held:
                self._rows -= self._counted.pop(key)
        if self.packs is not None:
            self.packs.discard(tenant_id, user_id)
        return held

    def clear(self) -> None:
        with self._lock:
            self._users.clear()
            self._counted.clear()
            self._rows = 0
