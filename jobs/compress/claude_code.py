"""The claude-code compressor: the one :class:`~jobs.compress.model.ModelCompressor` (the Claude
compressor's prompts, validation and grounding) with each request run by the user's own Claude Code CLI
(:class:`jobs.llm.claude_cli.ClaudeCli`). Opt-in only, like the claude-code extractor
(:mod:`jobs.extract.claude_code`)."""

from __future__ import annotations

from jobs.compress.model import ModelCompressor
from jobs.config import Settings
from jobs.llm.claude_cli import ClaudeCli


def ClaudeCodeCompressor(settings: Settings, executable: str | None = None) -> ModelCompressor:
    """Compress a period through ``claude -p`` (model from EPISODES_MODEL). Named like a class, as it was one."""
    return ModelCompressor(settings, ClaudeCli(settings, executable))
