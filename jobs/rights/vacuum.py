"""After an erasure: what is left of the erased rows in the database's files, and taking it away.

A DELETE (or an UPDATE that blanks a column) only marks the old row versions dead. Until VACUUM they
stay in the table's pages, their index entries stay, and ``pg_stats`` keeps whatever values the last
ANALYZE sampled (most common values and histogram bounds: user ids, summaries, names). Autovacuum comes
only once a fifth of a table is dead, so one user's erasure may wait for it a long time.

:func:`vacuum_after_erasure` runs ``VACUUM (ANALYZE)`` on every table an erasure deletes from or
blanks (:data:`ERASED_TABLES`): the dead versions' index entries go, their space is marked free, and
new statistics are sampled from the rows that are left, so no erased value remains in ``pg_stats``.
The bytes of the dead versions still sit in the freed space of their heap pages until new rows
overwrite them, and a GIN index (``search_tsv``'s) never deletes a key, only its postings: the erased
words stay as keys with nothing under them. ``full=True`` runs ``VACUUM FULL`` instead, which writes
each table and its indexes anew, leaving none of those bytes in the database's files (measured in
tests/test_erasure_trace.py); it holds an ACCESS EXCLUSIVE lock on each table while it is rewritten,
so recalls and writes wait.

VACUUM cannot run inside a transaction, so this runs after the erasure committed, one table at a
time on an autocommit connection. It is best-effort: the erasure is done either way. Only a table's
owner (or a superuser) may vacuum it; PostgreSQL skips any other table with a warning, reported here
as skipped. On a Citus coordinator VACUUM and ANALYZE of a distributed table run on its shards.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

import psycopg
from psycopg import sql

from jobs.db import Database

log = logging.getLogger(__name__)

# Every table an erasure deletes rows from or updates (jobs.rights.forget, jobs.rights.erase_episode,
# their triggers and cascades): the old versions of those rows hold the erased data.
ERASED_TABLES = (
    "episodes",
    "episode_events",
    "episode_entities",
    "episode_lines",
    "episode_lineage",
    "transcripts",
    "model_batch_items",
    "model_calls",
    "episode_corrections",
    "job_runs",
)


@dataclass
class Vacuumed:
    """What :func:`vacuum_after_erasure` did."""

    full: bool
    tables: list[str] = field(default_factory=list)  # vacuumed and analysed
    skipped: dict[str, str] = field(default_factory=dict)  # table -> why (PostgreSQL's warning or error)
    seconds: float = 0.0

    def line(self) -> str:
        verb = "rewrote (VACUUM FULL) and analysed" if self.full else "vacuumed and analysed"
        text = f"{verb} {len(self.tables)} tables the erasure changed in {self.seconds:.1f}s"
        if self.skipped:
            text += (
                f"; skipped {', '.join(sorted(self.skipped))} ({next(iter(self.skipped.values()))}): run "
                "`episodes vacuum` as the tables' owner"
            )
        return text


def vacuum_after_erasure(db: Database, *, full: bool = False, tables: tuple[str, ...] = ERASED_TABLES) -> Vacuumed:
    """``VACUUM (ANALYZE)`` (``full``: ``VACUUM (FULL, ANALYZE)``) of ``tables``, each on its own, after an
    erasure committed (see the module docstring). Never raises for a table it could not vacuum: it is
    reported in :attr:`Vacuumed.skipped` and logged."""
    done = Vacuumed(full)
    started = time.perf_counter()
    options = sql.SQL("(FULL, ANALYZE)" if full else "(ANALYZE)")
    with db.connect(autocommit=True) as conn:
        warnings: list[str] = []
        conn.add_notice_handler(
            lambda diag: (
                warnings.append(diag.message_primary or "") if diag.severity_nonlocalized == "WARNING" else None
            )
        )
        for table in tables:
            warnings.clear()
            try:
                conn.execute(sql.SQL("VACUUM {} {}").format(options, sql.Identifier(table)))
            except psycopg.Error as exc:  # e.g. a lock that cannot be had now; the next run does it
                done.skipped[table] = f"{type(exc).__name__}, SQLSTATE {exc.sqlstate}"
                continue
            if warnings:
                done.skipped[table] = warnings[0]
            else:
                done.tables.append(table)
    done.seconds = time.perf_counter() - started
    log.info(
        "vacuumed after an erasure",
        extra={
            "action": "erasure_vacuum",
            "full": full,
            "tables": len(done.tables),
            "skipped": sorted(done.skipped),
            "seconds": round(done.seconds, 3),
        },
    )
    return done
