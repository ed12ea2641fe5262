"""Switching embedders without downtime: ``episodes reembed --embedder NAME``.

1. **Begin** (one transaction): record the target in ``reembed_state``, add
   ``episodes.embedding_next vector(M)`` (M: the new embedder's dimension; nullable, so no rewrite)
   and a trigger that clears a row's new vector whenever its old one changes (a correction).
2. **Fill**, in batches of ``batch_size``: read episodes without a new vector in id order, embed
   their text (:func:`jobs.models.episode_text`, as summarize and compress build it), write the
   vectors in a short transaction of their own, only to rows unchanged since they were read (the
   same ``changed_version``, which every update of a row moves: migration 0035): a row corrected
   between the read and the write is left, and the switch embeds its new text. A kill -9 loses at
   most the batch in flight; the next run resumes with what is missing. Recall, summarize and
   compress keep using ``embedding`` meanwhile.
3. **Switch** (one transaction): lock ``episodes`` against writes (SHARE ROW EXCLUSIVE; reads go on),
   embed whatever is still missing (episodes ``serve`` wrote during the fill, corrected ones), then
   drop ``embedding``, rename ``embedding_next`` to it, and record the new embedder and dimension.
   The rename is metadata only; recall waits only for that commit (milliseconds). There is no vector
   index to rebuild: recall scores each user's rows exactly (sql/recall.sql).

After the switch, recall follows the recorded embedder and writers with the old one refuse
(:mod:`jobs.embeddings.recorded`). One re-embed at a time (an advisory lock, and one state row).
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from psycopg import sql
from psycopg.rows import DictRow

from jobs.citus.cluster import distributed_tables
from jobs.db import Conn, Database, one
from jobs.errors import EpisodesError, ReembedInProgress
from jobs.runs import finish_run, start_run
from jobs.sql import query

if TYPE_CHECKING:
    from jobs.embeddings.protocol import Embedder

BATCH_SIZE = 256
SUPER_VECTOR_EVENTS = 5  # a super-summary's vector covers its first five events (jobs.rights.reindex)
_LOCK_KEY = 0x7265656D  # "reem"


@dataclass(frozen=True)
class ReembedProgress:
    """A re-embed in progress: its target and how many of the episodes with a vector have a new one."""

    embedder: str
    dim: int
    started_at: dt.datetime
    done: int
    total: int

    def line(self) -> str:
        return (
            f"re-embedding to {self.embedder} ({self.dim}-d): {self.done:,} / {self.total:,} episodes, "
            f"since {self.started_at:%Y-%m-%d %H:%M} UTC"
        )


@dataclass
class ReembedReport:
    """What one ``episodes reembed`` run did: vectors written while filling and at the switch."""

    embedder: str
    dim: int
    written: int = 0
    caught_up: int = 0
    total: int = 0
    seconds: float = 0.0
    switch_seconds: float = 0.0
    lines: int = 0  # episode lines embedded again after the switch

    def line(self) -> str:
        return (
            f"re-embedded with {self.embedder} ({self.dim}-d): {self.written:,} vectors written in this run, "
            f"{self.caught_up:,} caught up at the switch, {self.total:,} episodes now on {self.embedder}, "
            f"{self.lines:,} episode lines · "
            f"{self.seconds:.1f}s (switch {self.switch_seconds * 1000:.0f} ms)"
        )


def reembed_progress(conn: Conn) -> ReembedProgress | None:
    """The re-embed in progress, or None."""
    state = conn.execute(query("reembed_state")).fetchone()
    if state is None:
        return None
    counts = one(conn.execute(query("reembed_progress")))
    return ReembedProgress(state["embedder"], state["dim"], state["started_at"], counts["done"], counts["total"])


def abort_reembed(db: Database) -> ReembedProgress | None:
    """Drop the re-embed in progress (its new vectors); the database keeps its embedder. None if none."""
    with _only_runner(db), db.admin() as conn:
        progress = reembed_progress(conn)
        if progress is not None:
            _drop_next(conn)
            conn.execute(query("reembed_end"))
        return progress


def reembed(
    db: Database,
    embedder: Embedder,
    name: str,
    *,
    batch_size: int = BATCH_SIZE,
    on_total: Callable[[int, int], None] | None = None,
    progress: Callable[[int], object] | None = None,
    worker: str = "reembed",
) -> ReembedReport:
    """Begin or resume a re-embed to ``embedder`` (recorded as ``name``), fill, and switch.

    ``on_total(total, done)`` is called once the work is known; ``progress(n)`` after each batch.
    Raises :class:`ReembedInProgress` if a re-embed to another embedder is unfinished or another
    process runs one now.
    """
    if batch_size < 1:
        raise ValueError("batch_size must be at least 1")
    with db.connect() as conn:
        if distributed_tables(conn):
            # The switch renames embedding_next to embedding, and Citus 13 does not propagate RENAME
            # COLUMN on a distributed table ("alter table command is currently unsupported").
            raise EpisodesError(
                "`episodes reembed` does not run on a Citus cluster yet: its switch renames a column, "
                "which Citus refuses on a distributed table. Re-embed before distributing, or "
                "undistribute, re-embed and distribute again (docs/citus.md)."
            )
    started = time.monotonic()
    report = ReembedReport(name, embedder.dim)
    with _only_runner(db):
        run_id = start_run(db, "reembed", worker)
        try:
            with db.admin() as conn:
                state = _begin(conn, embedder, name)
            if on_total:
                on_total(state.total, state.done)
            after = 0
            while rows := _read(db, after, batch_size):
                with db.admin() as conn:
                    written = _write(conn, embedder, rows)
                report.written += written
                after = rows[-1]["id"]
                if progress:
                    progress(written)
            switch_started = time.monotonic()
            with db.admin() as conn:
                report.caught_up, report.total = _switch(conn, embedder, name, batch_size)
            report.switch_seconds = time.monotonic() - switch_started
            report.lines = _rewrite_lines(db, embedder, batch_size)
        except BaseException as exc:
            finish_run(db, run_id, counts={"written": report.written}, error=repr(exc))
            raise
        report.seconds = time.monotonic() - started
        finish_run(db, run_id, counts={"written": report.written, "caught_up": report.caught_up})
    return report


class _only_runner:
    """Hold the re-embed advisory lock on a connection of its own for the life of a run."""

    def __init__(self, db: Database) -> None:
        self._conn = db.connect(autocommit=True)

    def __enter__(self) -> None:
        if not one(self._conn.execute(query("try_advisory_lock"), {"key": _LOCK_KEY}))["ok"]:
            self._conn.close()
            raise ReembedInProgress("Another `episodes reembed` is running now; wait for it to finish.")

    def __exit__(self, *exc: object) -> None:
        self._conn.close()  # ends the session, and with it the lock


def _begin(conn: Conn, embedder: Embedder, name: str) -> ReembedProgress:
    state = conn.execute(query("reembed_state")).fetchone()
    if state is not None and (state["embedder"] != name or state["dim"] != embedder.dim):
        progress = reembed_progress(conn)
        raise ReembedInProgress(
            f"A re-embed to {state['embedder']} is in progress ({progress.done if progress else 0:,} done). Resume it "
            f"with `episodes reembed --embedder {state['embedder']}`, or drop it with `episodes reembed --abort`."
        )
    if state is None:
        conn.execute(query("reembed_begin"), {"embedder": name, "dim": embedder.dim})
        conn.execute(
            sql.SQL("ALTER TABLE episodes ADD COLUMN embedding_next vector({})").format(sql.Literal(embedder.dim))
        )
        conn.execute("ALTER TABLE episodes ALTER COLUMN embedding_next SET STORAGE MAIN")
        conn.execute(
            "CREATE TRIGGER episodes_reembed_stale BEFORE UPDATE OF embedding ON episodes "
            "FOR EACH ROW EXECUTE FUNCTION episodes_reembed_stale()"
        )
    progress = reembed_progress(conn)
    assert progress is not None
    return progress


def _read(db: Database, after: int, limit: int) -> list[DictRow]:
    with db.admin() as conn:
        return conn.execute(query("reembed_batch"), {"after": after, "limit": limit}).fetchall()


def _texts(rows: list[DictRow]) -> list[str]:
    # Imported by the re-embedding alone: `episodes status` reads reembed_progress and builds no pydantic model.
    from jobs.models import episode_text

    return [
        episode_text(
            r["summary"],
            r["topic_tags"],
            r["events"] if r["kind"] == "session" else r["events"][:SUPER_VECTOR_EVENTS],
            r["entities"],
        )
        for r in rows
    ]


def _write(conn: Conn, embedder: Embedder, rows: list[DictRow]) -> int:
    """Embed ``rows`` and store the vectors (in the caller's transaction); return how many were stored."""
    vectors = embedder.embed(_texts(rows))
    cursor = conn.execute(
        query("reembed_write"),
        {
            "ids": [r["id"] for r in rows],
            "versions": [r["changed_version"] for r in rows],
            "vecs": _vector_texts(vectors),
        },
    )
    return cursor.rowcount


def _switch(conn: Conn, embedder: Embedder, name: str, batch_size: int) -> tuple[int, int]:
    """Catch up and swap the columns, in the caller's transaction; return (caught up, episodes with a vector)."""
    conn.execute("LOCK TABLE episodes IN SHARE ROW EXCLUSIVE MODE")  # writers wait; recall reads on
    caught_up = 0
    after = 0
    while rows := conn.execute(query("reembed_batch"), {"after": after, "limit": batch_size}).fetchall():
        caught_up += _write(conn, embedder, rows)
        after = rows[-1]["id"]
    counts = one(conn.execute(query("reembed_progress")))
    if counts["done"] != counts["total"]:  # cannot happen under the lock; never switch with a hole
        raise RuntimeError(f"re-embed switch: {counts['total'] - counts['done']} episodes still without a new vector")
    conn.execute("DROP TRIGGER episodes_reembed_stale ON episodes")
    conn.execute("ALTER TABLE episodes DROP COLUMN embedding")
    conn.execute("ALTER TABLE episodes RENAME COLUMN embedding_next TO embedding")
    conn.execute(query("reembed_finish_settings"), {"embedder": name, "dim": embedder.dim})
    conn.execute(query("reembed_end"))
    return caught_up, int(counts["total"])


def _vector_texts(vectors: Any) -> list[str]:
    """pgvector's text form of each vector, for an unnest(%s::text[]) that casts them (sql/reembed.sql)."""
    return ["[" + ",".join(f"{x:.7g}" for x in v) + "]" for v in vectors]


def _rewrite_lines(db: Database, embedder: Embedder, batch_size: int) -> int:
    """Embed every episode line again with the new embedder, after the switch (so lines written meanwhile
    already have its vectors), a batch per transaction; return how many. Until a line is rewritten, recall
    skips it if its vector has another dimension (sql/recall.sql recall_lines)."""
    key: dict[str, object] = {"tenant_id": "", "episode_id": -1, "ordinal": -1}
    written = 0
    while True:
        with db.admin() as conn:
            rows = conn.execute(query("reembed_lines_batch"), {**key, "limit": batch_size}).fetchall()
            if not rows:
                return written
            vectors = embedder.embed([r["text"] for r in rows])
            conn.execute(
                query("reembed_lines_write"),
                {
                    "tenants": [r["tenant_id"] for r in rows],
                    "episodes": [r["episode_id"] for r in rows],
                    "ordinals": [r["ordinal"] for r in rows],
                    "vecs": _vector_texts(vectors),
                },
            )
        written += len(rows)
        key = {"tenant_id": rows[-1]["tenant_id"], "episode_id": rows[-1]["episode_id"], "ordinal": rows[-1]["ordinal"]}


def _drop_next(conn: Conn) -> None:
    conn.execute("DROP TRIGGER IF EXISTS episodes_reembed_stale ON episodes")
    conn.execute("ALTER TABLE episodes DROP COLUMN IF EXISTS embedding_next")
