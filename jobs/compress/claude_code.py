"""The claude-code compressor: the Claude compressor's prompts, validation and grounding, with each
request run by the user's own Claude Code CLI (:mod:`jobs.llm.claude_cli`). Opt-in only, like the
claude-code extractor (:mod:`jobs.extract.claude_code`)."""

from __future__ import annotations

from jobs.compress.claude import AnthropicCompressor
from jobs.config import Settings
from jobs.llm.claude_cli import ClaudeCli


class ClaudeCodeCompressor(AnthropicCompressor):
    """Compress a period through ``claude -p`` (model from EPISODES_MODEL)."""

    def __init__(self, settings: Settings, executable: str | None = None) -> None:
        cli = ClaudeCli(settings, executable)
        super().__init__(settings, caller=cli)
        self.name = cli.label
