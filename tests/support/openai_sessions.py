"""What the openai back end's tests share: their settings, one transcript, a session in the queue."""

from __future__ import annotations

import datetime as dt
from typing import Any

from psycopg.types.json import Jsonb

from jobs.config import Settings
from jobs.db import Database
from jobs.extract.openai_chat import OpenAIExtractor
from jobs.models import Message, Transcript
from support import fake_openai as fo
from support.episode_responder import OPENAI_MODEL as MODEL


def settings_for(server: fo.FakeOpenAI, **changes: Any) -> Settings:
    return Settings(
        openai_base_url=server.base_url, model=MODEL, max_retries=0, model_timeout_s=5.0, extractor="openai"
    ).with_(**changes)


TRANSCRIPT = Transcript(
    1,
    "acme",
    "u1",
    "s1",
    "support",
    None,
    dt.datetime(2025, 3, 4, 9, 20, tzinfo=dt.UTC),
    [
        Message(role="user", name="Maria", content="We'll go with the Team plan at $49 per seat."),
        Message(role="assistant", content="Done. I'll send the invoice by Friday."),
    ],
)


def extract(settings: Settings) -> Any:
    with OpenAIExtractor(settings) as extractor:
        return extractor.extract(TRANSCRIPT)


def add(db: Database, session: str, said: str = "We'll go with the Team plan at $49 per seat.") -> None:
    messages = [
        {"role": "user", "name": "Maria", "content": said},
        {"role": "assistant", "content": "Done. I'll send the invoice by Friday."},
    ]
    with db.tenant("acme") as conn:
        conn.execute(
            "INSERT INTO transcripts (tenant_id, user_id, session_id, purpose, started_at, ended_at, messages, "
            "content_hash) VALUES ('acme', 'u1', %s, 'support', '2025-03-04 09:00Z', '2025-03-04 09:20Z', %s, "
            "%s) ON CONFLICT (tenant_id, session_id) DO UPDATE SET messages = EXCLUDED.messages, "
            "content_hash = EXCLUDED.content_hash, status = 'pending', next_attempt_at = now(), attempts = 0",
            (session, Jsonb(messages), f"hash-{session}-{said}"),
        )


def rows(db: Database, sql: str) -> list[dict[str, Any]]:
    with db.admin() as conn:
        return list(conn.execute(sql).fetchall())
