"""The openai back end through the REAL `openai` SDK against a local Chat Completions stand-in
(tests/support/fake_openai.py): each output mode and the fallback between them, each failure's one-line
reason, and what it stores through the summarize job (grounded episodes, model-call rows, failed
attempts that change nothing, dead letters, a run whose every call failed exiting non-zero).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from click.testing import CliRunner
from support import fake_openai as fo
from support.episode_responder import OPENAI_MODEL as MODEL
from support.episode_responder import model_like
from support.openai_sessions import TRANSCRIPT, add, extract, rows, settings_for

from jobs.cli import cli
from jobs.config import Settings
from jobs.db import Database
from jobs.errors import ConfigError, ExtractionError, PermanentExtractionError, TransientModelError
from jobs.extract import make_extractor
from jobs.extract.openai_chat import OpenAIExtractor
from jobs.summarize import run_summarize

VALID = {
    "summary": "Maria chose the Team plan at $49 per seat.",
    "topic_tags": ["billing"],
    "importance": 0.6,
    "key_events": [{"type": "decision", "what": "Team plan at $49 per seat", "who": "Maria", "evidence": [0]}],
    "entities": [{"name": "Maria", "kind": "person"}],
}


@pytest.fixture
def server() -> Iterator[fo.FakeOpenAI]:
    with fo.FakeOpenAI(model_like) as fake:
        yield fake


# --- output modes -------------------------------------------------------------------------------


def test_json_schema_output_is_asked_for_and_validated(server: fo.FakeOpenAI) -> None:
    result = extract(settings_for(server))
    (request,) = server.calls()
    fmt = request.body["response_format"]
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["name"] == "record_episode"
    assert fmt["json_schema"]["schema"]["required"] == ["summary", "topic_tags", "importance"]
    assert request.body["model"] == MODEL and "tools" not in request.body
    system, user = request.body["messages"]
    assert system["role"] == "system" and "as one JSON object and nothing else" in system["content"]
    assert "<transcript" in user["content"]  # the Claude path's template, rendered the same way
    assert result.model == f"openai:{MODEL}" and "opened the session" in result.extraction.summary
    (call,) = result.calls
    assert (call.model, call.outcome) == (f"openai:{MODEL}", "ok")
    assert call.input_tokens > 0 and call.output_tokens > 0
    assert call.cost_usd == 0.0  # a local model has no price: not priced as another model
    assert request.headers["authorization"] == "Bearer not-needed"  # a placeholder key when none is set


def test_tools_mode_forces_the_function_and_reads_its_arguments(server: fo.FakeOpenAI) -> None:
    result = extract(settings_for(server, openai_mode="tools", openai_api_key="sk-local"))
    body = server.calls()[0].body
    assert body["tools"][0]["function"]["name"] == "record_episode"
    assert body["tool_choice"] == {"type": "function", "function": {"name": "record_episode"}}
    assert "response_format" not in body
    assert server.calls()[0].headers["authorization"] == "Bearer sk-local"
    assert result.extraction.key_events[0].type == "decision"


def test_json_object_mode_states_the_schema_in_the_system_text(server: fo.FakeOpenAI) -> None:
    result = extract(settings_for(server, openai_mode="json_object"))
    body = server.calls()[0].body
    assert body["response_format"] == {"type": "json_object"}
    assert '"required":["summary","topic_tags","importance"]' in body["messages"][0]["content"]
    assert result.extraction.importance == 0.6


def test_auto_falls_back_to_tools_then_json_object_and_keeps_what_works() -> None:
    with fo.FakeOpenAI(model_like, supports=frozenset({"json_object"})) as server:
        with OpenAIExtractor(settings_for(server)) as extractor:
            first = extractor.extract(TRANSCRIPT)
            extractor.extract(TRANSCRIPT)
        modes = [fo.mode_of(c.body) for c in server.calls()]
    assert modes == ["json_schema", "tools", "json_object", "json_object"]  # the second session asks at once
    assert [c.outcome for c in first.calls] == ["error", "error", "ok"]  # every request leaves a row
    assert "not supported" in (first.calls[0].error or "")


def test_a_500_that_names_the_unsupported_format_falls_back_too(server: fo.FakeOpenAI) -> None:
    server.enqueue(fo.error(500, 'response_format type must be one of "text" or "json_object", but got: json_schema'))
    result = extract(settings_for(server))  # an older llama.cpp build answers so
    assert [fo.mode_of(c.body) for c in server.calls()] == ["json_schema", "tools"]
    assert [c.outcome for c in result.calls] == ["error", "ok"]


def test_a_model_that_wants_max_completion_tokens_gets_it(server: fo.FakeOpenAI) -> None:
    server.enqueue(
        fo.error(
            400,
            "Unsupported parameter: 'max_tokens' is not supported with this model. "
            "Use 'max_completion_tokens' instead.",
        )
    )
    with OpenAIExtractor(settings_for(server, max_output_tokens=1000)) as extractor:
        extractor.extract(TRANSCRIPT)
        extractor.extract(TRANSCRIPT)
    first, second, third = (c.body for c in server.calls())
    assert first["max_tokens"] == 1000 and "max_completion_tokens" not in first
    assert second["max_completion_tokens"] == 1000 and "max_tokens" not in second  # the same mode, renamed
    assert fo.mode_of(second) == "json_schema" and third["max_completion_tokens"] == 1000  # kept afterwards


def test_a_fixed_mode_does_not_fall_back() -> None:
    with fo.FakeOpenAI(model_like, supports=frozenset({"tools"})) as server:
        with pytest.raises(ExtractionError, match="rejected the request \\(400\\)"):
            extract(settings_for(server, openai_mode="json_schema"))
        assert len(server.calls()) == 1


# --- answers that are not an episode: one repair, then a verdict -----------------------------------


@pytest.mark.parametrize(
    ("bad", "reason"),
    [
        (fo.content('{"summary": "cut'), "malformed JSON"),
        (fo.content("Sure! Here is the episode you asked for."), "malformed JSON"),
        (fo.content(None), "empty answer"),
        (fo.empty(), "empty answer (no choices)"),
        (fo.answer({"topic_tags": ["x"], "importance": 0.5}), "summary: Field required"),
    ],
)
def test_an_unusable_answer_gets_one_repair_quoting_the_problem(
    server: fo.FakeOpenAI, bad: fo.Step, reason: str
) -> None:
    server.enqueue(bad)
    result = extract(settings_for(server))
    assert [c.outcome for c in result.calls] == ["invalid", "ok"]
    assert reason in (result.calls[0].error or "")
    repair = server.calls()[1].body["messages"]
    assert reason in repair[-1]["content"] and "one corrected JSON object" in repair[-1]["content"]


def test_a_second_unusable_answer_fails_with_the_reason(server: fo.FakeOpenAI) -> None:
    server.enqueue(fo.content("not json"), fo.answer({"summary": "x"}))
    with pytest.raises(ExtractionError) as caught:
        extract(settings_for(server))
    assert str(caught.value).startswith("invalid model output after one repair request: summary:")
    assert [c.outcome for c in caught.value.calls] == ["invalid", "invalid"]


def test_invalid_tool_arguments_are_answered_as_a_tool_result(server: fo.FakeOpenAI) -> None:
    server.enqueue(fo.tool_call('{"summary": 5}'))
    result = extract(settings_for(server, openai_mode="tools"))
    repair = server.calls()[1].body["messages"]
    assert repair[2]["role"] == "assistant" and repair[2]["tool_calls"][0]["function"]["arguments"] == '{"summary": 5}'
    assert repair[3]["role"] == "tool" and "summary: Input should be a valid string" in repair[3]["content"]
    assert [c.outcome for c in result.calls] == ["invalid", "ok"]


def test_a_truncated_answer_is_asked_again_with_more_room(server: fo.FakeOpenAI) -> None:
    server.enqueue(fo.length())
    result = extract(settings_for(server, max_output_tokens=1000))
    first, second = (c.body for c in server.calls())
    assert (first["max_tokens"], second["max_tokens"]) == (1000, 2000)
    assert "cut off at the output limit" in second["messages"][1]["content"]
    assert result.calls[0].outcome == "max_tokens" and "finish_reason length" in (result.calls[0].error or "")


def test_two_refusals_fail_for_good(server: fo.FakeOpenAI) -> None:
    server.enqueue(fo.refusal(), fo.refusal("Still no."))
    with pytest.raises(
        PermanentExtractionError, match=r"the model refused after a repair request: refused: Still no\."
    ):
        extract(settings_for(server))
    assert "routine summarisation" in server.calls()[1].body["messages"][1]["content"]


# --- the server's failures: one line each ----------------------------------------------------------


def test_a_server_that_is_down_says_so() -> None:
    with fo.FakeOpenAI() as server:
        url = server.base_url
    with pytest.raises(ConfigError) as caught:  # the port is closed now: connection refused
        extract(Settings(openai_base_url=url, model=MODEL, max_retries=0))
    message = str(caught.value)  # a ConfigError: the session is given back, no attempt counted (test_openai_wire)
    assert message.startswith(f"cannot reach the model server at {url}") and "is it running?" in message
    assert "\n" not in message


def test_a_timeout_says_how_long_it_waited(server: fo.FakeOpenAI) -> None:
    server.enqueue(fo.hang(3.0))
    with pytest.raises(TransientModelError, match=r"did not answer within 0.5s \(timeout, after retries\)"):
        extract(settings_for(server, model_timeout_s=0.5))


def test_429_and_5xx_are_retried_by_the_sdk(server: fo.FakeOpenAI) -> None:
    server.enqueue(
        fo.error(429, "Rate limit reached", retry_after=0.01), fo.error(503, "loading model", retry_after=0.01)
    )
    result = extract(settings_for(server, max_retries=2))
    assert len(server.calls()) == 3 and [c.outcome for c in result.calls] == ["ok"]  # one call, retried inside


@pytest.mark.parametrize(
    ("status", "said"), [(429, "rate limited (429) after retries"), (500, "error 500 after retries")]
)
def test_429_and_5xx_after_the_retries_are_transient(server: fo.FakeOpenAI, status: int, said: str) -> None:
    server.enqueue(fo.error(status, "busy", retry_after=0.01))
    with pytest.raises(TransientModelError, match=re.escape(said)):
        extract(settings_for(server))


def test_a_body_that_is_not_a_completion_is_transient(server: fo.FakeOpenAI) -> None:
    server.enqueue(fo.raw(200, "<html>502 Bad Gateway</html>"))
    with pytest.raises(TransientModelError, match="unreadable response"):
        extract(settings_for(server))


@pytest.mark.parametrize(("status", "said"), [(401, "Check OPENAI_API_KEY"), (404, "Set EPISODES_MODEL to a model")])
def test_a_wrong_key_or_model_is_a_setting_to_fix(server: fo.FakeOpenAI, status: int, said: str) -> None:
    server.enqueue(fo.error(status, "nope"))
    with pytest.raises(ConfigError, match=said):
        extract(settings_for(server))


def test_no_endpoint_and_no_key_is_a_setting_to_fix() -> None:
    with pytest.raises(ConfigError, match="needs OPENAI_BASE_URL"):
        OpenAIExtractor(Settings(model=MODEL))


def test_auto_picks_openai_when_only_an_endpoint_is_set(server: fo.FakeOpenAI) -> None:
    settings = Settings(openai_base_url=server.base_url, model=MODEL)
    extractor = make_extractor(settings)
    try:
        assert extractor.name == f"openai:{MODEL}"
    finally:
        extractor.close()


# --- through the summarize job ---------------------------------------------------------------------


@pytest.fixture
def openai_env(server: fo.FakeOpenAI, monkeypatch: pytest.MonkeyPatch) -> fo.FakeOpenAI:
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    monkeypatch.setenv("EPISODES_MODEL", MODEL)
    return server


def test_episodes_run_with_openai_end_to_end(db: Database, openai_env: fo.FakeOpenAI) -> None:
    add(db, "s1")
    result = CliRunner().invoke(cli, ["run", "--extractor", "openai"])
    assert result.exit_code == 0, result.output
    assert "done 1" in result.output and "cost unknown (no price)" in result.output
    assert result.output.rstrip().endswith(f"· by openai ({MODEL})")  # the back end and model, on the run's line
    (episode,) = rows(db, "SELECT model, prompt_version, summary, input_tokens FROM episodes")
    assert episode["model"] == f"openai:{MODEL}" and episode["input_tokens"] > 0
    from jobs.extract.claude import prompt_version

    assert episode["prompt_version"] == prompt_version()  # the Claude path's prompts
    events = rows(db, "SELECT type, evidence FROM episode_events ORDER BY ordinal")
    assert [(e["type"], e["evidence"]) for e in events] == [("decision", [0]), ("commitment", [1])]
    (call,) = rows(db, "SELECT model, outcome, input_tokens, output_tokens, cost_usd, transcript_id FROM model_calls")
    assert call["model"] == f"openai:{MODEL}" and call["outcome"] == "ok" and call["transcript_id"] is not None


def test_garbage_never_changes_an_existing_episode_and_ends_in_the_dead_letters(
    db: Database, server: fo.FakeOpenAI, embedder: Any
) -> None:
    add(db, "s1")
    settings = db.settings.with_(openai_base_url=server.base_url, model=MODEL, max_retries=0, max_attempts=2)
    database = Database(settings, url=db.url)
    try:
        with OpenAIExtractor(settings) as extractor:
            assert run_summarize(database, extractor=extractor, embedder=embedder).counts["done"] == 1
        before = rows(db, "SELECT id, summary, status FROM episodes")
        add(db, "s1", said="Actually, make it the Business plan.")  # changed content: summarised again
        server.responder = lambda body: fo.content("```json\n{oops")
        for attempt in (1, 2):
            with OpenAIExtractor(settings) as extractor:
                report = run_summarize(database, extractor=extractor, embedder=embedder)
            assert report.counts == {"failed" if attempt == 1 else "dead": 1}
            with db.admin() as conn:
                conn.execute("UPDATE transcripts SET next_attempt_at = now()")  # skip the backoff
        assert rows(db, "SELECT id, summary, status FROM episodes") == before  # untouched, still current
        (transcript,) = rows(db, "SELECT status, attempts, last_error FROM transcripts")
        assert transcript["status"] == "dead" and transcript["attempts"] == 2
        assert transcript["last_error"].startswith("invalid model output after one repair request: malformed JSON")
        outcomes = [r["outcome"] for r in rows(db, "SELECT outcome FROM model_calls ORDER BY id")]
        assert outcomes == ["ok", "invalid", "invalid", "invalid", "invalid"]
    finally:
        database.close()


def test_a_run_whose_every_call_failed_exits_non_zero(
    db: Database, openai_env: fo.FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    add(db, "s1")
    add(db, "s2")
    openai_env.responder = lambda body: fo.error(503, "model is loading", retry_after=0.01)
    result = CliRunner().invoke(cli, ["run", "--extractor", "openai", "--concurrency", "1"])
    assert result.exit_code == 1
    error = result.stderr.strip().splitlines()[-1]
    assert error.startswith("episodes: every model call of this run failed")
    assert "Check that the server at OPENAI_BASE_URL is running" in error
    assert {r["status"] for r in rows(db, "SELECT status FROM transcripts")} == {"pending"}  # retried later
    assert rows(db, "SELECT count(*) AS n FROM episodes")[0]["n"] == 0


def test_compress_and_resummarize_take_openai_too(db: Database, openai_env: fo.FakeOpenAI, embedder: Any) -> None:
    from support.compress_data import supers, year_2024

    from jobs.extract.claude import prompt_version

    year_2024(db, embedder)
    period = {
        "summary": "Over 2024 Maria chose the Acme Team plan and kept monthly billing.",
        "topic_tags": ["pricing"],
        "importance": 0.7,
        "key_events": [],
        "entities": [{"name": "Maria", "kind": "person"}],
    }
    openai_env.responder = lambda body: period
    result = CliRunner().invoke(cli, ["compress", "--extractor", "openai", "--now", "2026-11-21"])
    assert result.exit_code == 0, result.output
    (sup,) = supers(db)
    assert sup["model"] == f"openai:{MODEL}" and sup["summary"] == period["summary"]
    (request,) = openai_env.calls()
    assert request.body["response_format"]["json_schema"]["name"] == "record_period_summary"
    (call,) = rows(db, "SELECT model, outcome, input_tokens FROM model_calls")
    assert call["model"] == f"openai:{MODEL}" and call["outcome"] == "ok" and call["input_tokens"] > 0
    dry = CliRunner().invoke(cli, ["resummarize", "--extractor", "openai", "--dry-run"])
    assert dry.exit_code == 0 and f"for prompt {prompt_version()}" in dry.output, dry.output
