"""The recall copies of this process follow erasures at once (:mod:`jobs.rights.erased`).

Every RecallIndex of the process registers here when made (:func:`follow_erasures`), held weakly; an
erasure committed in this process drops the copies of the users concerned from each of them (and any
pack of them waiting to be written). Another process's copy is read anew at the user's next recall, as
the user's change counter says (migration 0016).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Collection
from typing import Protocol

from jobs.rights.erased import on_erasure


class Holder(Protocol):
    """What holds per-user copies: a RecallIndex."""

    def drop(self, tenant_id: str, user_id: str) -> bool: ...


_live: weakref.WeakSet[Holder] = weakref.WeakSet()
_lock = threading.Lock()


def follow_erasures(holder: Holder) -> None:
    """Drop ``holder``'s copies of users this process erases, for as long as it lives."""
    with _lock:
        _live.add(holder)


def _drop_erased(tenant_id: str, user_ids: Collection[str]) -> None:
    with _lock:
        holders = list(_live)
    for holder in holders:
        for user_id in user_ids:
            holder.drop(tenant_id, user_id)


on_erasure(_drop_erased)
