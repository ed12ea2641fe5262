"""The claude-code extractor: the one :class:`~jobs.extract.model.ModelExtractor` (the Claude path's
prompts, validation, grounding, repair and split-and-reduce) with each request run by the user's own
Claude Code CLI (:class:`jobs.llm.claude_cli.ClaudeCli`, whose docstring says why the CLI directly rather
than the claude-agent-sdk package, and which flags keep our runs from leaving sessions or running the
user's hooks and MCP servers).

Opt-in only (``--extractor claude-code`` or ``EPISODES_EXTRACTOR=claude-code``): `auto` never picks
it, because it spends the user's subscription. Its episodes record ``claude-code:<model>`` as their
model and the Claude path's prompt version: the same prompts ask for the same episode.
"""

from __future__ import annotations

from jobs.config import Settings
from jobs.extract.model import ModelExtractor
from jobs.llm.claude_cli import ClaudeCli


def ClaudeCodeExtractor(settings: Settings, executable: str | None = None) -> ModelExtractor:
    """Extract an episode through ``claude -p`` (model from EPISODES_MODEL; ``executable`` None: ``claude``
    on PATH). Named like a class, as it was one."""
    return ModelExtractor(settings, ClaudeCli(settings, executable))
