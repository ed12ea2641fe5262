"""Shared setup of the lifecycle tests (resummarize, retention, pins): real sessions, ingested and
summarised by the offline extractor, so every row is what production writes."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

from jobs.db import Database
from jobs.extract.offline import OfflineExtractor
from jobs.ingest import ingest
from jobs.models import ExtractionResult, OpenItem, Transcript
from jobs.summarize import run_summarize


def session(
    n: int,
    *,
    user: str = "u1",
    tenant: str = "acme",
    ended: dt.datetime | None = None,
    words: str = "the Snowflake renewal",
) -> dict[str, Any]:
    """A transcript with a decision, a commitment and an open question, ending at ``ended``."""
    end = ended or dt.datetime(2024, 3, 1, 10, tzinfo=dt.UTC) + dt.timedelta(days=n)
    start = end - dt.timedelta(minutes=20)
    return {
        "tenant_id": tenant,
        "user_id": user,
        "session_id": f"{tenant}-{user}-{n}",
        "purpose": "support",
        "started_at": start.isoformat(),
        "ended_at": end.isoformat(),
        "messages": [
            {"role": "user", "name": "Maria", "content": f"Session {n}: we'll go with the Team plan for {words}."},
            {"role": "assistant", "content": f"Done. I'll send the invoice for session {n} by Friday."},
            {"role": "user", "name": "Maria", "content": f"Can you check whether {words} includes SSO? " * 3},
        ],
    }


def load(db: Database, tmp_path: Path, records: list[dict[str, Any]], embedder: Any, name: str = "t") -> None:
    """Ingest ``records`` and summarise them offline."""
    path = tmp_path / f"{name}.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    report = ingest(db, [path])
    assert not report.rejected
    run_summarize(db, extractor=OfflineExtractor(embedder), embedder=embedder)


def rows(db: Database, sql: str, *params: object) -> list[dict[str, Any]]:
    with db.admin() as conn:
        return conn.execute(sql, params).fetchall()


class RenamedExtractor(OfflineExtractor):
    """The offline extractor under a new prompt version (what a prompt change looks like)."""

    prompt_version = "offline-next"

    def extract(self, transcript: Transcript, open_items: list[OpenItem] | None = None) -> ExtractionResult:
        result = super().extract(transcript, open_items)
        result.prompt_version = self.prompt_version
        return result
