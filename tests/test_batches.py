"""Backfill through the Message Batches API, surviving a restart between submit and ingest."""

from __future__ import annotations

import time
from collections.abc import Iterator

import fake_anthropic as fa
import pytest
from episode_responder import responder
from psycopg.types.json import Jsonb

from jobs.batches import BatchRunner
from jobs.db import Database
from jobs.embeddings import get_embedder
from jobs.extract.claude import AnthropicExtractor
from jobs.llm import cost_usd
from jobs.models import ModelCall

MESSAGES = [{"role": "user", "name": "Maria", "content": "We'll go with the Team plan."},
            {"role": "assistant", "content": "Done, I'll send the invoice by Friday."}]


@pytest.fixture
def fake() -> Iterator[fa.FakeAnthropic]:
    with fa.FakeAnthropic(responder=responder) as server:
        server.batch_delay = 0.3
        yield server


@pytest.fixture
def llm_db(db: Database, fake: fa.FakeAnthropic) -> Iterator[Database]:
    settings = db.settings.with_(anthropic_api_key="test-key", anthropic_base_url=fake.base_url, max_retries=0,
                                 extractor="anthropic")
    database = Database(settings, url=db.url)
    yield database
    database.close()


def test_batch_survives_a_restart_and_costs_half(llm_db: Database, fake: fa.FakeAnthropic) -> None:
    with llm_db.tenant("acme") as conn, conn.cursor() as cur:
        cur.executemany(
            "INSERT INTO transcripts (tenant_id, user_id, session_id, ended_at, messages, content_hash) "
            "VALUES ('acme', 'u1', %s, now(), %s, %s)",
            [(f"s{n}", Jsonb(MESSAGES), f"h{n}") for n in range(5)])
        ids = [r["id"] for r in conn.execute("SELECT id FROM transcripts ORDER BY id")]
    fake.fail_batch_requests = {f"t{ids[2]}"}
    embedder = get_embedder("minilm")
    with AnthropicExtractor(llm_db.settings) as claude:
        first = BatchRunner(llm_db, claude, embedder).run(wait=False)  # submit, then the process "stops"
    assert len(first.submitted) == 1 and first.counts["done"] == 0
    with llm_db.admin() as conn:
        leased = conn.execute("SELECT count(*) AS n FROM transcripts WHERE lease_owner LIKE 'batch:%'").fetchone()
        assert leased["n"] == 5
    time.sleep(0.5)  # the fake ends the batch after batch_delay
    with AnthropicExtractor(llm_db.settings) as claude:  # a new process resumes the open batch
        report, still_open = BatchRunner(llm_db, claude, embedder).poll()
    assert still_open == 0
    assert (report.counts["done"], report.counts["failed"]) == (4, 1)
    with llm_db.admin() as conn:
        calls = conn.execute("SELECT * FROM model_calls ORDER BY id").fetchall()
        states = {r["id"]: r["status"] for r in conn.execute("SELECT id, status FROM transcripts")}
        batch = conn.execute("SELECT status, counts FROM model_batches").fetchone()
        current = conn.execute("SELECT count(*) AS n FROM episodes WHERE status = 'current'").fetchone()["n"]
    assert current == 4 and batch["status"] == "ingested"
    assert states[ids[2]] == "pending" and sum(s == "done" for s in states.values()) == 4
    assert all(c["batch"] for c in calls) and len(calls) == 4
    live = llm_db.settings
    for c in calls:
        full = cost_usd(live, ModelCall(template="", prompt_hash="", model="", input_tokens=c["input_tokens"],
                                        output_tokens=c["output_tokens"], cache_read_tokens=c["cache_read_tokens"],
                                        cache_write_tokens=c["cache_write_tokens"]))
        assert float(c["cost_usd"]) == pytest.approx(full / 2, abs=1e-6)
    submitted = [r for r in fake.requests if r.path == "/v1/messages/batches" and r.method == "POST"]
    request = submitted[0].body["requests"][0]["params"]
    assert request["tool_choice"]["name"] == "record_episode"


def test_failed_submission_returns_transcripts_to_the_queue(llm_db: Database, fake: fa.FakeAnthropic) -> None:
    with llm_db.tenant("acme") as conn:
        conn.execute("INSERT INTO transcripts (tenant_id, user_id, session_id, ended_at, messages, content_hash) "
                     "VALUES ('acme', 'u1', 's1', now(), %s, 'h')", (Jsonb(MESSAGES),))
    fake.max_batch_requests = 0  # the API refuses the batch
    with AnthropicExtractor(llm_db.settings) as claude:
        with pytest.raises(Exception):
            BatchRunner(llm_db, claude, get_embedder("minilm")).submit()
    with llm_db.admin() as conn:
        row = conn.execute("SELECT status, lease_owner, last_error FROM transcripts").fetchone()
        batch = conn.execute("SELECT status FROM model_batches").fetchone()
    assert row["status"] == "pending" and row["lease_owner"] is None and "submission failed" in row["last_error"]
    assert batch["status"] == "failed"
