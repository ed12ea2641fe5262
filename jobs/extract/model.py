"""The one model extractor, composed with a caller: :class:`ModelExtractor`.

Which model answers is the caller's business (:class:`jobs.llm.repair.Caller`): Claude through the
anthropic SDK (:class:`jobs.llm.tools.ToolCaller`, the default), any OpenAI Chat Completions server
(:class:`jobs.llm.openai_chat.ChatCaller`), or the user's Claude Code CLI
(:class:`jobs.llm.claude_cli.ClaudeCli`). Each sends one rendered request (system text, user text, the
forced tool's schema), validates the answer into the pydantic model with one repair request
(:meth:`jobs.llm.repair.RepairingCaller.call`), and appends one :class:`~jobs.models.ModelCall` per
request. Everything else is written here once, for all three: the templates and the prompt version,
the open items and current decisions offered, the transcript lines, the split and the hierarchical
reduce, the result and the label its episodes record (the caller's :attr:`~jobs.llm.repair.Caller.label`).

A transcript whose rendered size exceeds ``Settings.transcript_token_budget`` is split on message
boundaries (a single message larger than the budget is split into labelled pieces), each part is
extracted with global message indexes, and the part episodes are reduced into one by another
forced tool call, hierarchically if they do not fit one request. Nothing is truncated.

The Message Batches path (:mod:`jobs.summarize.batches`, anthropic only) builds its requests with
:meth:`ModelExtractor.batch_request` and reads the answers with :meth:`ModelExtractor.parse` and
:meth:`ModelExtractor.batch_call`, so the tool name, templates and open items live only here.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from jobs.config import Settings
from jobs.llm import (
    ToolCaller,
    ToolPrompt,
    parse_tool_output,
    reduce_levels,
    usage_call,
)
from jobs.llm.repair import Caller
from jobs.models import (
    EpisodeExtraction,
    ExtractionResult,
    Message,
    ModelCall,
    OpenItem,
    Transcript,
    estimate_tokens,
    split_offered,
    tool_input_schema,
)
from jobs.prompts import fingerprint, render, source

TOOL_NAME = "record_episode"
TOOL_DESCRIPTION = "Record the session as one structured episode."
SYSTEM_TEMPLATE = "extract_episode_system.j2"
USER_TEMPLATE = "extract_episode_user.j2"
REDUCE_TEMPLATE = "reduce_episode_user.j2"


def prompt_version() -> str:
    """Changes whenever a template or the output schema changes: a new version re-summarises."""
    schema = json.dumps(tool_input_schema(EpisodeExtraction), sort_keys=True)
    return "extract-" + fingerprint(source(SYSTEM_TEMPLATE), source(USER_TEMPLATE), source(REDUCE_TEMPLATE), schema)


@dataclass(frozen=True)
class Line:
    index: int
    speaker: str
    ts: str | None
    content: str


_DELIMITER = re.compile(r"<(/?)(transcript)", re.IGNORECASE)
_NEWLINE = re.compile(r"\r\n|[\r\n\x85\u2028\u2029]")
TOOL_LABEL = "tool context"  # how tool messages are labelled: what the agent's tools did and returned, nobody's words


def _escape(text: str) -> str:
    """Keep the transcript delimiters unforgeable from inside a message, in any letter case."""
    return _DELIMITER.sub(lambda m: "<\\" + m.group(1) + m.group(2), text)


def _content(text: str) -> str:
    """A message's text as rendered: continuation lines are indented, so no line inside a message
    can pass for another message ("[7] assistant: ...")."""
    return _NEWLINE.sub("\n    ", _escape(text))


def _speaker(message: Message) -> str:
    """The speaker label on one line: the role, a name only beside it (:attr:`Message.speaker`), so no name
    can claim a role the message does not have. Tool messages are labelled :data:`TOOL_LABEL`."""
    if message.role == "tool":
        return TOOL_LABEL
    return " ".join(_escape(message.speaker).split())


def transcript_lines(transcript: Transcript) -> list[Line]:
    return [
        Line(i, _speaker(m), m.ts.strftime("%Y-%m-%d %H:%M") if m.ts else None, _content(m.content))
        for i, m in enumerate(transcript.messages)
    ]


def split_lines(lines: list[Line], budget_tokens: int) -> list[list[Line]]:
    """Consecutive parts whose estimated size fits the budget; oversized messages become pieces."""
    parts: list[list[Line]] = []
    current: list[Line] = []
    used = 0
    for line in lines:
        pieces = [line]
        size = estimate_tokens(line.content) + 8
        if size > budget_tokens:
            step = budget_tokens * 4 - 200
            chunks = [line.content[i : i + step] for i in range(0, len(line.content), step)]
            pieces = [
                Line(line.index, line.speaker, line.ts, f"(piece {k + 1}/{len(chunks)}) {chunk}")
                for k, chunk in enumerate(chunks)
            ]
        for piece in pieces:
            size = estimate_tokens(piece.content) + 8
            if current and used + size > budget_tokens:
                parts.append(current)
                current, used = [], 0
            current.append(piece)
            used += size
    if current:
        parts.append(current)
    return parts


@dataclass(frozen=True)
class BatchRequest:
    """One Message Batches request for a transcript, built exactly like a live extraction request."""

    params: dict[str, Any]  # the request entry's ``params`` (model, system, tool, forced tool choice, user text)
    prompt_hash: str  # store it with the batch item; the model-call row of the answer carries it
    offered_items: frozenset[int]  # event ids of the open items offered: pass them to ground() with the answer
    offered_decisions: frozenset[int] = frozenset()  # event ids of the current decisions and preferences offered


class ModelExtractor:
    """Extract an episode with a model through ``caller`` (None: Claude through the anthropic SDK,
    model from EPISODES_MODEL). Its episodes record the caller's label as their model."""

    def __init__(self, settings: Settings, caller: Caller | None = None) -> None:
        self.settings = settings
        self.caller: Caller = caller or ToolCaller(settings)
        self.name = self.caller.label
        self.prompt_version = prompt_version()
        self._schema = tool_input_schema(EpisodeExtraction)

    def close(self) -> None:
        self.caller.close()

    def __enter__(self) -> ModelExtractor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def prompts_for(self, transcript: Transcript, open_items: list[OpenItem] | None = None) -> list[ToolPrompt]:
        """The part prompts for a transcript (one unless it exceeds the budget). ``open_items`` may
        hold both kinds of earlier item: open ones go to <open_items>, decisions and preferences to
        <current_decisions> (each bounded, :func:`jobs.models.split_offered`)."""
        items, decisions = split_offered(open_items)
        system = render(SYSTEM_TEMPLATE, tool_name=TOOL_NAME, open_items=bool(items), decisions=bool(decisions))
        parts = split_lines(transcript_lines(transcript), self.settings.transcript_token_budget)
        session_date = (transcript.started_at or transcript.ended_at).strftime("%Y-%m-%d %H:%M UTC")
        return [
            ToolPrompt(
                template=USER_TEMPLATE,
                system=system,
                user=render(
                    USER_TEMPLATE,
                    tool_name=TOOL_NAME,
                    part_number=n,
                    part_count=len(parts),
                    open_items=items,
                    decisions=decisions,
                    session_date=session_date,
                    purpose=transcript.purpose,
                    message_count=len(transcript.messages),
                    messages=part,
                ),
                tool_name=TOOL_NAME,
                tool_description=TOOL_DESCRIPTION,
                schema=self._schema,
            )
            for n, part in enumerate(parts, start=1)
        ]

    def batch_request(self, transcript: Transcript, open_items: list[OpenItem] | None = None) -> BatchRequest | None:
        """The Message Batches request for a transcript, offering the same open items and current
        decisions a live run would; None when the transcript needs more than one request (a batch
        cannot split and reduce, so it is left for a live run)."""
        items, decisions = split_offered(open_items)
        prompts = self.prompts_for(transcript, items + decisions)
        if len(prompts) != 1:
            return None
        params = prompts[0].request(self.settings.model, self.settings.max_output_tokens)
        return BatchRequest(
            params,
            prompts[0].prompt_hash,
            frozenset(i.event_id for i in items),
            frozenset(i.event_id for i in decisions),
        )

    def parse(self, message: Any) -> EpisodeExtraction | tuple[str, str]:
        """The episode in a Messages API answer to a request from :meth:`batch_request`, or
        (outcome, reason) when it is unusable (outcome: refusal, max_tokens or invalid)."""
        return parse_tool_output(message, TOOL_NAME, EpisodeExtraction)

    def batch_call(self, message: Any, prompt_hash: str) -> ModelCall:
        """The model-call row for a batch answer (template, usage, half-price cost, ``batch`` set);
        on an unusable answer set its ``outcome`` and ``error`` from :meth:`parse`."""
        return usage_call(self.settings, message, template=USER_TEMPLATE, prompt_hash=prompt_hash, batch=True)

    def extract(self, transcript: Transcript, open_items: list[OpenItem] | None = None) -> ExtractionResult:
        calls: list[ModelCall] = []
        prompts = self.prompts_for(transcript, open_items)
        # A failure raises a ModelError that carries every call made so far (jobs.llm.tools).
        partials = [self.caller.call(p, EpisodeExtraction, calls) for p in prompts]
        episode = self.reduce(transcript, partials, prompts[0].system, calls) if len(partials) > 1 else partials[0]
        return ExtractionResult(episode, model=self.name, prompt_version=self.prompt_version, calls=calls)

    def reduce(
        self, transcript: Transcript, partials: list[EpisodeExtraction], system: str, calls: list[ModelCall]
    ) -> EpisodeExtraction:
        """Merge part episodes in groups that fit the budget, level by level, until one remains."""
        session_date = (transcript.started_at or transcript.ended_at).strftime("%Y-%m-%d")

        def merge(group: list[str]) -> str:
            prompt = ToolPrompt(
                template=REDUCE_TEMPLATE,
                system=system,
                user=render(
                    REDUCE_TEMPLATE,
                    tool_name=TOOL_NAME,
                    session_date=session_date,
                    message_count=len(transcript.messages),
                    partials=group,
                ),
                tool_name=TOOL_NAME,
                tool_description=TOOL_DESCRIPTION,
                schema=self._schema,
            )
            return self.caller.call(prompt, EpisodeExtraction, calls).model_dump_json(exclude_none=True)

        texts = [p.model_dump_json(exclude_none=True) for p in partials]
        merged = reduce_levels(texts, estimate_tokens, self.settings.transcript_token_budget, merge)
        return EpisodeExtraction.model_validate_json(merged)
