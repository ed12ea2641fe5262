"""`episodes serve` and crash safety: NOTIFY pickup, lease rescue, singletons, shutdown, kill -9."""

from __future__ import annotations

import datetime as dt
import logging
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg.types.json import Jsonb
from support import fake_anthropic as fa
from support.fake_anthropic import FakeAnthropic
from support.waiting import wait_until

from jobs import logs
from jobs.db import Database, one
from jobs.embeddings import get_embedder
from jobs.extract.claude import AnthropicExtractor
from jobs.ingest import ingest_records
from jobs.models import Transcript
from jobs.serve import CHANNEL, MAINTENANCE_LOCK, ServeOptions, Server
from jobs.summarize import Finisher, retry_dead
from jobs.summarize.claim import Claimer

pytestmark = pytest.mark.citus  # runs on one PostgreSQL and on the Citus cluster (conftest)

MESSAGES = [
    {"role": "user", "name": "Maria", "content": "We'll go with the Team plan."},
    {"role": "assistant", "content": "Done, I'll send the invoice by Friday."},
]


@pytest.fixture
def llm_db(db: Database, fake: fa.FakeAnthropic) -> Iterator[Database]:
    settings = db.settings.with_(
        anthropic_api_key="test-key",
        anthropic_base_url=fake.base_url,
        max_retries=0,
        model_timeout_s=10.0,
        lease_seconds=5,
        extractor="anthropic",
    )
    database = Database(settings, url=db.url)
    yield database
    database.close()


def add(db: Database, session: str, *, closed: bool = True, tenant: str = "acme") -> None:
    """A transcript through the hosts' write path (``episodes ingest``, ``POST /v1/transcripts``)."""
    now = dt.datetime.now(dt.UTC)
    record = {
        "tenant_id": tenant,
        "user_id": "u1",
        "session_id": session,
        "messages": MESSAGES,
        "started_at": (now - dt.timedelta(minutes=5)).isoformat(),
        "ended_at": now.isoformat() if closed else None,
    }
    report = ingest_records(db, [(f"test:{session}", record)])
    assert not report.rejected, report.rejected


def listening(db: Database) -> bool:
    """A connection of this database has run LISTEN on serve's channel and sits idle, subscribed."""
    with db.admin() as conn:
        return bool(
            one(
                conn.execute(
                    "SELECT count(*) AS n FROM pg_stat_activity WHERE datname = current_database() "
                    "AND state = 'idle' AND query = %s",
                    (f"LISTEN {CHANNEL}",),
                )
            )["n"]
            > 0
        )


def episodes(db: Database) -> int:
    with db.admin() as conn:
        return int(one(conn.execute("SELECT count(*) AS n FROM episodes WHERE status = 'current'"))["n"])


@pytest.fixture
def server(llm_db: Database) -> Iterator[Server]:
    extractor = AnthropicExtractor(llm_db.settings)
    srv = Server(
        llm_db, extractor, ServeOptions(concurrency=2, poll_seconds=120, maintenance_seconds=120, shutdown_deadline=5)
    )
    thread = threading.Thread(target=srv.run, kwargs={"install_signals": False})
    thread.start()
    yield srv
    srv.stop()
    thread.join(timeout=30)
    extractor.close()


def test_notify_wakes_workers_long_before_the_poll(llm_db: Database, server: Server) -> None:
    wait_until(lambda: listening(llm_db), 30, "serve's listener to subscribe")
    add(llm_db, "open", closed=False)
    add(llm_db, "closed")
    # The poll runs every 120 s, so only NOTIFY can explain a pickup within 20 s.
    wait_until(lambda: episodes(llm_db) == 1, 20, "the closed session's episode")
    add(llm_db, "open")  # the host uploads the session again, now closed
    wait_until(lambda: episodes(llm_db) == 2, 20, "the episode of the session closed later")


def test_serve_logs_each_summarised_session_and_no_scheduler_chatter(
    llm_db: Database, capsys: pytest.CaptureFixture[str]
) -> None:
    """An idle `episodes serve` logged APScheduler's "Running job ..." and "executed successfully" for every
    poll (29 lines in 44 s) but no line for the session it summarised (issue 31): now one structured line
    per summarised session and none of the scheduler's."""
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    logs.setup("text", "INFO")  # as the CLI does
    extractor = AnthropicExtractor(llm_db.settings)
    srv = Server(
        llm_db, extractor, ServeOptions(concurrency=1, poll_seconds=0.2, maintenance_seconds=0.2, shutdown_deadline=5)
    )
    thread = threading.Thread(target=srv.run, kwargs={"install_signals": False})
    thread.start()
    try:
        add(llm_db, "logged")
        wait_until(lambda: episodes(llm_db) == 1, 30, "the session's episode")
        wait_until(lambda: maintenance_runs(llm_db) >= 3, 30, "three maintenance runs (the scheduler at work)")
    finally:
        srv.stop()
        thread.join(timeout=30)
        extractor.close()
        root.handlers[:], level = saved
        root.setLevel(level)
    lines = capsys.readouterr().err.splitlines()
    assert [
        line
        for line in lines
        if "apscheduler" in line.lower() or "Running job" in line or "executed successfully" in line
    ] == []
    (line,) = [line for line in lines if " summarised " in line]
    assert " INFO " in line and "session=logged" in line and "tenant=acme" in line
    for field in ("episode_id=", "events=", "tokens_in=", "tokens_out=", "model_ms=", "ms="):
        assert field in line, line


def maintenance_runs(db: Database) -> int:
    with db.admin() as conn:
        return int(one(conn.execute("SELECT count(*) AS n FROM job_runs WHERE job = 'maintenance'"))["n"])


def test_every_path_that_makes_a_transcript_due_again_wakes_serve(llm_db: Database) -> None:
    """No trigger notifies any more (migration 0016): each statement path sends it from the application,
    on the server every process connects to (on a cluster, the coordinator)."""
    finisher = Finisher(llm_db, get_embedder("hashing:384"))
    with psycopg.connect(llm_db.url, autocommit=True) as listener:
        listener.execute(f"LISTEN {CHANNEL}")

        def wakes() -> int:
            return len(list(listener.notifies(timeout=10, stop_after=1)))

        def claimed() -> Transcript:
            transcript = Claimer(llm_db, owner="w1", lease_seconds=60).claim()
            assert transcript is not None
            return transcript

        add(llm_db, "s1")  # ingest
        assert wakes() == 1
        finisher.release(claimed(), owner="w1")  # a claim given back (shutdown, configuration error)
        assert wakes() == 1
        assert finisher.fail(claimed(), "batch request errored", owner="w1", backoff=False) == "failed"
        assert wakes() == 1
        claimed()
        with llm_db.admin() as conn:
            conn.execute("UPDATE transcripts SET lease_until = now() - interval '1 second'")
        with AnthropicExtractor(llm_db.settings) as extractor:  # lease rescue
            assert Server(llm_db, extractor, ServeOptions()).maintenance() == {"rescued": 1, "pruned_runs": 0}
        assert wakes() == 1
        assert finisher.fail(claimed(), "refused", owner="w1", permanent=True) == "dead"
        assert retry_dead(llm_db) == 1  # episodes retry
        assert wakes() == 1


def test_maintenance_rescues_expired_claims_and_closes_idle_sessions(llm_db: Database) -> None:
    add(llm_db, "held")
    add(llm_db, "idle", closed=False)
    with llm_db.admin() as conn:
        conn.execute(
            "UPDATE transcripts SET status = 'running', lease_owner = 'dead-worker', attempts = 1, "
            "lease_until = now() - interval '1 second' WHERE session_id = 'held'"
        )
        conn.execute("UPDATE transcripts SET updated_at = now() - interval '2 hours' WHERE session_id = 'idle'")
    with AnthropicExtractor(llm_db.settings) as extractor:
        srv = Server(llm_db, extractor, ServeOptions(idle_close_seconds=3600))
        counts = srv.maintenance()
    assert counts == {"rescued": 1, "idle_closed": 1, "pruned_runs": 0}
    with llm_db.admin() as conn:
        rows = {
            r["session_id"]: r
            for r in conn.execute("SELECT session_id, status, ended_at, lease_owner, attempts FROM transcripts")
        }
        run = conn.execute("SELECT job, status, counts FROM job_runs").fetchone()
    assert rows["held"]["status"] == "pending" and rows["held"]["lease_owner"] is None
    assert rows["held"]["attempts"] == 1  # the lost attempt stays counted
    assert rows["idle"]["ended_at"] is not None
    assert run == {"job": "maintenance", "status": "ok", "counts": counts}


def test_singleton_jobs_run_in_one_process_at_a_time(llm_db: Database) -> None:
    with psycopg.connect(llm_db.url, autocommit=True) as other:
        other.execute("SELECT pg_advisory_lock(%s)", (MAINTENANCE_LOCK,))
        with AnthropicExtractor(llm_db.settings) as extractor:
            assert Server(llm_db, extractor, ServeOptions()).maintenance() is None
    with AnthropicExtractor(llm_db.settings) as extractor:
        assert Server(llm_db, extractor, ServeOptions()).maintenance() is not None


def test_shutdown_releases_claims_still_in_flight_after_the_deadline(llm_db: Database, fake: FakeAnthropic) -> None:
    fake.latency = 4.0
    add(llm_db, "slow")
    with AnthropicExtractor(llm_db.settings) as extractor:
        srv = Server(llm_db, extractor, ServeOptions(concurrency=1, poll_seconds=120, shutdown_deadline=0.2))
        thread = threading.Thread(target=srv.run, kwargs={"install_signals": False})
        thread.start()
        wait_until(lambda: len(fake.calls()) == 1, 20, "the model call")
        srv.stop()
        thread.join(timeout=30)
        with llm_db.admin() as conn:
            row = conn.execute("SELECT status, lease_owner, attempts FROM transcripts").fetchone()
        assert row == {"status": "pending", "lease_owner": None, "attempts": 0}
        # The abandoned call returns and its worker finds the claim gone: its write must not land.
        wait_until(lambda: sum(srv.counts.values()), 20, "the abandoned call's worker to finish")
        assert dict(srv.counts) == {"lost": 1}
    assert episodes(llm_db) == 0


# --- kill -9 ----------------------------------------------------------------------------------


def worker(llm_db: Database, *args: str, crash_at: str | None = None) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("EPISODES_", "ANTHROPIC_"))}
    env.update(
        DATABASE_URL=llm_db.url,
        ANTHROPIC_API_KEY="test-key",
        ANTHROPIC_BASE_URL=str(llm_db.settings.anthropic_base_url),
        EPISODES_EXTRACTOR="anthropic",
        HF_HUB_OFFLINE="1",
    )
    base = ["run", "--concurrency", "1"] if "--concurrency" not in args else ["run"]
    # `episodes run` with no SDK retries, a 5 s lease and the crash point armed (tests/support/crash_worker.py)
    return subprocess.Popen(
        [sys.executable, str(Path(__file__).parent / "support" / "crash_worker.py"), crash_at or "-", *base, *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def live_leases(db: Database) -> int:
    with db.admin() as conn:
        return int(
            one(conn.execute("SELECT count(*) AS n FROM transcripts WHERE status = 'running' AND lease_until > now()"))[
                "n"
            ]
        )


def assert_exactly_once(db: Database, sessions: int) -> None:
    with db.admin() as conn:
        row = conn.execute(
            "SELECT count(*) AS current, count(DISTINCT session_id) AS distinct_sessions FROM episodes "
            "WHERE status = 'current'"
        ).fetchone()
        done = one(conn.execute("SELECT count(*) AS n FROM transcripts WHERE status = 'done'"))["n"]
    assert row == {"current": sessions, "distinct_sessions": sessions}
    assert done == sessions


@pytest.mark.slow
@pytest.mark.parametrize("crash_at", ["after_claim", "during_model_call", "after_model_call", "during_commit"])
def test_kill_9_at_every_stage_loses_and_doubles_nothing(llm_db: Database, fake: FakeAnthropic, crash_at: str) -> None:
    for n in range(3):
        add(llm_db, f"s{n}")
    if crash_at == "during_model_call":
        fake.latency = 30.0
        proc = worker(llm_db)
        wait_until(lambda: len(fake.calls()) == 1, 60, "the worker's model call")
        proc.send_signal(signal.SIGKILL)
        fake.latency = 0.0
    else:
        proc = worker(llm_db, crash_at=crash_at)
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.wait(timeout=120) == -signal.SIGKILL, proc.stderr.read()
    proc.stdout.close()
    proc.stderr.close()
    assert episodes(llm_db) == 0  # nothing of the killed attempt persisted
    with llm_db.admin() as conn:  # the killed worker's claim is visible until its lease expires
        assert one(conn.execute("SELECT count(*) AS n FROM transcripts WHERE status = 'running'"))["n"] == 1
    restart = worker(llm_db)
    out, err = restart.communicate(timeout=180)
    assert restart.returncode == 0, err
    if "done 3" not in out:  # the killed claim's lease had not expired yet: run again after it has
        wait_until(lambda: not live_leases(llm_db), 30, "the killed worker's lease to expire")
        again = worker(llm_db)
        out, err = again.communicate(timeout=180)
        assert again.returncode == 0, err
    assert_exactly_once(llm_db, 3)


@pytest.mark.slow
@pytest.mark.parametrize("workers", [2, 4])
def test_concurrent_worker_processes_process_each_transcript_once(
    llm_db: Database, fake: FakeAnthropic, workers: int
) -> None:
    with llm_db.tenant("acme") as conn, conn.cursor() as cur:
        cur.executemany(
            "INSERT INTO transcripts (tenant_id, user_id, session_id, ended_at, messages, content_hash) "
            "VALUES ('acme', %s, %s, now(), %s, %s)",
            [(f"u{n % 20}", f"s{n}", Jsonb(MESSAGES), f"h{n}") for n in range(500)],
        )
    procs = [worker(llm_db, "--concurrency", "4") for _ in range(workers)]
    for proc in procs:
        _out, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err
    assert_exactly_once(llm_db, 500)
    # Episodes are exactly once; a model call may repeat if a lease expired under load (at-least-once calls).
    assert len(fake.calls()) >= 500
