"""The claude-code extractor: the Claude path's prompts, validation, grounding, repair and
split-and-reduce, with each request run by the user's own Claude Code CLI (:mod:`jobs.llm.claude_cli`,
whose docstring says why the CLI directly rather than the claude-agent-sdk package, and which flags
keep our runs from leaving sessions or running the user's hooks and MCP servers).

Opt-in only (``--extractor claude-code`` or ``EPISODES_EXTRACTOR=claude-code``): `auto` never picks
it, because it spends the user's subscription. Its episodes record ``claude-code:<model>`` as their
model and the Claude path's prompt version: the same prompts ask for the same episode.
"""

from __future__ import annotations

from jobs.config import Settings
from jobs.extract.claude import AnthropicExtractor
from jobs.llm.claude_cli import ClaudeCli


class ClaudeCodeExtractor(AnthropicExtractor):
    """Extract an episode through ``claude -p`` (model from EPISODES_MODEL)."""

    def __init__(self, settings: Settings, executable: str | None = None) -> None:
        cli = ClaudeCli(settings, executable)
        super().__init__(settings, caller=cli)
        self.name = cli.label
