"""Counts in plain English: ``counted(1, "transcript")`` is "1 transcript", ``counted(2, "super-summary")``
"2 super-summaries". One helper, so no command prints "1 transcripts" and no line spells its own rule."""

from __future__ import annotations


def plural(noun: str) -> str:
    """The plural of ``noun`` (the last word of it): "summary" -> "summaries", "call" -> "calls"."""
    if noun.endswith("y") and len(noun) > 1 and noun[-2] not in "aeiou":
        return noun[:-1] + "ies"
    if noun.endswith(("s", "x", "ch", "sh")):
        return noun + "es"
    return noun + "s"


def counted(n: int, noun: str, many: str | None = None) -> str:
    """``n`` and ``noun``, in the plural unless ``n`` is 1; ``many`` is the plural where the rule is wrong."""
    return f"{n:,} {noun if n == 1 else (many or plural(noun))}"
