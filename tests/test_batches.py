"""Backfill through the Message Batches API, surviving a restart between submit and ingest."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from psycopg.types.json import Jsonb
from support import fake_anthropic as fa
from support.episode_responder import responder

from jobs.db import Database, one
from jobs.embeddings import get_embedder
from jobs.errors import ConfigError
from jobs.extract.claude import AnthropicExtractor
from jobs.extract.offline import OfflineExtractor
from jobs.llm import cost_usd
from jobs.models import MAX_CURRENT_DECISIONS, ModelCall
from jobs.summarize import BatchRunner, run_summarize

# Python logic through the database: runs on one PostgreSQL only (the SQL it reaches is run on Citus by the tests of
# recall, erasure, claims, views and routing).

MESSAGES = [
    {"role": "user", "name": "Maria", "content": "We'll go with the Team plan."},
    {"role": "assistant", "content": "Done, I'll send the invoice by Friday."},
]


@pytest.fixture
def fake() -> Iterator[fa.FakeAnthropic]:
    with fa.FakeAnthropic(responder=responder) as server:
        server.batch_delay = 0.3
        yield server


@pytest.fixture
def llm_db(db: Database, fake: fa.FakeAnthropic) -> Iterator[Database]:
    settings = db.settings.with_(
        anthropic_api_key="test-key", anthropic_base_url=fake.base_url, max_retries=0, extractor="anthropic"
    )
    database = Database(settings, url=db.url)
    yield database
    database.close()


def test_batch_survives_a_restart_and_costs_half(llm_db: Database, fake: fa.FakeAnthropic) -> None:
    with llm_db.tenant("acme") as conn, conn.cursor() as cur:
        cur.executemany(
            "INSERT INTO transcripts (tenant_id, user_id, session_id, ended_at, messages, content_hash) "
            "VALUES ('acme', 'u1', %s, now(), %s, %s)",
            [(f"s{n}", Jsonb(MESSAGES), f"h{n}") for n in range(5)],
        )
        ids = [r["id"] for r in conn.execute("SELECT id FROM transcripts ORDER BY id")]
    fake.fail_batch_requests = {f"t{ids[2]}"}
    fake.batch_delay = 600  # in progress until the test ends it: however slow the machine, the first run sees it open
    embedder = get_embedder("minilm")
    with AnthropicExtractor(llm_db.settings) as claude:
        first = BatchRunner(llm_db, claude, embedder).run(wait=False)  # submit, then the process "stops"
    assert len(first.submitted) == 1 and first.counts["done"] == 0
    with llm_db.admin() as conn:
        leased = one(conn.execute("SELECT count(*) AS n FROM transcripts WHERE lease_owner LIKE 'batch:%'"))
        assert leased["n"] == 5
    fake.end_batches()  # the batch ends while no process is watching
    with AnthropicExtractor(llm_db.settings) as claude:  # a new process resumes the open batch
        report, still_open = BatchRunner(llm_db, claude, embedder).poll()
    assert still_open == 0
    assert (report.counts["done"], report.counts["failed"]) == (4, 1)
    with llm_db.admin() as conn:
        calls = conn.execute("SELECT * FROM model_calls ORDER BY id").fetchall()
        states = {r["id"]: r["status"] for r in conn.execute("SELECT id, status FROM transcripts")}
        batch = one(conn.execute("SELECT status, counts FROM model_batches"))
        current = one(conn.execute("SELECT count(*) AS n FROM episodes WHERE status = 'current'"))["n"]
    assert current == 4 and batch["status"] == "ingested"
    assert states[ids[2]] == "pending" and sum(s == "done" for s in states.values()) == 4
    assert all(c["batch"] for c in calls) and len(calls) == 4
    live = llm_db.settings
    for c in calls:
        full = cost_usd(
            live,
            ModelCall(
                template="",
                prompt_hash="",
                model="",
                input_tokens=c["input_tokens"],
                output_tokens=c["output_tokens"],
                cache_read_tokens=c["cache_read_tokens"],
                cache_write_tokens=c["cache_write_tokens"],
            ),
        )
        assert float(c["cost_usd"]) == pytest.approx(full / 2, abs=1e-6)
    submitted = [r for r in fake.requests if r.path == "/v1/messages/batches" and r.method == "POST"]
    request = submitted[0].body["requests"][0]["params"]
    assert request["tool_choice"]["name"] == "record_episode"


def test_failed_submission_returns_transcripts_to_the_queue(llm_db: Database, fake: fa.FakeAnthropic) -> None:
    with llm_db.tenant("acme") as conn:
        conn.execute(
            "INSERT INTO transcripts (tenant_id, user_id, session_id, ended_at, messages, content_hash) "
            "VALUES ('acme', 'u1', 's1', now(), %s, 'h')",
            (Jsonb(MESSAGES),),
        )
    fake.max_batch_requests = 0  # the API refuses the batch
    with AnthropicExtractor(llm_db.settings) as claude:
        with pytest.raises(Exception):  # noqa: B017 - whatever the SDK raises for a refused batch; the state is checked below
            BatchRunner(llm_db, claude, get_embedder("minilm")).submit()
    with llm_db.admin() as conn:
        row = one(conn.execute("SELECT status, lease_owner, last_error FROM transcripts"))
        batch = one(conn.execute("SELECT status FROM model_batches"))
    assert row["status"] == "pending" and row["lease_owner"] is None and "submission failed" in row["last_error"]
    assert batch["status"] == "failed"


DECIDED = [
    (tool, part)
    for part in ("session store", "audit trail", "billing dashboard")
    for tool in ("Redis", "Kafka", "Grafana", "Terraform", "Sentry", "Vault", "Celery", "Nginx", "Prometheus")
]


class _LoadsOnce:
    """MiniLM that stops loading after its second use (the model folder deleted mid-run)."""

    def __init__(self) -> None:
        self.inner = get_embedder("minilm")
        self.dim = self.inner.dim
        self.name = self.inner.name
        self.used = 0

    def embed(self, texts: Any) -> Any:
        self.used += 1
        if self.used > 2:
            raise ConfigError("embedding model could not be loaded: set EPISODES_CACHE_DIR to a folder you can write")
        return self.inner.embed(texts)


def test_an_embedder_that_stops_loading_gives_every_claim_of_the_batch_back(
    llm_db: Database, fake: fa.FakeAnthropic
) -> None:
    """A user with more standing decisions than the newest offered has the session embedded to find the older
    ones it may amend; when that embedding fails, the batch being assembled gives back every claim."""
    embedder = get_embedder("minilm")
    with llm_db.tenant("acme") as conn, conn.cursor() as cur:
        cur.executemany(
            "INSERT INTO transcripts (tenant_id, user_id, session_id, ended_at, messages, content_hash) "
            "VALUES ('acme', 'u1', %s, now() - make_interval(days => 60 - %s), %s, %s)",
            [
                (f"old{n}", n, Jsonb([{"role": "user", "content": f"Let's use {tool} for the {part}."}]), f"o{n}")
                for n, (tool, part) in enumerate(DECIDED[: MAX_CURRENT_DECISIONS + 1])
            ],
        )
    assert (
        run_summarize(llm_db, extractor=OfflineExtractor(embedder), embedder=embedder).counts["done"]
        == MAX_CURRENT_DECISIONS + 1
    )
    with llm_db.tenant("acme") as conn, conn.cursor() as cur:
        cur.executemany(
            "INSERT INTO transcripts (tenant_id, user_id, session_id, ended_at, messages, content_hash) "
            "VALUES ('acme', 'u1', %s, now(), %s, %s)",
            [(f"s{n}", Jsonb(MESSAGES), f"h{n}") for n in range(3)],
        )
    with AnthropicExtractor(llm_db.settings) as claude:
        with pytest.raises(ConfigError, match="EPISODES_CACHE_DIR"):
            BatchRunner(llm_db, claude, _LoadsOnce()).submit()
    with llm_db.admin() as conn:
        rows = conn.execute(
            "SELECT status, lease_owner, attempts FROM transcripts WHERE session_id LIKE 's%%' ORDER BY id"
        ).fetchall()
        batches = one(conn.execute("SELECT count(*) AS n FROM model_batches"))
    assert [(r["status"], r["lease_owner"], r["attempts"]) for r in rows] == [("pending", None, 0)] * 3
    assert batches["n"] == 0 and fake.calls() == []


def _resolution_after_first_session(
    database: Database, fake: fa.FakeAnthropic, second: str, *, batch: bool
) -> dict[str, Any]:
    """Summarise a first session live (it leaves an open commitment), then a second session that
    fulfils it, live or through a Message Batch; return how the commitment ended and what was sent."""
    from support.episode_responder import resolving_responder

    from jobs.summarize import run_summarize

    with database.tenant("acme") as conn:
        conn.execute(
            "INSERT INTO transcripts (tenant_id, user_id, session_id, started_at, ended_at, messages, "
            "content_hash) VALUES ('acme', 'u1', 'first', '2025-03-04 09:00Z', '2025-03-04 09:30Z', %s, 'h1')",
            (Jsonb(MESSAGES),),
        )
    embedder = get_embedder("minilm")
    with AnthropicExtractor(database.settings) as claude:
        run_summarize(database, extractor=claude, embedder=embedder)
    with database.tenant("acme") as conn:
        conn.execute(
            "INSERT INTO transcripts (tenant_id, user_id, session_id, started_at, ended_at, messages, "
            "content_hash) VALUES ('acme', 'u1', %s, '2025-03-10 09:00Z', '2025-03-10 09:20Z', %s, 'h2')",
            (second, Jsonb([{"role": "assistant", "content": "Here is the invoice I promised."}])),
        )
    fake.responder = resolving_responder
    with AnthropicExtractor(database.settings) as claude:
        if batch:
            report = BatchRunner(database, claude, embedder).run(poll_seconds=0.1)
            assert report.counts["done"] == 1
        else:
            assert run_summarize(database, extractor=claude, embedder=embedder).counts["done"] == 1
    with database.admin() as conn:
        item = one(
            conn.execute(
                "SELECT e.what, e.status, e.resolved_at, ep.session_id AS resolved_in "
                "FROM episode_events e LEFT JOIN episodes ep ON ep.tenant_id = e.tenant_id AND ep.id = e.resolved_by "
                "WHERE e.type = 'commitment'"
            )
        )
        episode = one(conn.execute("SELECT dropped_events FROM episodes WHERE session_id = %s", (second,)))
    return {**item, "dropped_events": episode["dropped_events"]}


def _open_items_block(prompt: str) -> str:
    """The <open_items> section of an extraction prompt, with the item ids masked."""
    return re.sub(r"id \d+", "id N", prompt.split("<open_items>")[1].split("</open_items>")[0])


def test_a_batch_episode_resolves_an_earlier_open_item_like_a_live_one(
    llm_db: Database, fake: fa.FakeAnthropic
) -> None:
    live = _resolution_after_first_session(llm_db, fake, "second", batch=False)
    sent_live = fake.calls()[-1].body["messages"][0]["content"]
    with llm_db.admin() as conn:  # start over in the same database: the same first session, then a batch
        conn.execute("TRUNCATE transcripts, episodes, model_calls, model_batches CASCADE")
    fake.responder = responder
    batched = _resolution_after_first_session(llm_db, fake, "second", batch=True)
    submitted = [r for r in fake.requests if r.path == "/v1/messages/batches" and r.method == "POST"]
    sent_batch = submitted[-1].body["requests"][0]["params"]["messages"][0]["content"]
    # The batch request offered the open commitment exactly as the live request did ...
    assert "(commitment since 2025-03-04)" in sent_batch
    assert _open_items_block(sent_batch) == _open_items_block(sent_live)
    # ... and its answer resolved it the same way: fulfilled by the second session, at its end; the
    # resolution of an item that was never offered is dropped in both paths.
    assert live["status"] == batched["status"] == "done"
    assert live["resolved_in"] == batched["resolved_in"] == "second"
    assert live["resolved_at"] == batched["resolved_at"]
    assert live["resolved_at"].isoformat() == "2025-03-10T09:20:00+00:00"
    assert live["dropped_events"] == batched["dropped_events"] == 1
