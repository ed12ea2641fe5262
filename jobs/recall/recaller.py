"""Recaller: one recall from start to end.

Selection runs in one tenant-scoped transaction (row-level security applies), with the queries of
``sql/recall.sql``, in four round trips (pipeline mode):

1. **Open items** (:mod:`jobs.recall.open_items`): the user's still-open questions and commitments of
   candidate episodes; a stale one (long overdue, or old without a due date) only when related to the
   opening message. Beside them, the **sessions not yet summarised** (open, or waiting for summarize):
   one line each from their last user messages, redacted (:mod:`jobs.recall.unsummarised`), their
   share of the budget taken first.
2. **Scoring** (:mod:`jobs.recall.scoring`): every candidate of the user (``status = 'current' AND
   compressed_into IS NULL``, so a super-summary stands in for the sessions it compressed; ended by
   ``now``; of an allowed purpose, :mod:`jobs.recall.purposes`) scored exactly in PostgreSQL, the rows
   fusion can pick returned, and fused here: the top K, the possibly related, the last ``recent_n`` and
   the episodes of the open items are picked.
3. **Lines**: the verbatim lines that best match the opening message, of the candidates scoring put
   closest to it or best by its words (:func:`jobs.recall.scoring.line_episodes`: scored once, a heavy
   user's 10,000 episodes are not scored again for their lines).
4. **The chosen episodes** (those fusion picked and those the lines come from) by primary key, and
   which of them hold a decision a later session replaced.

Then the chosen episodes are **fitted** to the budget (:mod:`jobs.recall.fitting`) and rendered
(:mod:`jobs.recall.result`). A Recaller holds the database and the embedder (loaded once per process);
it keeps no copy of anyone's rows, so an erasure or a correction is seen by the next recall as by any
query. :func:`jobs.recall.recall` keeps one per database for the whole process (:mod:`jobs.recall.shared`).
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
from jobs.recall.open_items import open_items, send_open_items
from jobs.recall.purposes import purpose_filter
from jobs.recall.result import Recall, RecalledLine, RecalledOpenItem
from jobs.recall.scoring import (
    epoch_us,
    fuse,
    line_episodes,
    line_unit_vectors,
    read_scores,
    send_lines,
    send_scores,
    under_supers,
    unit_vectors,
    unranked,
)
from jobs.recall.unsummarised import fit_sessions, unsummarised_sessions

log = logging.getLogger(__name__)


class _Read(NamedTuple):
    """What one recall reads from the database (:meth:`Recaller._read`)."""

    open_rows: list[dict[str, Any]]  # recall_open_items
    candidates: int  # the user's candidate episodes scored
    rows: list[dict[str, Any]]  # recall_rows with fuse()'s ranks and scores: the chosen episodes, best first
    vectors: dict[int, np.ndarray]  # their unit embeddings
    sessions: list[dict[str, Any]]  # recall_unsummarised
    lines: list[dict[str, Any]]  # recall_lines: the user's lines that best match, best first (embedding bytes kept)
    replaced: dict[int, dict[str, Any]]  # recall_replaced: chosen episodes with a decision a later one replaced


class Recaller:
    """Holds the database and the embedder for repeated recalls (thread-safe: each recall takes a
    connection of the database's pool)."""

    def __init__(self, db: Database, embedder: Embedder | None = None, config: RecallConfig | None = None) -> None:
        self.db = db
        self.embedder = embedder or embedder_for(db.settings)
        self.config = config or RecallConfig()
        # The name the embedder was asked for (EPISODES_EMBEDDER, or one followed below), which the
        # database may record instead of the embedder's own name ("minilm" for all-MiniLM-L6-v2).
        self._embedder_as = db.settings.embedder if embedder is None else embedder.name

    def _follow_recorded_embedder(self, recorded: Recorded) -> bool:
        """Switch to the embedder the database records if it is another one: after `episodes reembed`,
        or in a process configured with another (whose writers refuse, jobs.embeddings.recorded).

        Vectors of one embedder are only comparable with a message embedded by the same one, so
        recall follows the record rather than score with the wrong one. Returns whether it switched."""
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
        shared_with: Sequence[str] = (),
    ) -> Recall:
        """Recent and relevant episodes of one user, fitted to ``budget_tokens``. ``shared_with``: purposes whose
        memory ``purpose`` shares (a group of repositories, :mod:`jobs.claude_code.groups`), seen beside the ones
        it may see (:mod:`jobs.recall.purposes`)."""
        return self.recall_vector(
            tenant_id,
            user_id,
            opening_message,
            self.embed(opening_message),
            purpose=purpose,
            budget_tokens=budget_tokens,
            now=now,
            shared_with=shared_with,
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
        shared_with: Sequence[str] = (),
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
        if purposes is not None and shared_with:
            purposes = sorted({*purposes, *shared_with})
        cfg = self.config
        vector = np.asarray(query_vector, dtype=np.float32)
        while (read := self._read(tenant_id, user_id, opening_message, vector, now, purposes)) is None:
            vector = self.embed(opening_message)  # `episodes reembed` switched the embedder: embed anew
        open_rows, candidates, rows, vectors, session_rows, line_rows, replaced = read
        unsummarised = unsummarised_sessions(session_rows, chars=cfg.compact_chars, redact=self.db.settings.redact)
        sessions, session_tokens = fit_sessions(unsummarised, cfg.open_items_share, budget_tokens)
        rows = [{**row, **replaced.get(row["id"], {})} for row in rows]
        line_vectors = line_unit_vectors(line_rows)
        episodes, items = select(
            rows,
            vectors,
            [RecalledOpenItem(**r) for r in open_rows],
            cfg,
            budget_tokens - session_tokens,
            opening_message,
            now,
            [RecalledLine(**r) for r in line_rows],
            purpose=purpose,
            line_vectors=line_vectors,
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
        one now (embed the message anew and read again).

        On a Citus worker the statements name the tenant's shard tables (jobs.citus.shards); if a shard
        move drops them during the read, it runs once more."""
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
        params = {
            "tenant_id": tenant_id,
            "user_id": user_id,
            "now": now,
            "purposes": purposes,
            "query_text": opening_message,
        }
        item_params = {
            **params,
            "grace_seconds": settings.stale_grace_seconds,
            "age_seconds": settings.stale_age_seconds,
        }
        with self.db.tenant_read(tenant_id, pipeline=True) as (conn, sql, _):  # on a cluster: the tenant's worker
            items = send_open_items(conn, item_params, cfg.max_open_items, sql=sql) if cfg.max_open_items > 0 else None
            sessions = (
                conn.execute(sql("recall_unsummarised"), {**params, "limit": cfg.max_unsummarised})
                if cfg.max_unsummarised > 0
                else None
            )
            open_rows = open_items(conn, items, item_params, cfg.max_open_items, sql) if items is not None else []
            item_episodes = {r["episode_id"] for r in open_rows}  # scored and picked whatever their rank
            scored = read_scores(send_scores(conn, sql, params, vector, cfg, item_episodes))
            if scored.recorded is not None and self._follow_recorded_embedder(scored.recorded):
                return None
            searched = line_episodes(scored.lines, cfg) if cfg.max_lines > 0 else []
            line_rows = (
                under_supers(send_lines(conn, sql, params, vector, cfg, searched).fetchall(), scored)
                if searched
                else []
            )
            picked = fuse(scored.scores, cfg, epoch_us(now), item_episodes)
            for row in line_rows:  # an episode is chosen by the evidence of its lines too (issue 47)
                picked.setdefault(row["episode_id"], unranked())
            ids = sorted(picked)
            chosen = conn.execute(sql("recall_rows"), {**params, "ids": ids, "dim": len(vector)}) if ids else None
            replaced = conn.execute(sql("recall_replaced"), {**params, "ids": ids}) if ids else None
            quoted = conn.execute(sql("recall_quoted_episodes"), {**params, "ids": ids}) if ids else None
        rows = chosen.fetchall() if chosen is not None else []
        with_lines = {r["episode_id"] for r in quoted.fetchall()} if quoted is not None else set()
        for row in rows:
            row["has_lines"] = row["id"] in with_lines
        vectors = unit_vectors(rows)
        query = vector / (norm if (norm := float(np.linalg.norm(vector))) > 0 else 1.0)
        for ep_id, vec in vectors.items():  # the episodes only lines brought in were not scored by SQL
            if picked[ep_id]["distance"] is None and np.any(query):
                picked[ep_id]["distance"] = 1.0 - float(vec @ query)
        rows.sort(
            key=lambda r: (
                picked[r["id"]]["relevance_rank"] or 1 << 62,
                picked[r["id"]]["recency_rank"] or 1 << 62,
                r["id"],
            )
        )
        return _Read(
            open_rows,
            scored.candidates,
            [{**row, **picked[row["id"]]} for row in rows],
            vectors,
            sessions.fetchall() if sessions is not None else [],
            line_rows,
            {
                r["episode_id"]: {"replaced_on": r["replaced_at"].date(), "replaced_by": frozenset(r["replaced_by"])}
                for r in (replaced.fetchall() if replaced is not None else [])
            },
        )
