"""The one model extractor and the one model compressor over the three callers, each against its stand-in at
the wire: Claude through the REAL anthropic SDK (tests/support/fake_anthropic.py), an OpenAI-compatible
server through the REAL openai SDK (tests/support/fake_openai.py), and the REAL Claude Code CLI
(tests/support/stream_anthropic.py; skipped, saying why, without the CLI).

Each caller is scripted to answer the same way (an answer the pydantic model refuses, then a valid one):
the extractor renders the same prompt for all three (same prompt hash and version), repairs once quoting
the problem, records one model-call row per request and returns the same episode, labelled with the
caller's back end. Only the Claude Code CLI sees each ``@`` behind a WORD JOINER (issue 46, finding 1).
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from support import fake_anthropic as fa
from support import fake_openai as fo
from support.claude_code_cli import CLAUDE, needs_claude
from support.episode_responder import OPENAI_MODEL
from support.openai_sessions import settings_for
from support.stream_anthropic import StreamAnthropic, ToolUse

from jobs.compress.compressor import SourceEpisode, SourceEvent
from jobs.compress.model import SESSIONS_TEMPLATE, ModelCompressor
from jobs.compress.model import prompt_version as compress_version
from jobs.compress.periods import Period
from jobs.config import Settings
from jobs.extract.model import USER_TEMPLATE, ModelExtractor, prompt_version
from jobs.llm.claude_cli import WORD_JOINER, ClaudeCli
from jobs.llm.openai_chat import ChatCaller
from jobs.llm.repair import Caller
from jobs.llm.tools import ToolCaller
from jobs.models import EpisodeExtraction, Message, Transcript

CLAUDE_MODEL = "claude-haiku-4-5"
MENTION = "@notes/pricing.md"
TRANSCRIPT = Transcript(
    1,
    "acme",
    "u1",
    "s1",
    "support",
    None,
    dt.datetime(2025, 3, 4, 9, 20, tzinfo=dt.UTC),
    [
        Message(role="user", name="Maria", content=f"We'll go with the Team plan at $49 per seat, as {MENTION} says."),
        Message(role="assistant", content="Done. I'll send the invoice by Friday."),
    ],
)
EPISODE = {
    "summary": "Maria chose the Team plan at $49 per seat; the agent will send the invoice by Friday.",
    "topic_tags": ["billing"],
    "importance": 0.7,
    "key_events": [
        {"type": "decision", "what": "Team plan at $49 per seat", "who": "Maria", "evidence": [0]},
        {"type": "commitment", "what": "Send the invoice by Friday", "who": "agent", "evidence": [1]},
    ],
    "entities": [{"name": "Maria", "kind": "person"}],
}
# Valid for the JSON schema (the CLI and a server's grammar accept it), refused by the pydantic model.
REFUSED = {**EPISODE, "topic_tags": ["   "]}
PROBLEM = "topic tags must not be empty"


@dataclass
class Rig:
    """One caller on its stand-in, scripted to answer ``answers`` in turn (the last one from then on)."""

    caller: Caller
    label: str
    sent: Callable[[], list[str]]  # what each request asked the model, as one string, oldest first


RigMaker = Callable[[list[dict[str, Any]], Settings, Path], AbstractContextManager[Rig]]


@contextmanager
def anthropic_rig(answers: list[dict[str, Any]], settings: Settings, home: Path) -> Iterator[Rig]:
    with fa.FakeAnthropic(responder=lambda body: fa.tool_use(answers[-1])) as fake:
        fake.enqueue(*(fa.tool_use(a) for a in answers[:-1]))
        configured = settings.with_(anthropic_api_key="test-key", anthropic_base_url=fake.base_url)
        caller = ToolCaller(configured)
        yield Rig(caller, CLAUDE_MODEL, lambda: [_said(c.body) for c in fake.calls()])
        caller.close()


@contextmanager
def openai_rig(answers: list[dict[str, Any]], settings: Settings, home: Path) -> Iterator[Rig]:
    with fo.FakeOpenAI(lambda body: fo.answer(answers[-1])) as server:
        server.enqueue(*(fo.answer(a) for a in answers[:-1]))
        caller = ChatCaller(settings_for(server).with_(max_output_tokens=settings.max_output_tokens))
        yield Rig(caller, f"openai:{OPENAI_MODEL}", lambda: [_said(c.body) for c in server.calls()])
        caller.close()


@contextmanager
def claude_code_rig(answers: list[dict[str, Any]], settings: Settings, home: Path) -> Iterator[Rig]:
    """The CLI under a scratch HOME, pointed at the stand-in with a dummy key."""
    queue = list(answers)

    def reply(body: dict[str, Any]) -> ToolUse:
        return ToolUse(queue.pop(0) if len(queue) > 1 else queue[0])

    with StreamAnthropic(reply=reply) as stand_in, pytest.MonkeyPatch.context() as env:
        (home / ".claude").mkdir(parents=True, exist_ok=True)
        env.setenv("HOME", str(home))
        env.delenv("CLAUDE_CONFIG_DIR", raising=False)
        env.setenv("ANTHROPIC_BASE_URL", stand_in.base_url)
        env.setenv("ANTHROPIC_API_KEY", "dummy-key")
        yield Rig(
            ClaudeCli(settings, CLAUDE), f"claude-code:{CLAUDE_MODEL}", lambda: [m.text() for m in stand_in.messages()]
        )


def _said(body: dict[str, Any]) -> str:
    return json.dumps({"system": body.get("system"), "messages": body.get("messages")}, ensure_ascii=False)


CALLERS = [
    pytest.param(anthropic_rig, id="anthropic"),
    pytest.param(openai_rig, id="openai"),
    pytest.param(claude_code_rig, id="claude-code", marks=[pytest.mark.slow, needs_claude]),
]


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(model=CLAUDE_MODEL, max_retries=0, model_timeout_s=5.0)


def neutralised(rig: Rig, sent: list[str]) -> None:
    """Every request carries the mention; only the Claude Code CLI's with a WORD JOINER before each ``@``."""
    cli = rig.label.startswith("claude-code:")
    assert all((f"{WORD_JOINER}{MENTION}" if cli else MENTION) in text for text in sent)
    assert all((text.count("@") == text.count(WORD_JOINER + "@")) == cli for text in sent)


@pytest.mark.parametrize("make_rig", CALLERS)
def test_the_one_extractor_gives_the_same_episode_through_each_caller(
    make_rig: RigMaker, settings: Settings, tmp_path: Path
) -> None:
    with make_rig([REFUSED, EPISODE], settings, tmp_path) as rig, ModelExtractor(settings, rig.caller) as extractor:
        (prompt,) = extractor.prompts_for(TRANSCRIPT)
        result = extractor.extract(TRANSCRIPT)
        sent = rig.sent()
    assert result.extraction == EpisodeExtraction.model_validate(EPISODE)  # the same episode, whoever answered
    assert (extractor.name, result.model, result.prompt_version) == (rig.label, rig.label, prompt_version())
    # One row per request, the refused answer's too, each with the one rendering's template and hash.
    assert [(c.template, c.prompt_hash, c.model, c.outcome) for c in result.calls] == [
        (USER_TEMPLATE, prompt.prompt_hash, rig.label, "invalid"),
        (USER_TEMPLATE, prompt.prompt_hash, rig.label, "ok"),
    ]
    assert PROBLEM in (result.calls[0].error or "")
    assert all(c.input_tokens > 0 and c.output_tokens > 0 and c.latency_ms >= 0 for c in result.calls)
    assert len(sent) == 2 and PROBLEM not in sent[0] and PROBLEM in sent[1]  # one repair, quoting the problem
    assert "Team plan at $49 per seat" in sent[0]
    neutralised(rig, sent)


PERIOD_ANSWER = {
    "summary": "Over 2024 Maria moved the team to the Team plan at $49 per seat.",
    "topic_tags": ["billing"],
    "key_events": [{"source": "E101", "what": "Maria chose the Team plan at $49 per seat."}],
    "entities": [{"name": "Maria", "kind": "person"}],
    "importance": 0.6,
}


def _source(i: int) -> SourceEpisode:
    when = dt.datetime(2024, 3, i, 9, 0, tzinfo=dt.UTC)
    what = f"Maria chose the Team plan at $49 per seat ({MENTION})."
    event = SourceEvent(100 + i, i, 0, "decision", what, "Maria", None, when, (0,))
    return SourceEpisode(
        i,
        "support",
        f"Maria talked pricing, see {MENTION}.",
        ("billing",),
        0.5,
        when,
        when,
        (event,),
        (("Maria", "person"),),
    )


@pytest.mark.parametrize("make_rig", CALLERS)
def test_the_one_compressor_gives_the_same_super_through_each_caller(
    make_rig: RigMaker, settings: Settings, tmp_path: Path
) -> None:
    period = Period(dt.date(2024, 1, 1), dt.date(2024, 12, 31))
    with make_rig([PERIOD_ANSWER], settings, tmp_path) as rig, ModelCompressor(settings, rig.caller) as compressor:
        done = compressor.compress(period, [_source(1), _source(2)])
        sent = rig.sent()
    assert (done.summary, done.topic_tags, done.importance) == (PERIOD_ANSWER["summary"], ["billing"], 0.6)
    assert done.highlights == [(101, "Maria chose the Team plan at $49 per seat.")]
    assert [e.name for e in done.entities] == ["Maria"] and (done.dropped_events, done.dropped_entities) == (0, 0)
    assert (done.model, done.prompt_version) == (rig.label, compress_version())
    assert [(c.template, c.model, c.outcome) for c in done.calls] == [(SESSIONS_TEMPLATE, rig.label, "ok")]
    assert len(sent) == 1
    neutralised(rig, sent)
