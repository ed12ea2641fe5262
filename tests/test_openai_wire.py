"""The openai back end's wire (issue 46 #9, #13, #14, #17), through the REAL `openai` SDK against the
local stand-in (tests/support/fake_openai.py) and the real database: a model name is required, a stopped
server gives the claim back with no attempt counted, a proxy's HTML page is a failed call with its reason,
a redirect to another origin is refused before the transcript goes there, an unparseable answer is
quoted in its error, and the password in OPENAI_BASE_URL is shown nowhere (status, logs, errors, run
history, the Claude Code hooks' log)."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from click.testing import CliRunner
from support import fake_openai as fo
from support.claude_code_cli import _hook
from support.episode_responder import OPENAI_MODEL as MODEL
from support.episode_responder import model_like
from support.openai_sessions import add, extract, rows, settings_for
from support.waiting import wait_until

from jobs.claude_code.places import log_file
from jobs.cli import cli
from jobs.compress import make_compressor
from jobs.config import Settings
from jobs.db import Database
from jobs.errors import ConfigError, ExtractionError, TransientModelError
from jobs.extract.openai_chat import OpenAIExtractor
from jobs.llm.openai_wire import ServerUnreachable
from jobs.logs import JsonFormatter, TextFormatter, hide_secrets
from jobs.summarize import run_summarize
from jobs.summarize import worker as worker_module
from jobs.summarize.summarizer import Summarizer
from jobs.summarize.worker import Worker

PASSWORD = "S3cretPw9"
PROXY_PAGE = (
    "<!DOCTYPE html><html><head><title>Sign in to the corporate proxy</title></head>\n"
    "<body><form action='/login'>user <input name=u> password <input name=p></form></body></html>"
)


@pytest.fixture
def server() -> Iterator[fo.FakeOpenAI]:
    with fo.FakeOpenAI(model_like) as fake:
        yield fake


def with_password(url: str) -> str:
    return url.replace("http://", f"http://alice:{PASSWORD}@", 1)


# --- #17: a model name, a stopped server, an unparseable answer ------------------------------------


def test_the_openai_back_end_refuses_to_start_without_a_model_name(server: fo.FakeOpenAI) -> None:
    settings = Settings(openai_base_url=server.base_url, extractor="openai")  # EPISODES_MODEL unset
    with pytest.raises(ConfigError, match="needs a model name: set EPISODES_MODEL") as caught:
        OpenAIExtractor(settings)
    assert "\n" not in str(caught.value) and "claude-haiku-4-5 is the anthropic back end's default" in str(caught.value)
    with pytest.raises(ConfigError, match="set EPISODES_MODEL"):
        make_compressor(settings, "openai")
    assert server.calls() == []


def test_run_without_a_model_name_exits_1_and_claims_nothing(
    db: Database, server: fo.FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    add(db, "s1")
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    result = CliRunner().invoke(cli, ["run", "--extractor", "openai"])
    assert result.exit_code == 1
    assert result.stderr.strip().splitlines()[-1].startswith("episodes: The openai back end needs a model name")
    assert server.calls() == []
    (transcript,) = rows(db, "SELECT status, attempts FROM transcripts")
    assert (transcript["status"], transcript["attempts"]) == ("pending", 0)
    assert rows(db, "SELECT count(*) AS n FROM model_calls")[0]["n"] == 0  # nothing priced as Haiku
    assert "model unset: set EPISODES_MODEL" in CliRunner().invoke(cli, ["status"]).output


def test_a_stopped_server_gives_the_claim_back_and_never_dead_letters(
    db: Database, embedder: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    with fo.FakeOpenAI() as stopped:
        url = stopped.base_url  # the port is closed now: connection refused
    add(db, "s1")
    monkeypatch.setenv("OPENAI_BASE_URL", url)
    monkeypatch.setenv("EPISODES_MODEL", MODEL)
    result = CliRunner().invoke(cli, ["run", "--extractor", "openai"])  # the SDK's 4 retries, then one line
    assert result.exit_code == 1
    error = result.stderr.strip().splitlines()[-1]
    assert error.startswith(f"episodes: cannot reach the model server at {url}") and "no attempt counted" in error
    settings = db.settings.with_(openai_base_url=url, model=MODEL, max_retries=0, max_attempts=2)
    database = Database(settings, url=db.url)
    try:
        for _ in range(settings.max_attempts + 2):  # more runs than attempts allowed
            with OpenAIExtractor(settings) as extractor, pytest.raises(ServerUnreachable):
                run_summarize(database, extractor=extractor, embedder=embedder)
    finally:
        database.close()
    (transcript,) = rows(db, "SELECT status, attempts, last_error FROM transcripts")
    assert (transcript["status"], transcript["attempts"], transcript["last_error"]) == ("pending", 0, None)


def test_a_refused_connection_is_a_setting_to_fix_not_a_failed_attempt() -> None:
    with fo.FakeOpenAI() as stopped:
        url = stopped.base_url
    with pytest.raises(ServerUnreachable, match="Connection refused") as caught:
        extract(Settings(openai_base_url=url, model=MODEL, max_retries=0))
    assert isinstance(caught.value, ConfigError)  # what the summarize job gives back uncounted


def test_a_timeout_still_counts_an_attempt(server: fo.FakeOpenAI) -> None:
    server.enqueue(fo.hang(3.0))
    with pytest.raises(TransientModelError):  # the server is up but slow: the session is retried later
        extract(settings_for(server, model_timeout_s=0.5))


def test_an_unparseable_answer_is_quoted_in_the_error(server: fo.FakeOpenAI) -> None:
    said = f"Sure! The episode: the user logs in at http://bob:{PASSWORD}@db.example.com and"
    server.enqueue(fo.content(said), fo.content("Here it is: {summary: oops"))
    with pytest.raises(ExtractionError) as caught:
        extract(settings_for(server))
    message = str(caught.value)
    assert message.startswith("invalid model output after one repair request: malformed JSON")
    assert "the answer began 'Here it is: {summary: oops'" in message and "\n" not in message
    first = caught.value.calls[0].error or ""
    assert "the answer began 'Sure! The episode: the user logs in at http://bob:***@db.example.com" in first
    assert PASSWORD not in first


# --- #14: a proxy's HTML page ----------------------------------------------------------------------


def test_an_html_page_is_an_unreadable_answer_with_its_reason(server: fo.FakeOpenAI) -> None:
    server.enqueue(fo.html(PROXY_PAGE))
    with pytest.raises(TransientModelError) as caught:
        extract(settings_for(server))
    message = str(caught.value)
    assert message.startswith(
        f"unreadable response from the model server at {server.base_url}: a body of type text/html"
    )
    assert "<title>Sign in to the corporate proxy</title>" in message and "\n" not in message
    (call,) = caught.value.calls
    assert call.outcome == "transient" and "text/html" in (call.error or "")


def test_an_html_page_through_the_job_is_a_recorded_failed_call(
    db: Database, server: fo.FakeOpenAI, embedder: Any, caplog: pytest.LogCaptureFixture
) -> None:
    add(db, "s1")
    server.responder = lambda body: fo.html(PROXY_PAGE)
    settings = db.settings.with_(openai_base_url=server.base_url, model=MODEL, max_retries=0)
    database = Database(settings, url=db.url)
    try:
        with OpenAIExtractor(settings) as extractor, caplog.at_level(logging.WARNING):
            report = run_summarize(database, extractor=extractor, embedder=embedder)
    finally:
        database.close()
    assert report.counts == {"failed": 1}
    assert not [r for r in caplog.records if r.exc_info]  # no traceback: one line
    (call,) = rows(db, "SELECT outcome, error, transcript_id FROM model_calls")
    assert call["outcome"] == "transient" and call["transcript_id"] is not None
    assert "a body of type text/html (HTTP 200), not a chat completion" in call["error"]
    (transcript,) = rows(db, "SELECT status, attempts, last_error FROM transcripts")
    assert transcript["status"] == "pending" and transcript["attempts"] == 1
    assert transcript["last_error"].startswith("unreadable response from the model server")
    assert "AttributeError" not in transcript["last_error"]


def _completion(message: dict[str, Any] | None = None, **changes: Any) -> str:
    choice = {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "{}", **(message or {})}}
    body = {"id": "c", "object": "chat.completion", "created": 1, "model": MODEL, "choices": [choice]}
    return json.dumps({**body, **changes})


@pytest.mark.parametrize(
    ("body", "said"),
    [
        (_completion(message={"content": [{"type": "text", "text": "hi"}]}), "content: Input should be a valid string"),
        (_completion(message={"content": None, "tool_calls": "oops"}), "tool_calls: Input should be a valid list"),
        (_completion(usage="lots"), "usage: Input should be a valid dictionary"),
        (_completion(choices={"a": 1}), "choices: Input should be a valid list"),
        ('{"error": "upstream timed out"}', "choices: Field required"),
    ],
    ids=["content-a-list", "tool-calls-a-string", "usage-a-string", "choices-an-object", "an-error-object"],
)
def test_a_json_body_of_another_shape_is_unreadable_not_a_traceback(
    server: fo.FakeOpenAI, body: str, said: str
) -> None:
    server.enqueue(fo.raw(200, body))
    with pytest.raises(TransientModelError) as caught:
        extract(settings_for(server))
    message = str(caught.value)
    assert "a body of type application/json (HTTP 200), not a chat completion (" in message and said in message
    assert caught.value.calls[0].outcome == "transient" and "\n" not in message


# --- #13: redirects ------------------------------------------------------------------------------


def test_a_redirect_to_another_origin_is_refused_before_the_transcript_goes_there(server: fo.FakeOpenAI) -> None:
    with fo.FakeOpenAI(model_like) as elsewhere:
        server.enqueue(fo.redirect(f"{elsewhere.base_url}/chat/completions"))
        with pytest.raises(ConfigError) as caught:
            extract(settings_for(server))
        assert elsewhere.requests == []  # never sent there
    message = str(caught.value)
    assert f"answered 307 with a redirect to {elsewhere.base_url}/chat/completions" in message
    assert "does not follow a redirect to another origin" in message and "\n" not in message
    assert len(server.calls()) == 1


def test_a_redirect_on_the_same_origin_is_followed(server: fo.FakeOpenAI) -> None:
    server.enqueue(fo.redirect(f"{server.base_url}/chat/completions?moved=1", status=308))
    result = extract(settings_for(server))
    assert len(server.calls()) == 2 and [c.outcome for c in result.calls] == ["ok"]
    assert result.extraction.summary


# --- #9: the password in OPENAI_BASE_URL ---------------------------------------------------------


def test_status_shows_the_address_without_its_password(
    db: Database, server: fo.FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", with_password(server.base_url) + "?api_key=k3yV4lue")
    monkeypatch.setenv("EPISODES_MODEL", MODEL)
    with db.admin() as conn:  # a run and a dead letter recorded by an earlier version, secrets and all
        conn.execute(
            "INSERT INTO job_runs (job, worker, status, finished_at, error) VALUES ('summarize', 'w', 'failed', now(), %s)",
            (f"cannot reach http://alice:{PASSWORD}@host/v1",),
        )
    status = CliRunner().invoke(cli, ["status"])
    assert status.exit_code == 0, status.output
    assert PASSWORD not in status.output and "k3yV4lue" not in status.output
    assert "openai at http://alice:***@127.0.0.1:" in status.output and f"model {MODEL}" in status.output
    assert "error: cannot reach http://alice:***@host/v1" in status.output


def test_no_error_log_or_run_history_holds_the_password(
    db: Database, server: fo.FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    add(db, "s1")
    monkeypatch.setenv("OPENAI_BASE_URL", with_password(server.base_url))
    monkeypatch.setenv("EPISODES_MODEL", MODEL)
    failure = fo.error(500, f"upstream http://alice:{PASSWORD}@127.0.0.1/v1 failed", retry_after=0.01)
    server.enqueue(*[failure] * 5)  # the first try and the SDK's 4 retries
    for flags, outcome in (([], "failed 1"), (["-v"], "done 1")):  # INFO; DEBUG (httpx2 logs each URL at INFO)
        result = CliRunner().invoke(cli, [*flags, "run", "--extractor", "openai", "--concurrency", "1"])
        assert outcome in result.output, result.output
        assert PASSWORD not in result.output and PASSWORD not in result.stderr
        with db.admin() as conn:
            conn.execute("UPDATE transcripts SET next_attempt_at = now()")  # skip the backoff
    stored = rows(db, "SELECT last_error AS e FROM transcripts UNION ALL SELECT error FROM model_calls")
    stored += rows(db, "SELECT error AS e FROM job_runs")
    assert any("http://alice:***@127.0.0.1" in (r["e"] or "") for r in stored), stored
    assert not [r for r in stored if PASSWORD in (r["e"] or "")]


def test_a_child_process_logging_at_info_shows_no_password(db: Database, server: fo.FakeOpenAI) -> None:
    """The real console script's stderr, as an operator sees it: httpx2's request line is gone."""
    add(db, "s1")
    env = {"OPENAI_BASE_URL": with_password(server.base_url), "EPISODES_MODEL": MODEL, "DATABASE_URL": db.url}
    import os

    done = subprocess.run(
        [sys.executable, "-m", "jobs.cli", "run", "--extractor", "openai"],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **env},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert PASSWORD not in done.stderr and "HTTP Request:" not in done.stderr


def test_every_formatted_log_line_hides_url_and_connection_string_secrets() -> None:
    record = logging.LogRecord(
        "httpx2", logging.INFO, __file__, 1, "HTTP Request: POST %s", (with_password("http://h:1/v1"),), None
    )
    record.dsn = "host=db user=app sslpassword=K3ypass sslmode=verify-full"
    line = TextFormatter().format(record)
    assert PASSWORD not in line and "K3ypass" not in line
    assert "http://alice:***@h:1/v1" in line and "sslpassword=***" in line
    record.msg, record.args = 'connecting with password="two words" to %s', ("postgresql://u:pw@h/db",)
    encoded = json.loads(JsonFormatter().format(record))  # still one valid JSON object
    assert encoded["message"] == 'connecting with password="***" to postgresql://u:***@h/db'
    assert encoded["dsn"] == "host=db user=app sslpassword=*** sslmode=verify-full"
    assert hide_secrets("http://h/v1?model=x&token=abc123&sig=zz") == "http://h/v1?model=x&token=***&sig=***"
    assert hide_secrets("http://alice@h/v1 password=$PGPASS") == "http://alice@h/v1 password=$PGPASS"


def test_the_hooks_log_hides_an_sslpassword(tmp_path: Any) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    env = {"DATABASE_URL": f"postgresql://nobody@127.0.0.1:{port}/none?connect_timeout=2&sslpassword=K3ypass"}
    payload = {"hook_event_name": "SessionStart", "session_id": "s-down", "cwd": str(tmp_path), "source": "startup"}
    done, _ = _hook(payload, "--user", "ann", "--budget", "60", env=env)
    assert done.returncode == 0
    log = log_file().read_text()
    assert "SessionStart: failed open" in log and "K3ypass" not in log, log


def test_serve_waits_for_a_stopped_server_instead_of_stopping(
    db: Database, embedder: Any, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`episodes serve` outlives a stopped local server (Ollama restarting): the claim goes back uncounted, the
    worker says so and tries again later, where `episodes run` stops (the test above)."""
    monkeypatch.setattr(worker_module, "UNREACHABLE_RETRY_SECONDS", 0.2)
    with fo.FakeOpenAI() as stopped:
        url = stopped.base_url
    add(db, "s1")
    database = Database(db.settings.with_(openai_base_url=url, model=MODEL, max_retries=0), url=db.url)
    idles = threading.Semaphore(0)
    try:
        with OpenAIExtractor(database.settings) as extractor:
            worker = Worker(Summarizer(database, extractor, embedder=embedder), idle=idles.release)
            with caplog.at_level(logging.WARNING, logger="jobs.summarize.worker"):
                worker.start()
                refused = wait_until(
                    lambda: sum(getattr(r, "action", None) == "model_unreachable" for r in caplog.records) >= 2,
                    timeout=60,
                    what="two refused connections logged by the serving worker",
                )
                alive = worker.alive()
                worker.stop()
                assert worker.join(30)
            worker.release()
    finally:
        database.close()
    assert refused and alive and worker.fatal is None
    (transcript,) = rows(db, "SELECT status, attempts FROM transcripts")
    assert (transcript["status"], transcript["attempts"]) == ("pending", 0)
