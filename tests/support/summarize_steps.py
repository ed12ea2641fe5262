"""The steps of a summarize test: a closed session added, a run through the Anthropic extractor (against the
fake server the settings point at), and what the run left (current episodes, transcript states, model calls)."""

from __future__ import annotations

from typing import Any

from psycopg.types.json import Jsonb

from jobs.db import Database, one
from jobs.embeddings import Embedder
from jobs.extract.claude import AnthropicExtractor
from jobs.summarize import run_summarize
from jobs.summarize.report import RunReport


def add(
    db: Database, session: str, messages: list[dict[str, Any]] | None = None, tenant: str = "acme", user: str = "u1"
) -> None:
    msgs = messages or [
        {"role": "user", "name": "Maria", "content": "We'll go with the Team plan at $49 per seat."},
        {"role": "assistant", "content": "Done. I'll send the invoice by Friday."},
        {"role": "user", "name": "Maria", "content": "Thanks!"},
    ]
    with db.tenant(tenant) as conn:
        conn.execute(
            "INSERT INTO transcripts (tenant_id, user_id, session_id, purpose, started_at, ended_at, messages, "
            "content_hash) VALUES (%s, %s, %s, 'support', '2025-03-04 09:00Z', '2025-03-04 09:20Z', %s, %s)",
            (tenant, user, session, Jsonb(msgs), f"hash-{session}-{len(msgs)}"),
        )


def run(db: Database, embedder: Embedder, concurrency: int = 1) -> RunReport:
    with AnthropicExtractor(db.settings) as extractor:
        return run_summarize(db, extractor=extractor, embedder=embedder, concurrency=concurrency)


def state(db: Database) -> dict[str, Any]:
    with db.admin() as conn:
        return {
            "episodes": one(conn.execute("SELECT count(*) AS n FROM episodes WHERE status = 'current'"))["n"],
            "transcripts": {
                r["session_id"]: (r["status"], r["attempts"])
                for r in conn.execute("SELECT session_id, status, attempts FROM transcripts")
            },
            "calls": [r["outcome"] for r in conn.execute("SELECT outcome FROM model_calls ORDER BY id")],
        }
