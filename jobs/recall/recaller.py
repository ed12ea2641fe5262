"""Recaller: one recall from start to end, with what is worth keeping between recalls.

Selection runs in one tenant-scoped transaction (row-level security applies), with the queries of
``sql/recall.sql``:

1. **Candidates** are the user's episodes with ``status = 'current' AND compressed_into IS NULL``
   (so a super-summary stands in for the sessions it compressed), ended by ``now``, of an allowed
   purpose (:mod:`jobs.recall.purposes`). The user's in-process copy of the scoring columns
   (:mod:`jobs.recall.index`) is brought up to date with what changed, and every candidate is
   scored exactly (:mod:`jobs.recall.scoring`); the top K, the last ``recent_n`` and the episodes
   of open items are picked.
2. **Open items**: the user's still-open questions and commitments from candidate episodes; a
   stale one (long overdue, or old without a due date) only when related to the opening message.
3. **Sessions not yet summarised** (open, or waiting for summarize) of the user: one line each
   from their last user messages, redacted (:mod:`jobs.recall.unsummarised`), their share of the
   budget taken first.
4. The picked episodes are read fresh, then **fitted** to the budget (:mod:`jobs.recall.fitting`)
   and rendered (:mod:`jobs.recall.result`).

A Recaller holds the database, the embedder (loaded once per process) and the per-user copies, so
a user's second recall reads only what changed since the first. :func:`jobs.recall.recall` keeps
one per database for the whole process (:mod:`jobs.recall.shared`).
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np
import psycopg

from jobs.concepts import DEFAULT_BUDGET_TOKENS
from jobs.db import Database
from jobs.embeddings import Embedder, embedder_for, get_embedder
from jobs.embeddings.protocol import embed_queries
from jobs.embeddings.recorded import Recorded
from jobs.recall.config import RecallConfig
from jobs.recall.fitting import minimum_budget, select
from jobs.recall.index import RecallIndex
from jobs.recall.open_items import open_items, send_open_items
from jobs.recall.purposes import purpose_filter
from jobs.recall.result import Recall, RecalledLine, RecalledOpenItem
from jobs.recall.scoring import epoch_us, fuse
from jobs.recall.unsummarised import fit_sessions, unsummarised_sessions

log = logging.getLogger(__name__)


class _Read(NamedTuple):
    """What one recall reads from the database (:meth:`Recaller._read`)."""

    open_rows: list[dict[str, Any]]  # recall_open_items
    candidates: int  # the user's candidate episodes scored
    picked: dict[int, dict[str, Any]]  # fuse(): the chosen episodes' ranks and scores
    vectors: dict[int, np.ndarray]  # their embeddings, from the copy
    rows: list[dict[str, Any]]  # recall_rows: the chosen episodes still candidates, read fresh
    sessions: list[dict[str, Any]]  # recall_unsummarised
    lines: list[dict[str, Any]]  # recall_lines: the chosen episodes' lines that best match, best first
    replaced: dict[int, dt.date]  # recall_replaced: chosen episodes with a decision a later one replaced


class Recaller:
    """Holds the database, the embedder and the per-user copies (``index``) for repeated recalls.

    ``index`` may be shared by Recallers of the same database (it is thread-safe, and every recall
    checks its freshness inside its own transaction); by default each Recaller has its own.
    """

    def __init__(
        self,
        db: Database,
        embedder: Embedder | None = None,
        config: RecallConfig | None = None,
        index: RecallIndex | None = None,
    ) -> None:
        self.db = db
        self.embedder = embedder or embedder_for(db.settings)
        self.config = config or RecallConfig()
        self.index = index or RecallIndex(self.embedder.dim, db.settings.recall_cache_rows)
        # The name the embedder was asked for (EPISODES_EMBEDDER, or one followed below), which the
        # database may record instead of the embedder's own name ("minilm" for all-MiniLM-L6-v2).
        self._embedder_as = db.settings.embedder if embedder is None else embedder.name
        if self.index.dim != self.embedder.dim:
            raise ValueError(
                f"the index holds {self.index.dim}-dimension vectors; "
                f"the embedder {self.embedder.name} makes {self.embedder.dim}"
            )

    def _follow_recorded_embedder(self, recorded: Recorded) -> bool:
        """Switch to the embedder the database records if it is another one: after `episodes reembed`,
        or in a process configured with another (whose writers refuse, jobs.embeddings.recorded).

        Vectors of one embedder are only comparable with a message embedded by the same one, so
        recall follows the record rather than score with the wrong one. The per-user copies hold
        the other vectors, so they go too. Returns whether it switched."""
        if recorded.matches(self.embedder, self._embedder_as):
            return False
        log.warning(
            "recall follows the database's embedder %s (%d dimensions) instead of %s; set EPISODES_EMBEDDER=%s",
            recorded.name,
            recorded.dim,
            self._embedder_as,
            recorded.name,
            extra={"action": "recall_follow_embedder"},
        )
        s = self.db.settings
        self.embedder = get_embedder(
            recorded.name, threads=s.embed_threads, cache_dir=s.cache_dir, model_dir=s.model_dir
        )
        self._embedder_as = recorded.name
        self.index = RecallIndex(self.embedder.dim, s.recall_cache_rows)
        return True

    def embed(self, opening_message: str) -> np.ndarray:
        """The query vector of an opening message (what :meth:`recall_vector` takes), embedded as a query."""
        return embed_queries(self.embedder, [opening_message])[0, :]

    def recall(
        self,
        tenant_id: str,
        user_id: str,
        opening_message: str,
        *,
        purpose: str | None = None,
        budget_tokens: int = DEFAULT_BUDGET_TOKENS,
        now: dt.datetime | None = None,
    ) -> Recall:
        """Recent and relevant episodes of one user, fitted to ``budget_tokens``."""
        return self.recall_vector(
            tenant_id,
            user_id,
            opening_message,
            self.embed(opening_message),
            purpose=purpose,
            budget_tokens=budget_tokens,
            now=now,
        )

    def recall_vector(
        self,
        tenant_id: str,
        user_id: str,
        opening_message: str,
        query_vector: np.ndarray | Sequence[float],
        *,
        purpose: str | None = None,
        budget_tokens: int = DEFAULT_BUDGET_TOKENS,
        now: dt.datetime | None = None,
    ) -> Recall:
        """Like :meth:`recall` with a precomputed query vector (benchmarks, batch callers)."""
        if budget_tokens < 1:
            raise ValueError(
                f"budget_tokens must be at least 1 (got {budget_tokens}); a block that shows anything "
                f"needs about {minimum_budget(self.config)}"
            )
        now = now or dt.datetime.now(dt.UTC)
        now = now if now.tzinfo else now.replace(tzinfo=dt.UTC)  # naive means UTC, as everywhere
        purposes = purpose_filter(purpose, self.db.settings.purpose_map)
        cfg = self.config
        vector = np.asarray(query_vector, dtype=np.float32)
        while (read := self._read(tenant_id, user_id, opening_message, vector, now, purposes)) is None:
            vector = self.embed(opening_message)  # `episodes reembed` switched the embedder: embed anew
        open_rows, candidates, picked, vectors, rows, session_rows, line_rows, replaced = read
        unsummarised = unsummarised_sessions(session_rows, chars=cfg.compact_chars, redact=self.db.settings.redact)
        sessions, session_tokens = fit_sessions(unsummarised, cfg.open_items_share, budget_tokens)
        rows = sorted(
            ({**row, **picked[row["id"]], "replaced_on": replaced.get(row["id"])} for row in rows),
            key=lambda r: (r["relevance_rank"] or 1 << 62, r["recency_rank"] or 1 << 62, r["id"]),
        )
        episodes, items = select(
            rows,
            vectors,
            [RecalledOpenItem(**r) for r in open_rows],
            cfg,
            budget_tokens - session_tokens,
            opening_message,
            now,
            [RecalledLine(**r) for r in line_rows],
        )
        return Recall(
            tenant_id=tenant_id,
            user_id=user_id,
            opening_message=opening_message,
            purpose=purpose,
            purposes=purposes,
            budget_tokens=budget_tokens,
            now=now,
            candidates=candidates,
            episodes=episodes,
            open_items=items,
            sessions=sessions,
            nothing_relevant=not any(ep.relevance_rank for ep in episodes),
            unsummarised=len(unsummarised),
            minimum_budget=minimum_budget(cfg),
        )

    def _read(
        self,
        tenant_id: str,
        user_id: str,
        opening_message: str,
        vector: np.ndarray,
        now: dt.datetime,
        purposes: list[str] | None,
    ) -> _Read | None:
        """Everything recall reads, in one tenant transaction; None if the database's embedder is another
        one now (the copies were dropped; embed the message anew and read again).

        The transaction runs in pipeline mode. The copy's read of what changed goes first (a copy's
        first read also brings the embedder the vectors are of); once it is back, the open items
        (:mod:`jobs.recall.open_items`, which keeps those of candidates in the copy) and the
        unsummarised sessions are sent, and the server runs them while this process scores the copy.
        The chosen rows come back with the COMMIT. On a Citus worker the statements name the tenant's
        shard tables (jobs.citus.shards); if a shard move drops them during the read, it runs once more."""
        try:
            return self._read_once(tenant_id, user_id, opening_message, vector, now, purposes)
        except psycopg.errors.UndefinedTable:
            if not self.db.moved(tenant_id):  # the tenant had no route to its shards: not a move
                raise
            return self._read_once(tenant_id, user_id, opening_message, vector, now, purposes)

    def _read_once(
        self,
        tenant_id: str,
        user_id: str,
        opening_message: str,
        vector: np.ndarray,
        now: dt.datetime,
        purposes: list[str] | None,
    ) -> _Read | None:
        cfg, settings = self.config, self.db.settings
        params = {"tenant_id": tenant_id, "user_id": user_id, "now": now, "purposes": purposes}
        with self.db.tenant_read(tenant_id, pipeline=True) as (conn, sql, _):  # on a cluster: the tenant's worker
            with self.index.user(
                conn,
                tenant_id,
                user_id,
                opening_message,
                sql=sql,
                accept=lambda recorded: not self._follow_recorded_embedder(recorded),
            ) as read:
                if read is None:
                    return None
                index = read.copy
                item_params = {
                    **params,
                    "query_text": opening_message,
                    "grace_seconds": settings.stale_grace_seconds,
                    "age_seconds": settings.stale_age_seconds,
                }
                items = (
                    send_open_items(conn, item_params, cfg.max_open_items, sql=sql) if cfg.max_open_items > 0 else None
                )
                conn.pgconn.send_flush_request()  # the items come back as soon as they are run, not after the next
                sessions = (
                    conn.execute(sql("recall_unsummarised"), {**params, "limit": cfg.max_unsummarised})
                    if cfg.max_unsummarised > 0
                    else None
                )
                now_us = epoch_us(now)
                scores = index.scores(vector, read.lexemes, now_us, purposes)
                open_rows = (
                    open_items(conn, items, index, item_params, cfg.max_open_items, now_us, purposes, sql)
                    if items is not None
                    else []
                )
                picked = fuse(scores, cfg, now_us, {r["episode_id"] for r in open_rows})
                vectors = {i: v.copy() for i in picked if (v := index.vector(i)) is not None}
            ids = sorted(picked)
            chosen = conn.execute(sql("recall_rows"), {**params, "ids": ids})
            lines = (
                conn.execute(
                    sql("recall_lines"),
                    {
                        **params,
                        "ids": ids,
                        "vector": vector,
                        "dim": len(vector),
                        "limit": cfg.max_lines,
                        "neighbour": cfg.line_neighbour,
                    },
                )
                if cfg.max_lines > 0 and ids
                else None
            )
            replaced = conn.execute(sql("recall_replaced"), {**params, "ids": ids}) if ids else None
        rows = [row for row in chosen.fetchall() if row.pop("candidate")]  # not one any more: left out
        return _Read(
            open_rows,
            len(scores.ids),
            picked,
            vectors,
            rows,
            sessions.fetchall() if sessions is not None else [],
            lines.fetchall() if lines is not None else [],
            {r["episode_id"]: r["replaced_at"].date() for r in replaced.fetchall()} if replaced else {},
        )
