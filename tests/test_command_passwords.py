"""Issue 46 #2: a coding session quotes the agent's shell commands, and the passwords in them
(``PGPASSWORD=…``, ``mysql -p…``, ``curl -u user:pass``, ``docker login --password …``, ``redis-cli -a …``,
``sshpass -p …``) never reach what is stored from it: the episode, its lines, events and entities, the
recall block of the next session and the user's export (all but the transcript, which is held as it was
handed over unless EPISODES_STORE_REDACTED is set). Through the real summarize job with the offline
extractor, on the real database."""

from __future__ import annotations

import datetime as dt
import json

from psycopg.types.json import Jsonb
from support.recall_block import check_block

from jobs.db import Database
from jobs.embeddings import Embedder
from jobs.extract.offline import OfflineExtractor
from jobs.recall import Recaller
from jobs.rights.export import export_user
from jobs.summarize import run_summarize

NOW = dt.datetime(2025, 6, 1, 12, 0, tzinfo=dt.UTC)
PASSWORDS = ["Hunter2pg", "My5qlPass", "CurlPw77", "Dock3rPw", "RedisPw88", "SshPw99x", "Mongo55pw"]
SESSION = [
    {"role": "user", "content": "The staging database refuses logins since the migration; please fix the deploy."},
    {
        "role": "assistant",
        "content": "I connected with `PGPASSWORD=Hunter2pg psql -h staging-db -U app` and the migration table "
        "is there; then `mysql -u root -pMy5qlPass shop` for the legacy shop database.",
    },
    {
        "role": "assistant",
        "content": "The health check passes: `curl -u admin:CurlPw77 https://staging.example.com/health` "
        "answers 200. I pushed the image after `docker login --password Dock3rPw -u ci registry.example.com`.",
    },
    {
        "role": "user",
        "content": "Decision: we keep the cache on Redis 7; run `redis-cli -h cache -a RedisPw88 ping` "
        "and `sshpass -p SshPw99x ssh deploy@web` to restart it. Also `mongosh -u admin -p Mongo55pw`.",
    },
    {"role": "assistant", "content": "Done: Redis 7 stays, and the web node was restarted on port 2222."},
]


def _add(db: Database) -> None:
    with db.tenant("acme") as conn:
        conn.execute(
            "INSERT INTO transcripts (tenant_id, user_id, session_id, started_at, ended_at, messages, content_hash) "
            "VALUES ('acme', 'u1', 'staging', '2025-05-30 09:00Z', '2025-05-30 09:20Z', %s, 'h-staging')",
            (Jsonb(SESSION),),
        )


def test_passwords_in_commands_are_redacted_before_they_are_stored(db: Database, embedder: Embedder) -> None:
    _add(db)
    assert run_summarize(db, extractor=OfflineExtractor(embedder), embedder=embedder).counts["done"] == 1
    with db.tenant("acme") as conn:
        stored = [
            json.dumps(row, default=str)
            for sql in (
                "SELECT summary, topic_tags FROM episodes",
                "SELECT * FROM episode_events",
                "SELECT name FROM episode_entities",
                "SELECT text FROM episode_lines",
            )
            for row in conn.execute(sql).fetchall()
        ]
        lines = [r["text"] for r in conn.execute("SELECT text FROM episode_lines").fetchall()]
    assert any("psql -h staging-db" in line for line in lines), lines  # the commands are kept...
    assert any("[SECRET]" in line for line in lines), lines  # ...with their passwords replaced
    assert [p for p in PASSWORDS if any(p in text for text in stored)] == []

    result = Recaller(db, embedder).recall("acme", "u1", "How do I log in to the staging database?", now=NOW)
    block = result.render()
    check_block(block)
    assert "staging" in block, block
    assert [p for p in PASSWORDS if p in block] == []

    exported = export_user(db, "acme", "u1")
    held = json.dumps({k: v for k, v in exported.items() if k != "transcripts"}, default=str)
    assert "psql -h staging-db" in held  # the episode's lines are in the export
    assert [p for p in PASSWORDS if p in held] == []
