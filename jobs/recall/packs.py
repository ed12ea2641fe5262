"""Packs: a heavy user's recall copy kept in PostgreSQL as it is held in memory (migration 0021).

A user's first recall in a process builds the copy (:mod:`jobs.recall.index`) from every row of the
user: for 10,000 episodes the statement alone costs ~100-140 ms on 2 cores (vector_send of each row,
heap pages scattered over the table), and building the copy another ~40 ms. A pack is that copy
after a full read, each array one bytea (``UserIndex.pack``), with the counter version and epoch it
holds every change up to. A cold copy reads the pack (``read_pack``: a few bytea columns, each one
``np.frombuffer``) and then what changed since its version, exactly as a warm copy does; a pack is only
ever a starting point. One whose counter has seen a deletion since, or that belongs to another counter
(the user was erased and came back) is not read, and the user is read whole as before.

Who writes: the process that just read a user whole, if the user has at least
``Settings.recall_pack_rows`` candidates. It holds the copy already, so a pack costs no extra read; it
is written by one background thread per database (:class:`PackWriter`), in its own short transaction
in the user's tenant, off the request path. The recall that read the user does not wait for it.

A write never makes a recall wrong, and never keeps erased content: it locks the user's counter row
where it is still at the pack's version (a trigger on ``recall_packs``); an erasure moves the counter
only after that lock, and its trigger then drops the pack in the erasing transaction (migration 0021).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from jobs.db import Conn, Database
from jobs.sql import query

log = logging.getLogger(__name__)


def read_pack(
    conn: Conn, tenant_id: str, user_id: str, dim: int, sql: Callable[[str], str] = query
) -> dict[str, Any] | None:
    """The user's pack if the changes since its version can bring it up to date, else None (one round trip).
    ``sql``: the texts of the transaction's statements (jobs.db.TenantRead.query)."""
    return conn.execute(
        sql("recall_pack"), {"tenant_id": tenant_id, "user_id": user_id, "dim": dim}, binary=True
    ).fetchone()


def write_pack(conn: Conn, tenant_id: str, user_id: str, pack: dict[str, Any]) -> bool:
    """Store ``pack`` (``UserIndex.pack``) in ``conn``'s tenant transaction, if the user's counter is still
    at its version (else nothing: the next full read offers a newer one). Returns whether it was stored;
    the counter stays locked to the end of the transaction (migration 0021)."""
    cursor = conn.execute(query("recall_pack_write"), {"tenant_id": tenant_id, "user_id": user_id, **pack})
    return cursor.fetchone() is not None


class PackWriter:
    """One thread that writes the packs offered to it, one at a time, newest per user (thread-safe).

    Offers beyond ``max_pending`` waiting packs are dropped (each is up to ~16 MB; a later full read of
    the user offers again). Errors are logged, never raised: a pack only saves time.
    """

    def __init__(self, db: Database, min_rows: int, max_pending: int = 4) -> None:
        self.db = db
        self.min_rows = min_rows  # users with fewer candidates get no pack
        self.max_pending = max_pending
        self.written = 0
        self._pending: dict[tuple[str, str], dict[str, Any]] = {}
        self._cond = threading.Condition()
        self._busy = False
        self._closed = False
        self._thread: threading.Thread | None = None

    def offer(self, tenant_id: str, user_id: str, pack: dict[str, Any]) -> None:
        """Queue the pack of a copy just read whole; returns at once."""
        with self._cond:
            key = (tenant_id, user_id)
            if self._closed or (key not in self._pending and len(self._pending) >= self.max_pending):
                return
            self._pending[key] = pack
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="episodes-recall-packs", daemon=True)
                self._thread.start()
            self._cond.notify()

    @property
    def pending(self) -> int:
        """Packs waiting to be written."""
        with self._cond:
            return len(self._pending)

    def discard(self, tenant_id: str, user_id: str) -> None:
        """Drop the user's pack if it waits to be written (the user was erased: the write would be refused,
        but the pack's arrays would stay in memory until then)."""
        with self._cond:
            self._pending.pop((tenant_id, user_id), None)

    def flush(self, timeout: float = 30.0) -> bool:
        """Wait until every pack offered so far is written (or refused). For tests and benchmarks."""
        with self._cond:
            return self._cond.wait_for(lambda: not self._pending and not self._busy, timeout)

    def close(self) -> None:
        """Drop what is waiting, let a write under way finish, close the connections."""
        with self._cond:
            self._closed = True
            self._pending.clear()
            self._cond.notify_all()
            thread = self._thread
        if thread is not None:
            thread.join()
        self.db.close()

    def _run(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._pending or self._closed)
                if self._closed:
                    return
                key = next(iter(self._pending))
                pack = self._pending.pop(key)
                self._busy = True
            try:
                with self.db.tenant(key[0]) as conn:
                    written = write_pack(conn, key[0], key[1], pack)
                if written:
                    self.written += 1
            except Exception:  # a lost pack costs the user's next first recall a full read, nothing else
                log.warning(
                    "could not write the recall pack of a user of tenant %s",
                    key[0],
                    exc_info=True,
                    extra={"action": "recall_pack_write"},
                )
            finally:
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()
