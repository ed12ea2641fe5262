"""The process-wide recallers behind :func:`recall`, the documented one-call API.

A Recaller's worth between calls is its embedder (loaded once per process) and, when recall() opened
the database itself, its connection pool. A ``recall()`` that built them per call would load the
model and open a pool every time, so every call draws on one registry per process: with ``db=None``,
one Database (so one connection pool) and one Recaller per set of settings that shape them (the URL
or embedded data directory, pool size, embedder, purpose map), opened on first use and kept until
:func:`close_recallers` (also run at exit). A caller's own Database is never kept: with ``db`` given,
recall() wraps it in a Recaller, so when to close that Database stays the caller's decision.

Nothing of any user's rows is kept: every recall reads them where they are (:mod:`jobs.recall.scoring`).
"""

from __future__ import annotations

import atexit
import datetime as dt
import threading

from jobs import config as config_module
from jobs.concepts import DEFAULT_BUDGET_TOKENS
from jobs.db import Database
from jobs.recall.recaller import Recaller
from jobs.recall.result import Recall

_SettingsKey = tuple[str, int, str, tuple[tuple[str, tuple[str, ...]], ...]]


def _settings_key(settings: config_module.Settings) -> _SettingsKey:
    """What an owned Database and its Recaller are built from; other settings do not touch recall."""
    location = settings.database_url or f"embedded:{settings.pgdata}"
    return (
        location,
        settings.pool_size,
        settings.embedder,
        tuple(sorted((name, tuple(seen)) for name, seen in settings.purpose_map.items())),
    )


class _Registry:
    """Thread-safe: at most one owned Recaller per _SettingsKey."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._owned: dict[_SettingsKey, Recaller] = {}
        self._at_exit = False

    def recaller(self, db: Database | None) -> Recaller:
        if db is not None:
            return Recaller(db)
        settings = config_module.load()
        key = _settings_key(settings)
        with self._lock:  # held while the first recaller of these settings opens its pool, then briefly
            found = self._owned.get(key)
            if found is None:
                database = Database(settings)
                _ = database.pool  # opened here, once: two threads' first recalls must not both open one
                found = self._owned[key] = Recaller(database)
                if not self._at_exit:
                    atexit.register(close_recallers)
                    self._at_exit = True
            return found

    def close(self) -> None:
        with self._lock:
            owned = list(self._owned.values())
            self._owned.clear()
        for recaller in owned:
            recaller.db.close()


_registry = _Registry()


def shared_recaller(db: Database | None = None) -> Recaller:
    """The Recaller :func:`recall` uses.

    With ``db`` None, the one built from the environment's settings (its Database is the registry's,
    closed by :func:`close_recallers`); with ``db``, a Recaller on that Database.
    """
    return _registry.recaller(db)


def close_recallers() -> None:
    """Close the pools recall() opened itself (it reopens on demand): for a host that wants its
    connections closed (it also runs at exit); meant for when no recall() is running."""
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
    server), through a pool kept for the process.
    """
    return shared_recaller(db).recall(
        tenant_id, user_id, opening_message, purpose=purpose, budget_tokens=budget_tokens, now=now
    )
