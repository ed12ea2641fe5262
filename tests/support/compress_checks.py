"""What the compress tests read back from the tables (snapshot, lineage, pointers, unreachable, half_written), an
erasure's effect on episodes (delete_episodes), the offline run at the tests' clock (offline, NOW)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from jobs.compress import OfflineCompressor, run_compress
from jobs.compress.run import CompressReport
from jobs.db import Database, one
from jobs.embeddings import Embedder
from jobs.sql import query

NOW = dt.datetime(2026, 11, 21, 12, 0, tzinfo=dt.UTC)
YEAR_2024 = (dt.date(2024, 1, 1), dt.date(2024, 12, 31))

TABLES = ("episodes", "episode_events", "episode_entities", "episode_lineage", "model_calls", "transcripts")


def snapshot(db: Database) -> dict[str, str]:
    """Every row of every data table, as text (job_runs, the run history, is expected to grow)."""
    with db.admin() as conn:
        return {
            t: one(conn.execute(f"SELECT coalesce(json_agg(x ORDER BY x::text)::text, '[]') AS j FROM {t} x"))["j"]
            for t in TABLES
        }


def lineage(db: Database, super_id: int) -> list[int]:
    with db.admin() as conn:
        return [
            r["source_episode_id"]
            for r in conn.execute(
                "SELECT source_episode_id FROM episode_lineage WHERE super_episode_id = %s ORDER BY 1", (super_id,)
            )
        ]


def delete_episodes(db: Database, ids: list[int], tenant: str = "acme") -> None:
    """What an erasure does to episodes: what points at them is released first (migration 0016's
    NO ACTION keys), then they go; their events, entities and lineage rows cascade."""
    with db.tenant(tenant) as conn:
        conn.execute(query("release_references"), {"tenant_id": tenant, "ids": ids})
        conn.execute("DELETE FROM episodes WHERE tenant_id = %s AND id = ANY(%s)", (tenant, ids))


def pointers(db: Database, ids: list[int]) -> list[int | None]:
    with db.admin() as conn:
        return [
            r["compressed_into"]
            for r in conn.execute("SELECT compressed_into FROM episodes WHERE id = ANY(%s) ORDER BY id", (ids,))
        ]


def unreachable(db: Database, super_id: int, source_ids: list[int]) -> int:
    """Decisions and open questions / commitments of the sources that no event of the super cites."""
    with db.admin() as conn:
        return int(
            one(
                conn.execute(
                    "SELECT count(*) AS n FROM episode_events src WHERE src.episode_id = ANY(%s) "
                    "AND (src.type = 'decision' OR (src.type IN ('open_question', 'commitment') AND src.status = 'open')) "
                    "AND NOT EXISTS (SELECT 1 FROM episode_events s WHERE s.tenant_id = src.tenant_id AND s.episode_id = %s "
                    "AND s.source_event_id = src.id)",
                    (source_ids, super_id),
                )
            )["n"]
        )


def half_written(db: Database) -> int:
    """Supers missing their lineage or their events."""
    with db.admin() as conn:
        return int(
            one(
                conn.execute(
                    "SELECT count(*) AS n FROM episodes s WHERE s.kind = 'super' AND ("
                    "(SELECT count(*) FROM episode_lineage l WHERE l.tenant_id = s.tenant_id AND l.super_episode_id = s.id) < 2 "
                    "OR NOT EXISTS (SELECT 1 FROM episode_events e WHERE e.tenant_id = s.tenant_id AND e.episode_id = s.id))"
                )
            )["n"]
        )


def offline(db: Database, embedder: Embedder, **kwargs: Any) -> CompressReport:
    return run_compress(db, compressor=OfflineCompressor(embedder), embedder=embedder, now=NOW, **kwargs)
