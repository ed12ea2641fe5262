"""Long sessions (issue 46 #8): the claim-time reader holds a row INSERTed by hand to ingest's limits, and
the offline extractor's dialogue scan is linear in a one-speaker run (it read ahead per message).
Timings are bench/offline_extractor_quality.py's --long; here an operation count."""

from __future__ import annotations

import pytest
from psycopg.types.json import Jsonb

from jobs.db import Database, one
from jobs.extract import make_extractor
from jobs.extract.offline_events import _next_other_speaker
from jobs.models import Message
from jobs.summarize import run_summarize


def _insert(db: Database, session: str, messages: list[dict[str, str]]) -> None:
    with db.tenant("acme") as conn:
        conn.execute(
            "INSERT INTO transcripts (tenant_id, user_id, session_id, ended_at, messages, content_hash) "
            "VALUES ('acme', 'u1', %s, now(), %s, %s)",
            (session, Jsonb(messages), session),
        )


def test_a_hand_inserted_transcript_over_the_message_limit_is_dead_lettered_at_the_claim(db: Database) -> None:
    limit = db.settings.max_messages
    _insert(
        db, "huge", [{"role": "user", "content": f"note {n}: the build took {n} seconds"} for n in range(limit + 1)]
    )
    _insert(db, "fine", [{"role": "user", "content": "We decided to ship the Team plan on Monday."}])
    extractor = make_extractor(db.settings, "offline")
    try:
        report = run_summarize(db, extractor=extractor)
    finally:
        extractor.close()
    assert report.counts == {"done": 1, "dead": 1}, report.counts
    with db.admin() as conn:
        huge = one(conn.execute("SELECT status, last_error, attempts FROM transcripts WHERE session_id = 'huge'"))
        episodes = one(conn.execute("SELECT count(*) AS n FROM episodes"))["n"]
    assert huge["status"] == "dead", huge
    assert f"{limit + 1:,} messages, over the limit of {limit:,}; not summarised" in huge["last_error"]
    assert episodes == 1


def test_the_next_other_speaker_scan_is_linear_in_a_one_speaker_run(monkeypatch: pytest.MonkeyPatch) -> None:
    reads = 0
    speaker = Message.speaker

    def counted(self: Message) -> str:
        nonlocal reads
        reads += 1
        return speaker.fget(self)  # type: ignore[attr-defined,no-any-return]

    monkeypatch.setattr(Message, "speaker", property(counted))
    n = 2_000
    messages = [Message(role="user", content=f"note {i}") for i in range(n)]
    messages += [Message(role="assistant", content="ok")]
    found = _next_other_speaker(messages, list(range(n + 1)))
    assert found == {**dict.fromkeys(range(n), n), n: None}
    assert reads <= 2 * (n + 1), reads  # was about n * n: a scan ahead per message
