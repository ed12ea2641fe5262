"""Model access shared by extraction and compression: the one call-repair-fail rule every back end
follows (:mod:`jobs.llm.repair`), forced tool calls to Claude validated into pydantic models
(:mod:`jobs.llm.tools`), the client and prices (:mod:`jobs.llm.client`), OpenAI-compatible servers
(:mod:`jobs.llm.openai_chat`), the Claude Code CLI (:mod:`jobs.llm.claude_cli`), spend and the daily
caps (:mod:`jobs.llm.spend`), and token budgets with hierarchical reduce (:mod:`jobs.llm.budget`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from jobs.lazy import lazy_names

if TYPE_CHECKING:
    from jobs.llm.budget import pack, reduce_levels
    from jobs.llm.client import cost_usd, make_client, usage_call
    from jobs.llm.tools import ToolCaller, ToolPrompt, parse_tool_output

# Imported at first use (jobs.lazy): `episodes status` reads jobs.llm.spend without the SDK, pydantic or Jinja2.
_WHERE = {
    "pack": ".budget",
    "reduce_levels": ".budget",
    "cost_usd": ".client",
    "make_client": ".client",
    "usage_call": ".client",
    "ToolCaller": ".tools",
    "ToolPrompt": ".tools",
    "parse_tool_output": ".tools",
}
__getattr__, __dir__ = lazy_names(globals(), _WHERE)

__all__ = [
    "ToolCaller",
    "ToolPrompt",
    "cost_usd",
    "make_client",
    "pack",
    "parse_tool_output",
    "reduce_levels",
    "usage_call",
]
