"""The process-wide recallers behind :func:`recall`, the documented one-call API.

A Recaller's worth is what it keeps between calls: the per-user copies of the scoring columns
(:class:`~jobs.recall.index.RecallIndex`), which turn a user's next recall from a full read of
their rows into a read of what changed. A ``recall()`` that built a Recaller per call threw that
away every time, so only callers who knew to keep a Recaller had it. Now every call draws on one
registry per process:

* one RecallIndex per database URL (and embedder, ``EPISODES_RECALL_CACHE_ROWS`` and ``Settings.recall_pack_rows``), shared by
  every recall() against that database through whichever Database object: the copies are exact
  for any reader, as each recall checks what changed inside its own transaction;
* with ``db=None``, one Database (so one connection pool) and one Recaller per set of settings
  that shape them (the URL or embedded data directory, pool size, embedder, cache size, purpose
  map), opened on first use and kept until :func:`close_recallers` (also run at exit).

A caller's own Database is never kept: with ``db`` given, recall() wraps it in a Recaller that
shares the registry's index, so when to close that Database stays the caller's decision.

A URL is taken to name one database for the life of the process. Like TRUNCATE (migration 0006),
dropping and recreating the database behind a URL is an operator's action the copies do not see;
a process that does it (a test suite recreating its database) calls :func:`close_recallers` after.
"""

from __future__ import annotations

import atexit
import datetime as dt
import threading

from jobs import config as config_module
from jobs.concepts import DEFAULT_BUDGET_TOKENS
from jobs.db import Database
from jobs.embeddings import embedder_for
from jobs.recall.index import RecallIndex
from jobs.recall.packs import PackWriter
from jobs.recall.recaller import Recaller
from jobs.recall.result import Recall

_IndexKey = tuple[str, str, int, int]  # database URL, embedder, cache rows, pack rows
_SettingsKey = tuple[str, int, str, int, tuple[tuple[str, tuple[str, ...]], ...]]


def _settings_key(settings: config_module.Settings) -> _SettingsKey:
    """What an owned Database and its Recaller are built from; other settings do not touch recall."""
    location = settings.database_url or f"embedded:{settings.pgdata}"
    return (
        location,
        settings.pool_size,
        settings.embedder,
        settings.recall_cache_rows,
        tuple(sorted((name, tuple(seen)) for name, seen in settings.purpose_map.items())),
    )


class _Registry:
    """Thread-safe: at most one index per _IndexKey and one owned Recaller per _SettingsKey."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._indexes: dict[_IndexKey, RecallIndex] = {}
        self._owned: dict[_SettingsKey, Recaller] = {}
        self._at_exit = False

    def recaller(self, db: Database | None) -> Recaller:
        if db is not None:
            url = db.url  # outside the lock: resolving an embedded server's URL may start it
            with self._lock:
                index = self._index(url, db.settings)
            return Recaller(db, index=index)
        settings = config_module.load()
        key = _settings_key(settings)
        with self._lock:  # held while the first recaller of these settings opens its pool, then briefly
            found = self._owned.get(key)
            if found is None:
                database = Database(settings)
                _ = database.pool  # opened here, once: two threads' first recalls must not both open one
                found = self._owned[key] = Recaller(database, index=self._index(database.url, settings))
                if not self._at_exit:
                    atexit.register(close_recallers)
                    self._at_exit = True
            return found

    def _index(self, url: str, settings: config_module.Settings) -> RecallIndex:
        """The index of this database (the caller holds the lock)."""
        key = (url, settings.embedder, settings.recall_cache_rows, settings.recall_pack_rows)
        if key not in self._indexes:
            dim = embedder_for(settings).dim  # cached per process; the weights load lazily
            # The packs of heavy users' full reads go back on a connection of their own (one, opened on
            # the first write), so writing never takes one from the caller's pool.
            packs = (
                PackWriter(Database(settings.with_(pool_size=1), url), settings.recall_pack_rows)
                if settings.recall_pack_rows
                else None
            )
            self._indexes[key] = RecallIndex(dim, settings.recall_cache_rows, packs)
        return self._indexes[key]

    def close(self) -> None:
        with self._lock:
            owned = list(self._owned.values())
            self._owned.clear()
            writers = [index.packs for index in self._indexes.values() if index.packs is not None]
            self._indexes.clear()
        for writer in writers:
            writer.close()
        for recaller in owned:
            recaller.db.close()


_registry = _Registry()


def shared_recaller(db: Database | None = None) -> Recaller:
    """The Recaller :func:`recall` uses: its per-user copies are shared by the whole process.

    With ``db`` None, the one built from the environment's settings (its Database is the
    registry's, closed by :func:`close_recallers`); with ``db``, a Recaller on that Database that
    shares the registry's copies of its database. Use it to keep :meth:`Recaller.recall_vector`
    and the other methods on the same warm copies as recall().
    """
    return _registry.recaller(db)


def close_recallers() -> None:
    """Forget every shared copy and close the pools recall() opened itself (it reopens on demand).

    For tests, after a database was recreated under the same URL, and for a host that wants its
    connections closed (it also runs at exit); meant for when no recall() is running.
    """
    _registry.close()


def recall(
    tenant_id: str,
    user_id: str,
    opening_message: str,
    *,
    purpose: str | None = None,
    budget_tokens: int = DEFAULT_BUDGET_TOKENS,
    now: dt.datetime | None = None,
    db: Database | None = None,
) -> Recall:
    """Recent and relevant episodes of one user, fitted to ``budget_tokens`` (see :meth:`Recaller.recall`).

    With ``db`` None, the database of the environment's settings (DATABASE_URL, or the embedded
    server), through a pool kept for the process. Either way the per-user copies are the
    process's (:func:`shared_recaller`), so a user's later recalls read only what changed.
    """
    return shared_recaller(db).recall(
        tenant_id, user_id, opening_message, purpose=purpose, budget_tokens=budget_tokens, now=now
    )
