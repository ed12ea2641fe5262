"""What text stands for an episode when it is embedded (and full-text indexed)."""

from __future__ import annotations

from collections.abc import Sequence


def episode_text(summary: str, topic_tags: Sequence[str], events: Sequence[str], entities: Sequence[str]) -> str:
    """The summary, then ``Topics: <tags>.``, each key event's sentence, then ``Mentions: <names>.``"""
    parts = [summary.strip()]
    if topic_tags:
        parts.append("Topics: " + ", ".join(topic_tags) + ".")
    parts.extend(e.strip() for e in events if e.strip())
    if entities:
        parts.append("Mentions: " + ", ".join(entities) + ".")
    return "\n".join(parts)
