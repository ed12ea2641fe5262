"""Telling this process that users' data was erased, once the erasure has committed.

Layers above privacy keep copies of users' data in memory: the recall copies (vectors and lexeme
postings, :mod:`jobs.recall.index`) and the packs waiting to be written. An erasure must not leave them
in the process that erased until they happen to be evicted, but privacy sits below recall and cannot
import it. So a layer that keeps such copies registers a listener here (:func:`on_erasure`, once, when
its module is imported), and every erasure path calls :func:`announce` after its commit:
``forget_user`` and ``forget_episode`` here, hence the CLI, the HTTP API, MCP and the memory page alike.
A process that never imported such a layer holds no copy, and nothing is called.

Other processes are not told: their copies see the erasure through the user's change counter at the
user's next recall (migration 0016), and are read anew then.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Collection

log = logging.getLogger(__name__)

Listener = Callable[[str, Collection[str]], None]  # (tenant, users erased or changed by an erasure)

_listeners: list[Listener] = []
_lock = threading.Lock()


def on_erasure(listener: Listener) -> None:
    """Call ``listener(tenant_id, user_ids)`` after every erasure this process commits (idempotent)."""
    with _lock:
        if listener not in _listeners:
            _listeners.append(listener)


def announce(tenant_id: str, user_ids: Collection[str]) -> None:
    """After an erasure committed: let every listener drop what it holds of these users. A listener's
    failure is logged, never raised: the erasure itself is done, and its caller must hear so."""
    if not user_ids:
        return
    with _lock:
        listeners = list(_listeners)
    for listener in listeners:
        try:
            listener(tenant_id, user_ids)
        except Exception:
            log.warning(
                "could not drop in-memory copies after an erasure in tenant %s",
                tenant_id,
                exc_info=True,
                extra={"action": "erasure_listener_failed", "tenant": tenant_id},
            )
