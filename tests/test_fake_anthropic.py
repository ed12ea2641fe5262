"""The fake Anthropic server, exercised only through the real `anthropic` SDK (and urllib where the
SDK cannot show the raw wire format), so the rest of the suite can trust it instead of mocks."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import anthropic
import pytest
from anthropic.types import Message, TextBlock, ToolUseBlock
from anthropic.types.messages import MessageBatchErroredResult, MessageBatchSucceededResult
from anthropic.types.messages.batch_create_params import Request
from support.fake_anthropic import (
    FakeAnthropic,
    error,
    hang,
    max_tokens,
    overloaded,
    rate_limited,
    raw,
    refusal,
    server_error,
    text,
    tool_use,
)
from support.waiting import wait_until

MODEL = "claude-haiku-4-5"
TOOL = {
    "name": "record_episode",
    "description": "Store an episode.",
    "input_schema": {"type": "object", "properties": {"summary": {"type": "string"}}},
}
HELLO = [{"role": "user", "content": "hello"}]


@pytest.fixture
def fake() -> Iterator[FakeAnthropic]:
    with FakeAnthropic() as server:
        yield server


def make_client(fake: FakeAnthropic, max_retries: int = 0, timeout: float = 5.0) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=fake.base_url, api_key="test-key", max_retries=max_retries, timeout=timeout)


@pytest.fixture
def client(fake: FakeAnthropic) -> Iterator[anthropic.Anthropic]:
    with make_client(fake) as c:
        yield c


def ask(client: anthropic.Anthropic, **kwargs: Any) -> Message:
    message: Message = client.messages.create(**{"model": MODEL, "max_tokens": 256, "messages": HELLO, **kwargs})
    return message


def text_of(message: Message) -> str:
    """The text of the message's first block, which must be a text block."""
    block = message.content[0]
    assert isinstance(block, TextBlock), block
    return block.text


def tool_input(message: Message) -> object:
    """The input of the message's first block, which must be a tool call."""
    block = message.content[0]
    assert isinstance(block, ToolUseBlock), block
    return block.input


def ended(client: anthropic.Anthropic, batch_id: str) -> anthropic.types.messages.MessageBatch | None:
    """The batch once its processing has ended; None while it still runs."""
    batch = client.messages.batches.retrieve(batch_id)
    return batch if batch.processing_status == "ended" else None


def test_forced_tool_use_round_trip(fake: FakeAnthropic, client: anthropic.Anthropic) -> None:
    fake.enqueue(tool_use({"summary": "met Bob"}))
    msg = ask(client, tools=[TOOL], tool_choice={"type": "tool", "name": "record_episode"})
    assert msg.id.startswith("msg_") and msg.type == "message" and msg.role == "assistant"
    assert msg.model == MODEL and msg.stop_reason == "tool_use" and msg.stop_sequence is None
    (block,) = msg.content
    assert block.type == "tool_use" and block.name == "record_episode" and block.input == {"summary": "met Bob"}
    assert block.id.startswith("toolu_")
    assert msg.usage.input_tokens > 0 and msg.usage.output_tokens > 0
    assert msg.usage.cache_creation_input_tokens == 0 and msg.usage.cache_read_input_tokens == 0


def test_default_and_dict_responders(fake: FakeAnthropic, client: anthropic.Anthropic) -> None:
    msg = ask(client)
    assert msg.content[0].type == "text" and text_of(msg) == "ok" and msg.stop_reason == "end_turn"
    fake.responder = lambda body: {"summary": body["messages"][0]["content"]}
    msg = ask(client, tools=[TOOL])
    assert msg.content[0].type == "tool_use" and msg.content[0].name == "record_episode"
    assert msg.content[0].input == {"summary": "hello"}


def test_rate_limit_retry_after_is_honoured(fake: FakeAnthropic, caplog: pytest.LogCaptureFixture) -> None:
    """The SDK waits what retry-after says (1 s): it logs the wait it chose before sleeping. Without the header it
    would choose its own backoff (0.375-0.5 s before a first retry), so only the header gives 1.000000. How long the
    wait really takes on this machine is bench/fake_anthropic.py's figure."""
    fake.enqueue(rate_limited(retry_after=1.0), text("after the wait"))
    caplog.set_level(logging.INFO, logger="anthropic._base_client")
    with make_client(fake, max_retries=2) as client:
        msg = ask(client)
    assert text_of(msg) == "after the wait"
    assert len(fake.calls()) == 2
    waits = [r.getMessage() for r in caplog.records if r.getMessage().startswith("Retrying request")]
    assert waits == [f"Retrying request to /v1/messages in {1.0:f} seconds"], waits
    assert fake.calls()[1].headers["x-stainless-retry-count"] == "1"


@pytest.mark.parametrize(
    ("step", "exc_type", "status"),
    [
        (rate_limited(retry_after=0.01), anthropic.RateLimitError, 429),
        (overloaded(retry_after=0.01), anthropic.OverloadedError, 529),
        (server_error(retry_after=0.01), anthropic.InternalServerError, 500),
        (error(400, "invalid_request_error", "bad"), anthropic.BadRequestError, 400),
    ],
)
def test_errors_surface_as_sdk_exceptions(fake: FakeAnthropic, step: Any, exc_type: type, status: int) -> None:
    fake.enqueue(step, step, step)
    with make_client(fake, max_retries=1) as client, pytest.raises(exc_type) as info:
        ask(client)
    assert isinstance(info.value, anthropic.APIStatusError) and info.value.status_code == status
    assert info.value.body == {"type": "error", "error": {"type": step.error_type, "message": step.message}}
    assert len(fake.calls()) == (1 if status == 400 else 2)  # 4xx other than 429 are not retried


def test_hang_beyond_client_timeout(fake: FakeAnthropic) -> None:
    """A 10 s hang against a 0.3 s timeout: the SDK's read times out (not the connect), once, and is not retried."""
    fake.enqueue(hang(10.0))
    with make_client(fake, timeout=0.3) as client, pytest.raises(anthropic.APITimeoutError) as info:
        ask(client)
    assert type(info.value.__cause__).__name__ == "ReadTimeout", repr(info.value.__cause__)  # httpx's (the SDK's copy)
    assert len(fake.calls()) == 1
    fake.enqueue(hang(0.05, then=text("late")))
    with make_client(fake, timeout=2.0) as client:
        assert text_of(ask(client)) == "late"


def test_refusal_and_max_tokens(fake: FakeAnthropic, client: anthropic.Anthropic) -> None:
    fake.enqueue(refusal(), max_tokens({"summary": "trunc"}))
    msg = ask(client)
    assert msg.stop_reason == "refusal" and text_of(msg) == "I can't help with that."
    msg = ask(client, tools=[TOOL])
    assert msg.stop_reason == "max_tokens"
    assert tool_input(msg) == {"summary": "trunc"}


def test_prompt_cache_accounting(fake: FakeAnthropic, client: anthropic.Anthropic) -> None:
    system = [{"type": "text", "text": "You remember things. " * 200, "cache_control": {"type": "ephemeral"}}]
    first, second = ask(client, system=system).usage, ask(client, system=system).usage
    assert first.cache_creation_input_tokens and first.cache_read_input_tokens == 0
    assert second.cache_read_input_tokens == first.cache_creation_input_tokens
    assert second.cache_creation_input_tokens == 0
    assert second.input_tokens == first.input_tokens < first.cache_creation_input_tokens
    other = [{**system[0], "text": "Something else. " * 200}]
    third = ask(client, system=other).usage
    assert third.cache_creation_input_tokens and third.cache_read_input_tokens == 0


def test_concurrent_slow_requests(fake: FakeAnthropic) -> None:
    """32 requests of 1 s each are answered together: the server holds each until all 32 are in flight at once,
    which a server answering one at a time never reaches (then each is answered 500 after `hold_timeout`). The
    wall time of the 32 is bench/fake_anthropic.py's figure."""
    fake.latency = 1.0
    fake.hold = 32
    with make_client(fake, timeout=fake.hold_timeout + 30) as client, ThreadPoolExecutor(max_workers=32) as pool:
        texts = list(pool.map(lambda _: text_of(ask(client)), range(32)))
    assert texts == ["ok"] * 32 and len(fake.calls()) == 32
    assert fake.peak_in_flight == 32 and fake.in_flight == 0


def test_batches_lifecycle(fake: FakeAnthropic, client: anthropic.Anthropic) -> None:
    fake.fail_batch_requests = {"b"}
    fake.batch_responder = lambda params: tool_use({"summary": params["messages"][0]["content"]})
    fake.enqueue(text("for /v1/messages only"))
    params = {"model": MODEL, "max_tokens": 64, "tools": [TOOL]}
    requests: list[Any] = [  # raw request bodies, as a client would send them
        {"custom_id": cid, "params": {**params, "messages": [{"role": "user", "content": cid}]}}
        for cid in ("a", "b", "c")
    ]
    batch = client.messages.batches.create(requests=requests)
    assert batch.id.startswith("msgbatch_") and batch.processing_status == "in_progress"
    assert batch.request_counts.processing == 3 and batch.results_url is None
    with make_client(fake) as other:  # state lives in the server, not the client
        batch = wait_until(lambda: ended(other, batch.id), 5, "the batch to end", every=0.05)
    assert batch.ended_at is not None and (batch.results_url or "").endswith(f"/v1/messages/batches/{batch.id}/results")
    assert batch.request_counts.succeeded == 2 and batch.request_counts.errored == 1
    results = {r.custom_id: r.result for r in client.messages.batches.results(batch.id)}
    a, b, c = results["a"], results["b"], results["c"]
    assert isinstance(a, MessageBatchSucceededResult) and tool_input(a.message) == {"summary": "a"}
    assert isinstance(b, MessageBatchErroredResult) and b.error.error.type == "api_error"
    assert isinstance(c, MessageBatchSucceededResult) and c.message.stop_reason == "tool_use"
    assert text_of(ask(client)) == "for /v1/messages only"  # the FIFO was left alone
    listed = client.messages.batches.list(limit=10)
    assert [b.id for b in listed.data] == [batch.id] and listed.has_more is False


def test_batch_cancel_and_validation(fake: FakeAnthropic, client: anthropic.Anthropic) -> None:
    fake.batch_delay = 0.3
    params: Any = {"model": MODEL, "max_tokens": 64, "messages": HELLO}  # a raw request body
    batch = client.messages.batches.create(requests=[{"custom_id": "x", "params": params}])
    assert client.messages.batches.cancel(batch.id).processing_status == "canceling"
    batch = wait_until(lambda: ended(client, batch.id), 5, "the canceled batch to end", every=0.05)
    assert batch.request_counts.canceled == 1 and batch.cancel_initiated_at is not None
    assert [r.result.type for r in client.messages.batches.results(batch.id)] == ["canceled"]
    refused: list[list[Request]] = [
        [{"custom_id": "x", "params": params}, {"custom_id": "x", "params": params}],  # one id twice
        [{"custom_id": "no spaces", "params": params}],
    ]
    for bad in refused:
        with pytest.raises(anthropic.BadRequestError):
            client.messages.batches.create(requests=bad)
    fake.max_batch_requests = 1
    with pytest.raises(anthropic.BadRequestError):
        client.messages.batches.create(
            requests=[{"custom_id": "p", "params": params}, {"custom_id": "q", "params": params}]
        )
    with pytest.raises(anthropic.NotFoundError):
        client.messages.batches.retrieve("msgbatch_missing")


def test_request_recording_and_raw_wire_format(fake: FakeAnthropic, client: anthropic.Anthropic) -> None:
    ask(client, system="be brief")
    (rec,) = fake.requests
    assert (rec.method, rec.path) == ("POST", "/v1/messages")
    # SDK versions differ in how they send the key (x-api-key or a bearer token)
    assert "test-key" in (rec.headers.get("x-api-key"), rec.headers.get("authorization", "").removeprefix("Bearer "))
    assert "anthropic-version" in rec.headers
    assert rec.body == {"model": MODEL, "max_tokens": 256, "messages": HELLO, "system": "be brief"}
    fake.enqueue(error(429, "rate_limit_error", "slow down", retry_after=2.5), raw(200, "{not json"))
    post = urllib.request.Request(
        f"{fake.base_url}/v1/messages",
        data=json.dumps(rec.body).encode(),
        headers={"content-type": "application/json"},
        method="POST",
    )
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(post, timeout=5)
    with info.value as err:
        assert err.code == 429 and err.headers["retry-after"] == "2.5" and err.headers["request-id"]
        assert json.loads(err.read()) == {
            "type": "error",
            "error": {"type": "rate_limit_error", "message": "slow down"},
        }
    with urllib.request.urlopen(post, timeout=5) as resp:
        assert resp.status == 200 and resp.read() == b"{not json"
    fake.enqueue(raw(200, "{not json"))
    with pytest.raises((ValueError, anthropic.APIError)):  # this SDK lets json.JSONDecodeError escape
        ask(client)


def test_runs_as_a_separate_process() -> None:
    script = Path(__file__).parent / "support" / "fake_anthropic.py"
    cmd = [
        sys.executable,
        str(script),
        "--port",
        "0",
        "--latency",
        "0.1",
        "--responder",
        "support.fake_anthropic:echo_responder",
    ]
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, cwd=script.parent.parent) as proc:
        try:
            assert proc.stdout is not None
            line = proc.stdout.readline().strip()
            assert line.startswith("FAKE_ANTHROPIC_URL=http://127.0.0.1:")
            with anthropic.Anthropic(
                base_url=line.split("=", 1)[1], api_key="test-key", max_retries=0, timeout=5.0
            ) as client:
                assert text_of(ask(client)) == "hello"
        finally:
            proc.terminate()
        assert proc.wait(timeout=5) == 0
