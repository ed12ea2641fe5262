"""Model access shared by extraction and compression: the one call-repair-fail rule every back end
follows (:mod:`jobs.llm.repair`), forced tool calls to Claude validated into pydantic models
(:mod:`jobs.llm.tools`), the client and prices (:mod:`jobs.llm.client`), OpenAI-compatible servers
(:mod:`jobs.llm.openai_chat`), the Claude Code CLI (:mod:`jobs.llm.claude_cli`), spend and the daily
caps (:mod:`jobs.llm.spend`), and token budgets with hierarchical reduce (:mod:`jobs.llm.budget`)."""

from jobs.llm.budget import pack, reduce_levels
from jobs.llm.client import cost_usd, make_client, usage_call
from jobs.llm.tools import ToolCaller, ToolPrompt, parse_tool_output

__all__ = ["ToolCaller", "ToolPrompt", "cost_usd", "make_client", "pack", "parse_tool_output", "reduce_levels",
           "usage_call"]
