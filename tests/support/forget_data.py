"""Two users' history for the erasure and export tests, made by the real pipeline: Zoe's and Bob's sessions in
acme and Zoe's in globex (RECORDS, with words only each one said), ingested and summarised through the fake server,
with super-summaries, model calls and job runs (populate)."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

from psycopg.types.json import Jsonb

from jobs.db import Database
from jobs.embeddings import Embedder
from jobs.extract.claude import AnthropicExtractor
from jobs.ingest import ingest
from jobs.models import Entity, EpisodeExtraction, KeyEvent, ModelCall, search_text
from jobs.store import EpisodeRow, insert_episode, record_calls
from jobs.summarize import run_summarize

ZOE, BOB = "u-zoe-7731", "u-bob-1204"
ZOE_WORDS = ["Zanzibar", "quokka", "Thelonious", "marzipan"]  # only in Zoe's acme sessions
BOB_WORDS = ["Reykjavik", "kohlrabi"]
GLOBEX_WORDS = ["Patagonia", "axolotl"]  # Zoe's sessions in the other tenant


def record(tenant: str, user: str, session: str, day: str, lines: list[tuple[str, str]]) -> dict[str, Any]:
    return {
        "tenant_id": tenant,
        "user_id": user,
        "session_id": session,
        "purpose": "support",
        "started_at": f"{day}T09:00:00Z",
        "ended_at": f"{day}T09:30:00Z",
        "messages": [
            {
                "role": "user" if who != "assistant" else "assistant",
                "content": text,
                **({"name": who} if who != "assistant" else {}),
            }
            for who, text in lines
        ],
    }


RECORDS = [
    record(
        "acme",
        ZOE,
        "zoe-1",
        "2023-03-04",
        [
            ("Zoe", "We'll go with the Zanzibar quokka tour in May."),
            ("assistant", "Booked. I'll send the Thelonious lodge voucher by Friday."),
        ],
    ),
    record(
        "acme",
        ZOE,
        "zoe-2",
        "2023-06-10",
        [
            ("Zoe", "Can you add marzipan to the Zanzibar welcome basket?"),
            ("assistant", "I'll ask the lodge today."),
        ],
    ),
    record(
        "acme",
        ZOE,
        "zoe-3",
        "2025-02-01",
        [
            ("Zoe", "Remind me what we decided about the quokka tour."),
            ("assistant", "You decided on the May tour."),
        ],
    ),
    record(
        "acme",
        BOB,
        "bob-1",
        "2023-04-01",
        [
            ("Bob", "We'll go with the Reykjavik kohlrabi festival."),
            ("assistant", "Great choice."),
        ],
    ),
    record(
        "acme",
        BOB,
        "bob-2",
        "2023-08-01",
        [
            ("Bob", "I'll bring kohlrabi soup to Reykjavik."),
            ("assistant", "Noted."),
        ],
    ),
    record(
        "globex",
        ZOE,
        "gz-1",
        "2024-05-05",
        [
            ("Zoe", "We'll go with the Patagonia axolotl exhibit."),
            ("assistant", "I'll reserve two seats."),
        ],
    ),
]


def populate(db: Database, tmp_path: Path, embedder: Embedder) -> dict[str, int]:
    """Ingest, summarise through the fake server, add super-summaries, model calls and job runs."""
    path = tmp_path / "sessions.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in RECORDS))
    assert ingest(db, [path]).inserted == len(RECORDS)
    with AnthropicExtractor(db.settings) as extractor:
        assert run_summarize(db, extractor=extractor, embedder=embedder).counts == {"done": len(RECORDS)}
    with db.admin() as conn:
        ids = {r["session_id"]: r["id"] for r in conn.execute("SELECT id, session_id FROM episodes")}
    zoe_super = _super(
        db, embedder, ZOE, "Over 2023 Zoe planned the Zanzibar quokka tour with marzipan.", [ids["zoe-1"], ids["zoe-2"]]
    )
    # A super of another user that (against the rules of compress) mixed in one of Zoe's episodes.
    bob_super = _super(
        db,
        embedder,
        BOB,
        "In 2023 Bob went to Reykjavik; a Zanzibar quokka tour came up too.",
        [ids["bob-1"], ids["zoe-1"]],
    )
    with db.tenant("acme") as conn:
        record_calls(
            conn,
            [
                ModelCall(
                    template="compress_sessions_user.j2", prompt_hash="abc123", model="m", input_tokens=10, error=None
                )
            ],
            tenant_id="acme",
            user_id=ZOE,
            transcript_id=None,
            job_run_id=None,
        )
    with db.admin() as conn:
        conn.execute(
            "INSERT INTO job_runs (job, worker, status, error, counts) VALUES "
            "('compress', 'w1', 'failed', %s, '{}'), ('compress', 'w1', 'failed', %s, %s)",
            (f"acme/{ZOE} 2023: the model refused", "acme/u-zoe-77310 2023: the model refused", Jsonb({"failed": 1})),
        )
    return {"zoe_super": zoe_super, "bob_super": bob_super, **ids}


def _super(db: Database, embedder: Embedder, user: str, summary: str, sources: list[int]) -> int:
    episode = EpisodeExtraction(
        summary=summary,
        topic_tags=["travel"],
        importance=0.7,
        key_events=[KeyEvent(type="decision", what=summary, evidence=[0], who="user")],
        entities=[Entity(name="Zanzibar" if "Zanzibar" in summary else "Reykjavik", kind="place")],
    )
    row = EpisodeRow(
        tenant_id="acme",
        user_id=user,
        kind="super",
        episode=episode,
        started_at=dt.datetime(2023, 1, 1, tzinfo=dt.UTC),
        ended_at=dt.datetime(2023, 12, 31, tzinfo=dt.UTC),
        model="offline",
        prompt_version="compress-test",
        embedding=embedder.embed([search_text(episode)])[0],
        period_start=dt.date(2023, 1, 1),
        period_end=dt.date(2023, 12, 31),
    )
    with db.tenant("acme") as conn:
        super_id = insert_episode(conn, row)
        for source in sources:
            conn.execute(
                "INSERT INTO episode_lineage (tenant_id, user_id, super_episode_id, source_episode_id) "
                "VALUES ('acme', %s, %s, %s)",
                (user, super_id, source),
            )
            conn.execute("UPDATE episodes SET compressed_into = %s WHERE id = %s", (super_id, source))
    return super_id
