"""The one token estimate every budget in episodes is counted with: characters / 4.

Its own module, importing nothing, so that what only counts tokens (recall's fitting and block,
on the cold path of the Claude Code SessionStart hook) does not import :mod:`jobs.models`, whose
pydantic models take a third of that process's start to build. jobs.models re-exports it.
"""

from __future__ import annotations


def estimate_tokens(text: str) -> int:
    """Rough token count used for budgets everywhere: characters / 4 (English prose ~ 4 chars a token)."""
    return (len(text) + 3) // 4
