"""The embedder the database records (``episodes_settings``), which ``episodes reembed`` switches.

``episodes init`` records the configured embedder; after a re-embed the database records the new one
and its vectors are of that embedder only. A process started before the switch must notice:
recall follows the recorded embedder (jobs.recall.recaller), writers refuse (:func:`check_recorded`)
rather than store vectors from another embedder.
"""

from __future__ import annotations

from dataclasses import dataclass

from jobs.db import Conn, one, set_local
from jobs.embeddings.protocol import Embedder
from jobs.errors import EmbedderChanged
from jobs.sql import query


@dataclass(frozen=True)
class Recorded:
    name: str
    dim: int

    def matches(self, embedder: Embedder, configured: str = "") -> bool:
        """Whether vectors of ``embedder`` (configured as ``configured``) belong in this database."""
        return embedder.dim == self.dim and self.name.lower() in (embedder.name.lower(), configured.lower())


def recorded_embedder(conn: Conn) -> Recorded:
    """The embedder and dimension the database's vectors are of, for the rest of the caller's transaction.

    First takes the lock every reader of ``episodes`` takes anyway (ACCESS SHARE), so a switch cannot
    commit between this read and the caller's next statements. (Recall needs no lock: its read of the
    vectors brings the recorded embedder in the same statement, jobs.recall.scoring.)"""
    with conn.pipeline():  # the statements in one round trip; the server still runs them in order
        # On a Citus coordinator a LOCK TABLE is also sent to every worker; the switch's ALTER TABLE
        # locks the coordinator's table first, and every writer goes through the coordinator, so
        # the lock there is the one that orders them (one PostgreSQL ignores the setting).
        set_local(conn, **{"citus.enable_ddl_propagation": "off"})
        conn.execute(query("hold_episodes_schema"))
        cursor = conn.execute(query("recorded_embedder"))
    row = one(cursor)
    return Recorded(str(row["embedder"]), int(row["dim"]))


def check_recorded(conn: Conn, embedder: Embedder, configured: str = "") -> None:
    """Raise :class:`EmbedderChanged` unless ``embedder`` is the one the database records."""
    recorded = recorded_embedder(conn)
    if not recorded.matches(embedder, configured):
        raise EmbedderChanged(
            f"The database's embeddings are now {recorded.name} ({recorded.dim} dimensions; switched by "
            f"`episodes reembed`), but this process embeds with {embedder.name} ({embedder.dim}). "
            f"Restart it with EPISODES_EMBEDDER={recorded.name}."
        )
