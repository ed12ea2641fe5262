"""The Claude Code CLI as a model caller: the user's own login, no API key of ours.

:class:`ClaudeCli` is a :class:`~jobs.llm.repair.RepairingCaller` whose requests run ``claude -p``
instead of the Messages API. Everything around the request is shared, not copied: the prompts (the
extractor and compressor render them as for Claude), the one-repair rule and the failures it raises
(:mod:`jobs.llm.repair`), the pydantic validation, and the grounding and dead-letter rules of the
jobs above. :mod:`jobs.extract.claude_code` and :mod:`jobs.compress.claude_code` hand it to the one
model extractor and compressor (:mod:`jobs.extract.model`, :mod:`jobs.compress.model`).

**Why the CLI directly, not the claude-agent-sdk package.** The SDK is an async wrapper that
starts the same CLI (its wheel bundles a copy) and speaks its stream-JSON protocol; for one
request with one structured answer it adds an event loop, a second CLI that may not be the one the
user logged in with, and a dependency, and hides the flags that matter here. One
``subprocess.run`` of the ``claude`` on PATH, with every flag spelled out, is shorter and shows
exactly what runs under the user's login.

**What a run may not do.** Each run is ``claude -p --output-format json --json-schema <schema>
--no-session-persistence --tools "" --setting-sources "" --strict-mcp-config --mcp-config
'{"mcpServers":{}}' --disable-slash-commands --system-prompt <ours> --model <EPISODES_MODEL>`` in a
scratch folder that is removed afterwards: no session file is written (so our runs never come back
as memory through ``episodes claude-code sync``), no user, project or local settings are read (so
none of the user's hooks run, our own SessionEnd hook included), no MCP server starts, no tool
can run. Managed (policy) settings still apply, as they must. Retries of the CLI itself are
bounded by ``CLAUDE_CODE_MAX_RETRIES`` (our ``max_retries``) and the whole run by
``claude_code_timeout_seconds``.

**How its answers map onto the Claude path.** With ``--json-schema`` the CLI offers the model a
``StructuredOutput`` tool and returns its input as ``structured_output``; the prompts name our
tool, so the name is swapped in what the CLI sends. The structured output is validated by the
pydantic model; a plain-text or empty answer, or one that fails validation, is repaired once (the
problem quoted), then it is an :class:`~jobs.errors.ExtractionError`. The CLI retries a schema-invalid answer itself (up to 5
times), so when it gives up that is an ExtractionError at once. Not logged in or rejected
credentials are a :class:`~jobs.errors.ConfigError` (the run stops; nothing is counted against
the session); the CLI missing too. API errors (429, 5xx, 529) and timeouts are a
:class:`~jobs.errors.TransientModelError` (retried later with backoff, then dead-lettered).
Tokens and ``total_cost_usd`` come from the CLI's result (for a subscription that figure is the
list-price equivalent the CLI reports, not a bill).

**No file reaches the model through an @-mention (issue 46, finding 1).** The CLI reads any
``@path`` in the prompt (after the start, a space or one of 。、？！; bare, ``@"quoted"``, ``~/``,
absolute, relative, ``../``, a folder's listing) into the model's context, whatever ``--tools`` says,
and the transcripts, the tool results in them and the stored summaries we compress are anyone's
text. :func:`inert_mentions` puts a WORD JOINER (U+2060, invisible, not whitespace) before every
``@`` of everything we hand the CLI (the system prompt and the text on stdin), in :meth:`ClaudeCli._run`,
the one place a request leaves us: the CLI then sees no mention, and the model still reads ``@``.
:func:`restore_mentions` takes our joiners out of what the model answers. The run's working folder
is an empty scratch folder as well. The environment, death with our process and the minimum
version are :mod:`jobs.llm.claude_process`'s.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from typing import Any

from jobs.config import Settings
from jobs.errors import ConfigError, ExtractionError, TransientModelError
from jobs.llm.claude_process import allowed_environment, require_version, run_child
from jobs.llm.repair import (
    Problem,
    RepairingCaller,
    T,
    ToolRequest,
    recorded,
    refusal_note,
    truncated_note,
    validate,
)
from jobs.llm.spend import label, record_usage
from jobs.models import ModelCall

EXECUTABLE = "claude"
STRUCTURED_TOOL = "StructuredOutput"  # the tool the CLI offers the model for --json-schema
NO_MCP = json.dumps({"mcpServers": {}})
BACKEND = "claude-code"
WORD_JOINER = "\u2060"  # before an "@": the CLI no longer reads it as a file mention


def inert_mentions(text: str) -> str:
    """``text`` with a WORD JOINER before every ``@``: no ``@path`` in it makes the CLI read a file."""
    return text.replace("@", WORD_JOINER + "@")


def restore_mentions(value: Any) -> Any:
    """``value`` (the model's answer: strings, lists, objects) without the joiners :func:`inert_mentions` added."""
    if isinstance(value, str):
        return value.replace(WORD_JOINER + "@", "@")
    if isinstance(value, list):
        return [restore_mentions(item) for item in value]
    if isinstance(value, dict):
        return {key: restore_mentions(item) for key, item in value.items()}
    return value


@dataclass(frozen=True)
class Answer:
    """What one run answered: its structured output (None: it gave none), why it stopped, its text."""

    output: Any
    stop_reason: str
    text: str = ""


def command(executable: str, settings: Settings, system: str, schema: dict[str, Any]) -> list[str]:
    """The CLI's arguments for one request (the user text goes on stdin)."""
    return [
        executable,
        "-p",
        "--output-format",
        "json",
        "--json-schema",
        json.dumps(schema),
        "--no-session-persistence",
        "--tools",
        "",
        "--setting-sources",
        "",
        "--strict-mcp-config",
        "--mcp-config",
        NO_MCP,
        "--disable-slash-commands",
        "--system-prompt",
        system,
        "--model",
        settings.model,
    ]


class ClaudeCli(RepairingCaller):
    """Sends each request through ``claude -p`` (see the module docstring); ``executable`` None:
    ``claude`` on PATH, looked up at each request."""

    def __init__(self, settings: Settings, executable: str | None = None) -> None:
        self.settings = settings
        self.executable = executable

    @property
    def label(self) -> str:
        """What episodes and model calls record as their model: ``claude-code:<model>`` (jobs.llm.spend)."""
        return label(BACKEND, self.settings.model)

    def request(self, prompt: ToolRequest) -> dict[str, Any]:
        # The prompts name our tool; here the model is offered the CLI's.
        return {
            "system": prompt.system.replace(prompt.tool_name, STRUCTURED_TOOL),
            "user": prompt.user.replace(prompt.tool_name, STRUCTURED_TOOL),
        }

    def read(self, response: Answer, prompt: ToolRequest, output: type[T]) -> T | Problem:
        if response.stop_reason == "refusal":
            return "refusal", "stop_reason refusal"
        if response.stop_reason == "max_tokens":
            return "max_tokens", "the answer was cut off at the output limit"
        if response.output is None:
            return "invalid", (
                "empty answer"
                if not response.text.strip()
                else f"plain text instead of the {STRUCTURED_TOOL} tool: {_one_line(response.text)[:120]}"
            )
        return validate(response.output, output, "the structured output")

    def repair(self, params: dict[str, Any], response: Answer, problem: Problem) -> dict[str, Any]:
        outcome, reason = problem
        if outcome == "max_tokens":
            note = truncated_note(f"Call the {STRUCTURED_TOOL} tool")
        elif outcome == "refusal":
            note = refusal_note(f"by calling the {STRUCTURED_TOOL} tool")
        elif response.output is not None:
            note = (
                f"Your previous answer called the {STRUCTURED_TOOL} tool with this input:\n"
                f"{json.dumps(response.output, ensure_ascii=False)}\nIt is invalid: {reason}. Call the tool "
                "again with corrected input."
            )
        else:
            note = f"You must call the {STRUCTURED_TOOL} tool. Problem: {reason}"
        return {**params, "user": params["user"] + "\n\n" + note}

    def send(self, prompt: ToolRequest, params: dict[str, Any], calls: list[ModelCall]) -> Answer:
        with recorded(prompt, self.label, calls) as call:
            result = self._run(params["system"], params["user"], prompt.schema, call, calls)
        usage = result.get("usage") or {}
        cost = result.get("total_cost_usd")
        record_usage(
            call,
            input_tokens=int(usage.get("input_tokens") or 0),
            output_tokens=int(usage.get("output_tokens") or 0),
            cache_read_tokens=int(usage.get("cache_read_input_tokens") or 0),
            cache_write_tokens=int(usage.get("cache_creation_input_tokens") or 0),
            cost_usd=float(cost) if isinstance(cost, (int, float)) else None,
        )
        return self._answer(result, call, calls)

    def _run(
        self, system: str, user: str, schema: dict[str, Any], call: ModelCall, calls: list[ModelCall]
    ) -> dict[str, Any]:
        executable = self.executable or shutil.which(EXECUTABLE)
        if executable is None:
            call.outcome, call.error = "error", "the claude CLI is not on PATH"
            raise ConfigError(
                "The claude-code extractor needs the Claude Code CLI (`claude`) on PATH: install it "
                "(npm install -g @anthropic-ai/claude-code) and log in, or choose another extractor."
            )
        env = allowed_environment(
            CLAUDE_CODE_MAX_RETRIES=str(self.settings.max_retries), CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1"
        )
        try:
            require_version(executable, env)
        except ConfigError as exc:
            call.outcome, call.error = "error", str(exc)
            raise
        timeout = self.settings.claude_code_timeout_seconds
        with tempfile.TemporaryDirectory(prefix="episodes-claude-") as scratch:
            try:
                done = run_child(
                    command(executable, self.settings, inert_mentions(system), schema),
                    input=inert_mentions(user),
                    cwd=scratch,
                    env=env,
                    timeout=timeout,
                )
            except subprocess.TimeoutExpired as exc:
                call.outcome, call.error = "transient", f"timeout after {timeout:g}s"
                raise TransientModelError(
                    f"the claude CLI did not answer within {timeout:g}s (timeout)", calls=calls
                ) from exc
            except OSError as exc:
                call.outcome, call.error = "error", str(exc)
                raise ConfigError(f"The claude CLI could not be started ({executable}): {exc}.") from exc
        try:
            result = json.loads(done.stdout)
            if not isinstance(result, dict):
                raise ValueError("not a JSON object")
        except ValueError:
            said = _last_line(done.stderr) or _last_line(done.stdout) or "no output"
            call.outcome, call.error = "transient", f"exit {done.returncode}: {said}"
            raise TransientModelError(
                f"the claude CLI failed (exit {done.returncode}) without a JSON result: {said}", calls=calls
            ) from None
        return result

    @staticmethod
    def _answer(result: dict[str, Any], call: ModelCall, calls: list[ModelCall]) -> Answer:
        said = _one_line(
            str(
                result.get("result")
                or "; ".join(map(str, result.get("errors") or []))
                or result.get("subtype")
                or "no reason given"
            )
        )
        if result.get("is_error"):
            status = result.get("api_error_status")
            call.error = said
            if "not logged in" in said.lower() or status in (401, 403):
                call.outcome = "error"
                raise ConfigError(
                    f"Claude Code is not logged in or its credentials were rejected ({said}): run "
                    "`claude` and log in (/login), then run again; or choose another extractor."
                )
            if result.get("subtype") == "error_max_structured_output_retries":
                call.outcome = "invalid"
                raise ExtractionError(f"schema-invalid answer after the claude CLI's own retries: {said}", calls=calls)
            if (status is not None and (status >= 500 or status in (408, 409, 429))) or result.get(
                "terminal_reason"
            ) == "api_error":
                call.outcome = "transient"
                code = f" {status}" if status is not None else ""
                raise TransientModelError(f"model service error{code} through the claude CLI: {said}", calls=calls)
            call.outcome = "error"
            raise ExtractionError(f"the claude CLI failed: {said}", calls=calls)
        stop = str(result.get("stop_reason") or "end_turn")
        return Answer(
            restore_mentions(result.get("structured_output")), stop, restore_mentions(str(result.get("result") or ""))
        )


def _one_line(text: str) -> str:
    return " ".join(text.split())[:300]


def _last_line(text: str) -> str:
    lines = [line for line in (text or "").splitlines() if line.strip()]
    return _one_line(lines[-1]) if lines else ""
